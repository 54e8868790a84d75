"""`dse evaluate INPUT -o OUT.parquet`: every metric of every design in a table.

Mapping columns that are absent, or blank in a row, are searched for that row (the best feasible mapping
by exhaustive vectorized search); rows with a complete mapping are evaluated as given, and a given
mapping that cannot divide the cluster is a user error (exit 2).
"""

from __future__ import annotations

import numpy as np

import objectives
from dse.tables import describe_input_error, read_table, to_columns, write_table
from objectives.mapping import blank_cells
from objectives.pipeline import check_layout, prepare

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a design table (CSV or Parquet)", description=__doc__)
    p.add_argument("input", help="CSV or Parquet with design-table columns")
    p.add_argument("-o", "--out", required=True, help="output Parquet (or .csv)")
    p.set_defaults(run=run)


def run(args) -> int:
    frame = read_table(args.input)
    if frame.empty:
        from dse.errors import UserError
        raise UserError("has no rows", where=args.input)
    cols = to_columns(frame)
    n = len(frame)
    complete = np.ones(n, dtype=bool)
    for name in objectives.MAPPING_COLUMNS:
        if name in ("tp", "pp", "micro_batch"):
            complete &= ~blank_cells(cols[name]) if name in cols else False
    try:
        if complete.any():
            _, floats = prepare({k: v[complete] for k, v in cols.items()})
            try:
                check_layout(floats)
            except objectives.InputError as exc:
                exc.row = int(np.flatnonzero(complete)[exc.row])
                raise
        out = objectives.search_mapping(cols)
    except objectives.InputError as exc:
        raise describe_input_error(exc, args.input) from None
    write_table(out, args.out, metadata={"dse.units": repr(objectives.METRICS)})
    feasible = int(np.sum(out["feasible"]))
    print(f"wrote {args.out}: {n} designs, {feasible} feasible, {len(out)} columns")
    return 0
