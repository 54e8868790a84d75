"""The `dse` console script: one subcommand per module, each with `add_parser` and `run`."""


from __future__ import annotations

import argparse
import importlib
import sys

from dse.errors import EXIT_USAGE, UserError

#: what ``dse --help`` says above the commands: what the tool answers, and the command for each question
DESCRIPTION = """What GPU cluster to build or rent to train or serve a model, and how to run it there: a sweep of a
declarative space (GPU type and count, cloud instance or owned, parallelism, network, storage) through an
analytical model of step time, memory, failures, power and cost, each with an 80% interval.

  which design, and how sure?        dse sweep spaces/default.yaml   (then dse report RUN_DIR)
  how do I run the chosen design?    dse launch RUN_DIR [N]   (engine config and launch command)
  what does this exact design do?    dse evaluate designs.csv -o out.parquet
  how far off is the model?          dse validate   (--kind serving)
  what is a hardware change worth?   dse whatif RUN_DIR --vary gpu_hbm_tbyte_s=16
  what may a space name?             dse catalog gpus|models|networks|storage|instances|metrics
  how does the model fit my cluster? dse calibrate my-runs.csv -o my-cluster.json

Documentation: docs/index.md (the space file's keys: docs/space-reference.md)."""

# subcommand -> module implementing `add_parser(subparsers)` and `run(args) -> int`
COMMANDS = {
    "evaluate": "dse.commands.evaluate",
    "validate": "dse.commands.validate",
    "sweep": "dse.commands.sweep",
    "report": "dse.commands.report",
    "catalog": "dse.commands.catalog",
    "calibrate": "dse.commands.calibrate",
    "launch": "dse.commands.launch",
    "whatif": "dse.commands.whatif",
}


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake in one line (``dse sweep: error: argument --seed: invalid int value:
    '0x10' (dse sweep --help)``) instead of the usage block above it; exit 2 as argparse does. Its
    subcommands' parsers are of this class too (``add_subparsers`` makes them with the parent's class)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} ({self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dse", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # command not built yet
                continue
            raise
        mod.add_parser(sub)
    return parser


def version_text() -> str:
    """``dse X (objectives Y, calibration objectives/calibration.json)``: what ``dse --version`` prints."""
    from dse import __version__

    try:
        import objectives

        model = f"objectives {getattr(objectives, '__version__', '?')}"
    except ImportError:
        model = "objectives not installed"
    return f"dse {__version__} ({model})"


def one_line(text: str) -> str:
    """``text`` as one printable line: a control character or line break a user's value brought into a
    message (a key, a catalog id) is shown escaped, as Python writes it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return int(exc.code or 0)
    import numpy as np

    try:
        with np.errstate(all="ignore"):  # NaN and inf from extreme inputs are data (infeasible rows), not noise
            return int(args.run(args) or 0)
    except UserError as exc:
        print(f"dse {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader went away (`dse catalog metrics | head`): nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"dse {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
