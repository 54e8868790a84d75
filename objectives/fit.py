"""Fit the model's few efficiency factors against the published runs, reproducibly.

    python -m objectives.fit                    # writes objectives/calibration.json and prints the errors
    python -m objectives.fit --cross-validate   # leave-one-source-out error (about 12 fits); writes the
                                                # held-out residuals (catalog/loso_residuals.csv) and the
                                                # prediction intervals derived from them (catalog/intervals.json)

The residual of a run is log(predicted / measured tokens/s per GPU), weighted so that every source weighs
the same (as in the validation's headline error). Trust-region least squares (scipy.optimize.least_squares,
deterministic, finite differences) over the log of each factor inside its physical box, started from the
documented defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pandas as pd

from objectives.calibration import CALIBRATION_PATH, FITTED, STACKS, Calibration
from objectives.validation import RUNS_PATH, load_runs, predict, source_of, summarize

__all__ = ["residuals", "fit", "main"]

# (name, index or None, lower, upper): the search box of each fitted factor
BOX = [("kernel_overhead_s", i, 1e-6, 3e-4) for i in range(len(STACKS))] + \
      [("attn_kernel_scale", i, 0.3, 1.5) for i in range(len(STACKS))] + \
      [("attn_seq_half", None, 16.0, 16384.0), ("tp_comm_exposed", None, 0.05, 1.0),
       ("ep_comm_exposed", None, 0.05, 1.0),
       ("moe_expert_overhead_s", None, 1e-7, 1e-3), ("gemm_n_half", None, 1.0, 2048.0)]


def _to_cal(x: np.ndarray, base: Calibration) -> Calibration:
    values = {"kernel_overhead_s": list(base.kernel_overhead_s), "attn_kernel_scale": list(base.attn_kernel_scale)}
    scalars = {}
    for xi, (name, idx, lo, hi) in zip(x, BOX):
        v = float(np.clip(np.exp(xi), lo, hi))
        if idx is None:
            scalars[name] = v
        else:
            values[name][idx] = v
    return base.replace(kernel_overhead_s=tuple(values["kernel_overhead_s"]),
                        attn_kernel_scale=tuple(values["attn_kernel_scale"]), **scalars)


def _to_x(cal: Calibration) -> np.ndarray:
    return np.log([getattr(cal, name)[idx] if idx is not None else getattr(cal, name) for name, idx, _, _ in BOX])


def residuals(cal: Calibration, runs) -> np.ndarray:
    """Source-weighted log errors: each source's squared residuals sum to its mean squared log error."""
    result = predict(runs, cal)
    log_err = np.log(result["predicted_tokens_per_s_per_gpu"].to_numpy() / result["measured_tokens_per_s_per_gpu"].to_numpy())
    sources = result["source_key"].map(source_of)
    weight = 1.0 / np.sqrt(sources.map(sources.value_counts()).to_numpy())
    return log_err * weight


def fit(runs, start: Calibration | None = None, max_nfev: int = 400) -> Calibration:
    from scipy.optimize import least_squares

    start = start or Calibration()
    lo = np.log([b[2] for b in BOX])
    hi = np.log([b[3] for b in BOX])
    x0 = np.clip(_to_x(start), lo + 1e-9, hi - 1e-9)
    res = least_squares(lambda x: residuals(_to_cal(x, start), runs), x0, bounds=(lo, hi),
                        diff_step=1e-3, max_nfev=max_nfev, x_scale=1.0)
    return _to_cal(res.x, start)


def cross_validate(runs, max_nfev: int, residuals_path=None, intervals_path=None, command: str = "") -> int:
    """Out-of-sample error: each source predicted by factors fitted without it. The held-out predictions'
    residuals go to ``residuals_path`` and the prediction intervals derived from them to ``intervals_path``
    (objectives.interval_fit)."""
    from objectives import interval_fit

    sources = runs["source_key"].map(source_of)
    rows, held_out = [], []
    for name in sorted(sources.unique()):
        held = sources == name
        cal = fit(runs[~held].reset_index(drop=True), max_nfev=max_nfev)
        result = predict(runs[held].reset_index(drop=True), cal)
        held_out.append(result)
        s = summarize(result)
        rows.append((name, int(held.sum()), s.mape_row_weighted))
        print(f"{name:<24} {int(held.sum()):>4} runs  held-out MAPE {s.mape_row_weighted:6.1%}", flush=True)
    mean = float(np.mean([r[2] for r in rows]))
    print(f"leave-one-source-out MAPE, every source weighing the same: {mean:.1%}")
    if residuals_path:
        table = interval_fit.residual_table(pd.concat(held_out, ignore_index=True), predict(runs))
        interval_fit.write_residuals(table, residuals_path, command)
        print(f"wrote {residuals_path}")
        if intervals_path:
            params = interval_fit.derive(table, command=command)
            interval_fit.write_params(params, intervals_path)
            print(interval_fit.coverage_text(table))
            print(f"wrote {intervals_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m objectives.fit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(RUNS_PATH))
    ap.add_argument("--max-nfev", type=int, default=400)
    ap.add_argument("--out", default=str(CALIBRATION_PATH))
    ap.add_argument("--cross-validate", action="store_true",
                    help="leave one source out: fit on the others, report the held-out source's error")
    ap.add_argument("--residuals", default=None,
                    help="with --cross-validate: where the held-out residuals go (default: catalog/loso_residuals.csv; "
                         "'-' writes none)")
    ap.add_argument("--intervals", default=None,
                    help="with --cross-validate: where the interval parameters go (default: catalog/intervals.json)")
    args = ap.parse_args(argv)
    runs = load_runs(args.runs)
    if args.cross_validate:
        from objectives.interval_fit import RESIDUALS_PATH
        from objectives.intervals import INTERVAL_PATH

        residuals = None if args.residuals == "-" else (args.residuals or str(RESIDUALS_PATH))
        command = "python -m objectives.fit --cross-validate" + ("" if args.runs == str(RUNS_PATH) else f" --runs {args.runs}") \
            + ("" if args.max_nfev == 400 else f" --max-nfev {args.max_nfev}")
        return cross_validate(runs, args.max_nfev, residuals, residuals and (args.intervals or str(INTERVAL_PATH)), command)
    t0 = time.perf_counter()
    cal = fit(runs, max_nfev=args.max_nfev)
    s = summarize(predict(runs, cal))
    record = {
        "fitted": {k: (list(v) if isinstance(v, tuple) else v) for k, v in cal.fitted().items()},
        "stacks": list(STACKS),
        "objective": "least squares of log(predicted/measured tokens/s/GPU), every source weighing the same",
        "runs": len(runs),
        "mape_source_weighted": s.mape_source_weighted,
        "mape_row_weighted": s.mape_row_weighted,
        "mape_paper": s.mape_paper,
        "worst_source": [s.worst_source, s.worst_source_mape],
        "command": "python -m objectives.fit",
    }
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=2)
        fh.write("\n")
    print(s.per_source.round(3).to_string())
    print(f"fitted {', '.join(FITTED)} in {time.perf_counter() - t0:.0f}s: source-weighted MAPE {s.mape_source_weighted:.1%}, "
          f"row-weighted {s.mape_row_weighted:.1%}, Narayanan Table 1 {s.mape_paper:.1%}, worst {s.worst_source} {s.worst_source_mape:.1%}")
    print(json.dumps(record["fitted"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
