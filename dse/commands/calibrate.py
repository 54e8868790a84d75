"""`dse calibrate RUNS -o my-cluster.json`: the model's factors refitted on one's own measured runs.

RUNS is a design table (CSV or Parquet, as `dse evaluate` reads it) with one measurement per row:
``measured_tokens_per_s_per_gpu``, or ``measured_step_time_s`` (converted with the row's global_batch x
seq_len / n_gpus), or a Megatron-LM / NeMo training log (a ``log`` column naming the file, relative to
RUNS, or ``--log ROW=PATH`` with ROW the row's ``run_id``, or its number from 1 where the table has none),
whose steady iterations' median step time is the measurement (dse.train_logs).

The factors the runs inform are refitted (objectives.fitting.own_runs: the bounded least squares of
``python -m objectives.fitting.fit``, from the shipped calibration; ``--factors`` names the ones it may move), each
run is predicted again leaving it out (each fold refitted), and the file written holds the factors, what was
fitted, the runs file's name and sha256, the date, the per-run residuals and the prediction intervals
derived from them. ``dse evaluate --calibration``, ``dse validate --calibration`` and a space's
``calibration:`` key read it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from dse.errors import UserError
from dse.tables import describe_input_error, read_table
from objectives import InputError

__all__ = ["add_parser", "run", "load_calibration"]


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="how the model fits your own cluster: its factors refitted on your measured runs",
                       description=__doc__)
    p.add_argument("runs", help="CSV or Parquet: design-table columns plus a measurement (or a log) per row")
    p.add_argument("-o", "--out", required=True, help="the calibration file to write (JSON)")
    p.add_argument("--factors", metavar="A,B", help="the factors the fit may move (default: every one the runs "
                   "inform), e.g. kernel_overhead_s,attn_kernel_scale or kernel_overhead_s[megatron-core]")
    p.add_argument("--log", action="append", default=[], metavar="ROW=PATH",
                   help="a Megatron-LM or NeMo log measuring row ROW (its run_id, else its number from 1)")
    p.add_argument("--calibration", help="start from this calibration file instead of the shipped one")
    p.add_argument("--no-held-out", action="store_true", help="skip the leave-one-out refits")
    p.set_defaults(run=run)


def load_calibration(path: str | Path | None):
    """A calibration file as objectives.Calibration (None: the shipped one); a bad file is one line."""
    from objectives.calibration import Calibration

    if path is None:
        return Calibration.load()
    try:
        return Calibration.read(path)
    except InputError as exc:
        raise UserError(str(exc)) from None


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _factors(text: str | None) -> list[str] | None:
    from objectives.fitting.fit import BOX, label

    if text is None:
        return None
    valid = sorted({b[0] for b in BOX} | {label(j) for j in range(len(BOX))})
    names = [t.strip() for t in text.split(",") if t.strip()]
    for name in names or [""]:
        if name not in valid:
            raise UserError(f"unknown factor {name!r}; valid: {', '.join(valid)}", where="--factors")
    return names


def _logs(runs, args) -> list[dict]:
    """Each log's steady step time into the row's measured_step_time_s; what was read, for the provenance."""
    from dse.train_logs import read_log
    from objectives.fitting.own_runs import MEASURED, STEP_TIME

    wanted = {}  # row -> (path, where)
    base = Path(args.runs).parent
    if "log" in runs.columns:
        for i, cell in enumerate(runs["log"].tolist()):
            if isinstance(cell, str) and cell.strip():
                wanted[i] = (base / cell.strip(), f"{args.runs}, row {i + 1}, column 'log'")
    ids = runs["run_id"].astype(str).str.strip().tolist() if "run_id" in runs.columns else None
    for item in args.log:
        key, sep, path = item.partition("=")
        if not sep or not path:
            raise UserError(f"{item!r} is not ROW=PATH", where="--log")
        key = key.strip()
        rows = [i for i, v in enumerate(ids) if v == key] if ids is not None else \
            ([int(key) - 1] if key.isdigit() and 1 <= int(key) <= len(runs) else [])
        if not rows:
            valid = "a run_id of the table" if ids is not None else f"a row number from 1 to {len(runs)}"
            raise UserError(f"row {key!r} is not {valid}", where=f"--log {item}")
        wanted[rows[0]] = (Path(path), f"--log {item}")
    read = []
    for i, (path, where) in sorted(wanted.items()):
        if MEASURED in runs.columns and str(runs[MEASURED].iloc[i]).strip() not in ("", "nan", "None"):
            raise UserError(f"has both '{MEASURED}' and a log: give one measurement", where=f"{args.runs}, row {i + 1}")
        timing = read_log(path, float(runs["global_batch"].iloc[i]) if "global_batch" in runs.columns else None,
                          where=where)
        if STEP_TIME not in runs.columns:
            runs[STEP_TIME] = np.nan
        runs.loc[i, STEP_TIME] = timing.step_time_s
        read.append({"row": i + 1, "log": str(path), "sha256": _sha256(path), "format": timing.kind,
                     "lines_used": timing.lines, "first_iteration": timing.first_iteration,
                     "step_time_s": timing.step_time_s, "log_tflop_s_per_gpu": timing.tflop_s_per_gpu})
    return read


def _err(pred, meas) -> str:
    return f"{pred:>10.0f} {pred / meas - 1:>+7.1%}"


def _print(c, names) -> None:
    from objectives.fitting.fit import BOX, label

    m = c.runs["measured_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    before = c.before["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    after = c.after["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    held = None if c.held_out is None else c.held_out["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    head = f"{'run':<10} {'measured':>10} {'before':>10} {'error':>7} {'after':>10} {'error':>7}"
    print(head + (f" {'held out':>10} {'error':>7}" if held is not None else ""))
    for i in range(len(m)):
        line = f"{names[i]:<10} {m[i]:>10.0f} {_err(before[i], m[i])} {_err(after[i], m[i])}"
        print(line + (f" {_err(held[i], m[i])}" if held is not None else ""))
    mape = [np.mean(np.abs(p / m - 1)) for p in (before, after) + ((held,) if held is not None else ())]
    print(f"MAPE of tokens/s per GPU over {len(m)} runs: {mape[0]:.1%} shipped, {mape[1]:.1%} calibrated"
          + (f", {mape[2]:.1%} held out (leave one {c.folds} out, each fold refitted)" if held is not None else ""))
    print()
    print(f"{'factor':<38} {'before':>10} {'after':>10} {'+-1 se':>8}  runs")
    for j in range(len(BOX)):
        status = c.fit.plan.status(j)
        if status == "fixed":
            continue
        se = c.fit.se_log[j]
        error = "at bound" if not np.isfinite(se) else (f"{np.expm1(se):.0%}" if se < 1.0 else "> 170%")
        print(f"{label(j):<38} {np.exp(c.fit.x0[j]):>10.4g} {np.exp(c.fit.x[j]):>10.4g} {error:>8}  "
              f"{int(c.fit.plan.informing_runs[j])}" + ("  (with a prior toward before)" if status == "prior" else ""))
    print(f"({sum(c.fit.plan.status(j) == 'fixed' for j in range(len(BOX)))} factors the runs do not inform keep "
          "their values)")


def run(args) -> int:
    import dse
    import objectives
    from objectives.fitting.own_runs import calibrate, record
    from objectives.training.intervals import INTERVAL_PATH, load_params

    runs = read_table(args.runs)
    if runs.empty:
        raise UserError("has no rows", where=args.runs)
    factors = _factors(args.factors)
    start = load_calibration(args.calibration)
    logs = _logs(runs, args)
    base = start.interval_params or load_params(INTERVAL_PATH)[0]
    names = runs["run_id"].astype(str).tolist() if "run_id" in runs.columns else [str(i + 1) for i in range(len(runs))]

    def progress(k, n):
        print(f"\rheld out {k}/{n}", end="", file=sys.stderr, flush=True)

    try:
        c = calibrate(runs, start, factors, cross_validate=not args.no_held_out, base_intervals=base,
                      progress=progress if sys.stderr.isatty() else None)
    except InputError as exc:
        raise describe_input_error(exc, args.runs) from None
    if sys.stderr.isatty() and c.held_out is not None:
        print(file=sys.stderr)
    _print(c, names)
    provenance = {
        "runs_file": Path(args.runs).name, "runs_sha256": _sha256(args.runs), "runs": len(runs),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "dse_version": dse.__version__, "objectives_version": objectives.__version__,
        "started_from": str(args.calibration) if args.calibration else "objectives/calibration.json (shipped)",
        "factors_asked": factors or "every factor the runs inform", "logs": logs,
        "command": " ".join(["dse calibrate", str(args.runs), "-o", str(args.out)]
                            + ([f"--factors {args.factors}"] if args.factors else [])
                            + [f"--log {item}" for item in args.log]
                            + ([f"--calibration {args.calibration}"] if args.calibration else [])),
    }
    out = record(c, provenance)
    try:
        Path(args.out).write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", where=args.out) from None
    print(f"wrote {args.out}")
    return 0
