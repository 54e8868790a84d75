"""`dse whatif RUN_DIR --vary FIELD=V1,V2,...`: what a hardware change is worth on a run's front.

Each front design is scored again with the hardware field set to each value (the mapping searched again),
and the change is said in the objectives' units and in money: the run cost saved (a serving run: the cost
per million output tokens) and the break-even price, the price per GPU (owned; per GPU-hour rented) at which
the changed hardware costs the run what it does today (dse/report/whatif.py). Fields: HBM bandwidth and
capacity, scale-up (NVLink) bandwidth and domain size, NIC bandwidth, peak rates and GEMM efficiency per
precision, power. ``--out`` writes the per-design table (.csv or .parquet).
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("whatif", help="what a hardware change is worth on a run's front, in its units and in money",
                       description=__doc__)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (results/<run>)")
    p.add_argument("--vary", metavar="FIELD=VALUES", action="append", required=True,
                   help="a hardware field and the values to try, e.g. scaleup_size=72,144 (repeat for more fields)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="front designs listed one by one (default 5)")
    p.add_argument("--out", metavar="FILE", help="write the per-design table (.csv or .parquet)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from dse.errors import UserError
    from dse.report.data import load_run
    from dse.report.names import design_names
    from dse.report.whatif import parse_vary, whatif, whatif_text

    varies = [parse_vary(v) for v in args.vary]  # every flag checked before any work
    if args.show < 0:
        raise UserError(f"--show {args.show}: must be 0 or more")
    r = load_run(args.run_dir)
    names = design_names(r.front, r.design_columns) if not r.front.empty else []
    tables = []
    for i, (field, values) in enumerate(varies):
        t = whatif(r, field, values)
        tables.append(t)
        print(("\n" if i else "") + whatif_text(r, t, names, args.show))
    if args.out:
        from dse.tables import write_table

        table = pd.concat(tables, ignore_index=True)
        write_table({c: table[c].to_numpy() for c in table.columns}, args.out)
        print(f"wrote {args.out}")
    return 0
