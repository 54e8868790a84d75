"""The `dse` console script: one subcommand per module, each with `add_parser` and `run`."""

from __future__ import annotations

import argparse
import importlib
import sys

from dse.errors import EXIT_USAGE, UserError

# subcommand -> module implementing `add_parser(subparsers)` and `run(args) -> int`
COMMANDS = {
    "evaluate": "dse.commands.evaluate",
    "validate": "dse.commands.validate",
    "sweep": "dse.commands.sweep",
    "report": "dse.commands.report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # command not built yet
                continue
            raise
        mod.add_parser(sub)
    return parser



def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed one line of usage error
        return int(exc.code or 0)
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        print(f"dse {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"dse {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
