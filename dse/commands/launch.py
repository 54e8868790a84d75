"""`dse launch RUN_DIR [DESIGN]`: write the files that run a run's design.

DESIGN is a front design's number as `dse report` numbers them (1 is the best on the first objective);
without it, the design the report recommends. A training design gets Megatron-Bridge overrides and a
launch command; a serving design the engine's command (trtllm-serve with its LLM-API options, vllm serve,
or sglang.launch_server; each pool its own for a disaggregated design). A README.txt says which design,
which files, and that the values are the model's choice, to check against the engine's documentation.
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="how to run a chosen design: its engine config and launch command",
                       description=__doc__)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (results/<run>)")
    p.add_argument("design", metavar="DESIGN", nargs="?", type=int,
                   help="front design number, 1-based as the report numbers them (default: the recommended one)")
    p.add_argument("--out", metavar="DIR", help="where to write (default: RUN_DIR/launch)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dse.launch import write_launch

    done = write_launch(args.run_dir, args.design, args.out)
    print(f"design {done.design.name!r} ({done.design.how}): wrote {len(done.paths)} files to {done.out}")
    for path in done.paths:
        print(f"  {path.name}")
    return 0
