"""`dse report RUN_DIR [RUN_DIR ...]`: a Pareto report a roadmap review can read.

Writes ``report.html`` (one self-contained page: the front, a sortable table of its designs, what bounds
each one, and which hardware change pays most) and ``report.md`` with PNG figures, into the run directory
(``--out`` to choose). Several runs are overlaid on the first run's objectives (``RUN_A/compare/`` by default).
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="what a run found, as a page to review: report.html and report.md of one run, or several overlaid",
                       description=__doc__)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories (results/<run>)")
    p.add_argument("--out", metavar="DIR", help="where to write (default: the run, or RUN_A/compare for several)")
    p.add_argument("--no-sensitivity", action="store_true", help="skip re-scoring the front with better hardware")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dse.report import write_report
    from dse.report.buyer import terminal_text
    from dse.report.data import load_runs

    paths = write_report(args.runs, args.out, with_sensitivity=not args.no_sensitivity)
    size = paths["html"].stat().st_size
    print(f"wrote {paths['html']} ({size / 1e6:.2f} MB) and {paths['md']}")
    runs = load_runs(args.runs)
    for r in runs:  # the design to buy, why, and the best per GPU (provider, instance), as the page has them
        print(f"\n{r.name}: " if len(runs) > 1 else "\n", terminal_text(r), sep="")
    return 0
