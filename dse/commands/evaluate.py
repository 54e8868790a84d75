"""`dse evaluate INPUT -o OUT.parquet`: every metric of every design in a table.

A table with ``input_len`` and ``output_len`` columns is a serving table, evaluated by the serving model
(dse/commands/evaluate_serving.py). Otherwise mapping columns that are absent, or blank in a row, are
searched for that row (the best feasible mapping
by exhaustive vectorized search); rows with a complete mapping are evaluated as given, and a given
mapping that cannot divide the cluster is a user error (exit 2). ``--columns a,b,c`` writes those
columns alone, in that order (an input column only when named); an economics module that none of them
needs is not run. A Parquet output is computed and written in slices of ``SLICE_ROWS`` rows, one row group
each, so that memory stays bounded however long the table is: a slice holds its rows' outputs, and its
mapping search enumerates at most ``objectives.mapping.CANDIDATE_BUDGET`` candidate mappings at a time
(~45 MiB), however many each row has (a slice of 65,536 blank rows has some 72 million). Measured by
benchmarks/evaluate_memory.py, blank mappings: peak RSS 356 MiB for 20,000 rows, 597 MiB for 65,536 (one
slice), 979 MiB for 200,000 (four); the growth is the slices' output columns (the writer holds one
slice's while the next is computed), which levels off after a few slices, not the search.
"""

from __future__ import annotations

import difflib
import sys

import numpy as np

import objectives
from dse.errors import UserError, did_you_mean
from dse.tables import read_columns, write_evaluated
from objectives.mapping import blank_cells

__all__ = ["add_parser", "run", "SLICE_ROWS"]

#: rows evaluated and written at a time (one Parquet row group each): large enough that a slice's fixed
#: costs (catalog expansion, one row group's column headers) are small against its rows, small enough
#: that its outputs stay a few tens of megabytes
SLICE_ROWS = 1 << 16


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="what given designs do: every metric of each row of a table, blank mapping cells searched",
                       description=__doc__)
    p.add_argument("input", help="CSV or Parquet with design-table columns")
    p.add_argument("-o", "--out", required=True, help="output Parquet (or .csv)")
    p.add_argument("--columns", metavar="A,B,C",
                   help="write only these columns, in this order (default: every input and output column)")
    p.add_argument("--calibration", metavar="FILE",
                   help="a calibration file (dse calibrate) instead of the shipped objectives/calibration.json")
    p.set_defaults(run=run)


def _requested(text: str) -> list[str]:
    """The names of ``--columns``, in order; a name given twice or none at all is a UserError."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UserError("names no column; give a comma-separated list such as step_time_s,mfu", where="--columns")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(f"names {', '.join(repr(t) for t in twice)} more than once", where="--columns")
    return names


def _check_names(names: list[str], valid) -> None:
    """A UserError for the first name that is not an output column: what is close to it, and every valid name."""
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, list(valid), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise UserError(f"unknown column '{name}'{hint} valid: {', '.join(valid)}", where="--columns")


def _output_names(cols: dict[str, np.ndarray]) -> list[str] | None:
    """The columns the evaluation of this table gives (those of its first row: they depend on which
    columns the table has, not on their values); None if that row is bad input, which the whole table's
    evaluation then reports."""
    try:
        return list(objectives.search_mapping({k: v[:1] for k, v in cols.items()}))
    except objectives.InputError:
        return None


def unknown_columns(names) -> list[str]:
    """The columns of an input table the model does not know (neither a design-table column nor a metric)."""
    known = set(objectives.INPUT_COLUMNS) | set(objectives.METRICS) | set(objectives.RENAMED_COLUMNS)
    return [name for name in names if name not in known]


def _warn_unknown(names, source: str) -> None:
    """One line on stderr naming each unknown column, with the closest known names: it is carried through."""
    unknown = unknown_columns(names)
    if not unknown:
        return
    valid = sorted(objectives.INPUT_COLUMNS)
    said = ", ".join(f"'{name}'" + (f" ({did_you_mean(name, valid).strip()})" if did_you_mean(name, valid) else "")
                     for name in unknown)
    what = "a column the model does not know" if len(unknown) == 1 else f"{len(unknown)} columns the model does not know"
    print(f"dse evaluate: warning: {source}: {what}, carried through to the output unchanged: {said}", file=sys.stderr)


def stop_on_sigterm() -> None:
    """A SIGTERM (a batch scheduler's kill, `kill PID`) ends the command as Ctrl-C does, so that the output
    being written is removed with its hidden temporary (dse.parquet writes atomically) instead of left
    behind; the exit status is 130, as for an interrupt. (A SIGKILL cannot be caught: its temporary, named
    after the output, is replaced and removed by the next write of that output.)"""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def run(args) -> int:
    from dse.cluster.memory import keep_freed_memory
    from dse.commands.calibrate import load_calibration

    # this process only evaluates: keep the memory each slice frees for the next one, as the scoring
    # actors do (docs/performance.md: the serving model's 1M rows in slices, 0.45 s of page faults -> 0.02 s)
    keep_freed_memory()
    stop_on_sigterm()
    cal = load_calibration(getattr(args, "calibration", None))
    cols = read_columns(args.input)
    n = len(next(iter(cols.values()))) if cols else 0
    if n == 0:
        raise UserError("has no rows", where=args.input)
    names = _requested(args.columns) if args.columns is not None else None
    if objectives.is_serving_table(cols):  # input_len and output_len: the serving model (docs/serving.md)
        from dse.commands.evaluate_serving import run_serving

        return run_serving(args, cols, n, names, SLICE_ROWS, _check_names)
    if names is not None and (valid := _output_names(cols)) is not None:
        _check_names(names, valid)
    complete = np.ones(n, dtype=bool)
    for name in objectives.MAPPING_COLUMNS:
        if name in ("tp", "pp", "micro_batch"):
            complete &= ~blank_cells(cols[name]) if name in cols else False
    outputs = None if names is None else [*names, "feasible"]
    feasible = 0

    def evaluated(part: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
        """The evaluation of rows lo..hi (``part``)."""
        nonlocal feasible
        out = objectives.search_mapping(part, outputs=outputs, check_rows=complete[lo:hi], cal=cal)
        if names is not None and lo == 0:  # the columns depend on which the table has, not on its rows
            _check_names(names, list(out))
        feasible += int(np.sum(out["feasible"]))
        return out

    width = write_evaluated(evaluated, cols, n, args.out, args.input, {"dse.units": repr(objectives.METRICS)}, names,
                            SLICE_ROWS)
    _warn_unknown(cols, args.input)  # after the table was accepted: a bad table's answer stays one line
    print(f"wrote {args.out}: {n} designs, {feasible} feasible, {width} columns")
    return 0
