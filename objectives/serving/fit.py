"""Fit the serving model's few factors against the published serving measurements, reproducibly.

    python -m objectives.serving.fit                    # writes objectives/serving_calibration.json, prints the errors
    python -m objectives.serving.fit --cross-validate   # held-out refits (objectives.serving.heldout): writes
                                                        # catalog/serving_loso_residuals.csv and the intervals'
                                                        # parameters, catalog/serving_intervals.json

The residual of a run is log(predicted / measured output tokens/s per GPU), weighted so that every source
weighs the same (as the validation's headline error), plus log(predicted / measured TPOT) of the online
rows as one more source of the same weight (the TPOT bound is on them). Trust-region least squares
(scipy.optimize.least_squares, deterministic, finite differences) over the log of each factor inside its
physical box (:data:`BOX`), started from the documented priors (objectives.serving.engines). Factors of
engines no published run measures (vllm, sglang) keep their priors. The validation-only runs (speculative
decoding, ``validation_only`` 1) are left out of the fit and of the held-out refits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from objectives.serving.engines import ENGINES, SERVING_CALIBRATION_PATH, SERVING_FITTED, ServingCalibration
from objectives.serving.validation import RUNS_PATH, fit_runs, load_runs, predict, summarize

__all__ = ["BOX", "residuals", "fit", "main"]

_TRTLLM, _TRTLLM_2024 = ENGINES.index("trtllm"), ENGINES.index("trtllm-2024")
#: (factor, index or None, lower, upper): the box of each fitted factor, and why (docs/serving.md)
BOX = [
    ("hbm_eff", None, 0.5, 0.95),  # vidur: 0.5-0.92 of peak HBM by shape; GB200 measured 0.92 (Azure)
    ("gemm_eff_scale", 0, 0.3, 1.0),  # of the catalog's measured large-GEMM efficiency (MAMF): at most all of it
    ("gemm_eff_scale", 1, 0.3, 1.0),
    ("gemm_eff_scale", 2, 0.2, 1.0),
    ("gemm_rows_half", None, 1.0, 1024.0),  # a tile is 64-256 rows; training's gemm_n_half fitted 296
    # TensorRT-LLM blog 4 Table 1 (DeepSeek-R1, EP 32, no EPLB): 1.28 per expert; 2.14 gives its hottest rank's
    # 2.564x (1 + 2.14 x 2.070 / sqrt(8): the expected largest of 32 normals, objectives/serving/balance.py)
    ("expert_load_cv", None, 0.05, 2.14),
    ("expert_gemm_scale", None, 0.2, 1.0),
    ("allreduce_latency_s", None, 2e-6, 60e-6),  # one-shot NVLink kernels ~5 us; NCCL without graphs 20-40 us (vidur)
    ("host_step_s", _TRTLLM, 1e-5, 2e-2),
    ("host_step_s", _TRTLLM_2024, 1e-5, 2e-2),
    ("host_request_s", _TRTLLM, 1e-7, 1e-4),
    ("host_request_s", _TRTLLM_2024, 1e-7, 1e-4),
    ("host_grace_scale", None, 1.0, 2.75),  # TransformerEngine #2053: PyTorch CPU time per module 2.75x on GB200
]


def _to_cal(x: np.ndarray, base: ServingCalibration) -> ServingCalibration:
    values = {name: list(getattr(base, name)) for name in SERVING_FITTED if isinstance(getattr(base, name), tuple)}
    scalars = {}
    for xi, (name, idx, lo, hi) in zip(x, BOX):
        v = float(np.clip(np.exp(xi), lo, hi))
        if idx is None:
            scalars[name] = v
        else:
            values[name][idx] = v
    return base.replace(**{k: tuple(v) for k, v in values.items()}, **scalars)


def _to_x(cal: ServingCalibration) -> np.ndarray:
    return np.log([getattr(cal, n)[i] if i is not None else getattr(cal, n) for n, i, _, _ in BOX])


def residuals(cal: ServingCalibration, runs) -> np.ndarray:
    """Source-weighted log errors of tokens/s per GPU, and of the online rows' TPOT as one more source."""
    result = predict(runs, cal)
    tokens = np.log1p(result["tokens_error"].to_numpy(dtype=float))
    sources = result["source_key"]
    weight = 1.0 / np.sqrt(sources.map(sources.value_counts()).to_numpy())
    tpot = np.log1p(result["tpot_error"].to_numpy(dtype=float))
    online = np.isfinite(tpot)
    out = np.concatenate([tokens * weight, tpot[online] / np.sqrt(max(online.sum(), 1))])
    return np.where(np.isfinite(out), out, 3.0)  # a row the model cannot serve counts as a large error


def fit(runs, start: ServingCalibration | None = None, max_nfev: int = 300) -> ServingCalibration:
    from scipy.optimize import least_squares

    start = start or ServingCalibration()
    lo, hi = np.log([b[2] for b in BOX]), np.log([b[3] for b in BOX])
    x0 = np.clip(_to_x(start), lo + 1e-9, hi - 1e-9)
    res = least_squares(lambda x: residuals(_to_cal(x, start), runs), x0, bounds=(lo, hi), diff_step=1e-3,
                        max_nfev=max_nfev, x_scale=1.0)
    return _to_cal(res.x, start)


def _report(cal: ServingCalibration, runs) -> dict:
    s = summarize(predict(runs, cal))
    print(s.per_source.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"MAPE of output tokens/s per GPU: {s.mape_source_weighted:.1%} with each source weighing the same, "
          f"{s.mape_row_weighted:.1%} over rows; online TPOT {s.tpot_mape_online:.1%}, TTFT {s.ttft_mape_online:.1%} "
          f"({s.online_rows} rows)")
    return {"mape_source_weighted": s.mape_source_weighted, "mape_row_weighted": s.mape_row_weighted,
            "tpot_mape_online": s.tpot_mape_online, "ttft_mape_online": s.ttft_mape_online}


def cross_validate(runs, max_nfev: int, residuals_path, intervals_path, command: str) -> int:
    """Every run predicted by factors fitted without its model architecture, and without its engine
    (objectives.serving.heldout); the residuals written, the intervals derived from them."""
    from objectives.serving import heldout, interval_fit

    features = heldout._features(runs)
    groups = heldout.architecture_groups(runs, features)
    print("held out by model architecture:")
    by_model = heldout.held_out(runs, groups, fit, max_nfev)
    print("held out by engine (its own factors at their priors):")
    by_engine = heldout.held_out(runs, heldout.engine_groups(runs), fit, max_nfev)
    in_sample = predict(runs)
    for name, result in (("architecture", by_model), ("engine", by_engine), ("none (in sample)", in_sample)):
        per = result.groupby("source_key")["tokens_ape"].mean()
        print(f"held out by {name}: MAPE of output tokens/s per GPU {per.mean():.1%} with each source weighing the "
              f"same ({', '.join(f'{k} {v:.1%}' for k, v in per.items())})")
    table = heldout.residual_table(runs, by_model, by_engine, in_sample, groups, features)
    heldout.write_residuals(table, residuals_path, command)
    print(f"wrote {residuals_path}")
    table = heldout.read_residuals(residuals_path)  # as stored (6 digits), as the tests derive them
    interval_fit.write_params(interval_fit.derive(table, command=command), intervals_path)
    print(interval_fit.coverage_text(table))
    print(f"wrote {intervals_path}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m objectives.serving.fit", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=str(RUNS_PATH))
    ap.add_argument("--out", default=str(SERVING_CALIBRATION_PATH))
    ap.add_argument("--max-nfev", type=int, default=300)
    ap.add_argument("--cross-validate", action="store_true",
                    help="refit without each model architecture and each engine; write the held-out residuals and "
                         "the prediction intervals derived from them")
    ap.add_argument("--residuals", default=None, help="with --cross-validate: the residuals file "
                                                      "(default catalog/serving_loso_residuals.csv)")
    ap.add_argument("--intervals", default=None, help="with --cross-validate: the intervals' parameters "
                                                      "(default catalog/serving_intervals.json)")
    args = ap.parse_args(argv)
    # the speculative-decoding runs are validation only: never fitted (objectives/serving/validation.py)
    runs = fit_runs(load_runs(args.runs))
    if args.cross_validate:
        from objectives.serving.heldout import RESIDUALS_PATH
        from objectives.serving.intervals import INTERVAL_PATH

        command = "python -m objectives.serving.fit --cross-validate" + ("" if args.runs == str(RUNS_PATH) else
                                                                         f" --runs {args.runs}")
        return cross_validate(runs, args.max_nfev, args.residuals or str(RESIDUALS_PATH),
                              args.intervals or str(INTERVAL_PATH), command)
    start = ServingCalibration()
    print("priors:")
    _report(start, runs)
    t0 = time.time()
    cal = fit(runs, start, args.max_nfev)
    print(f"\nfitted in {time.time() - t0:.1f} s:")
    figures = _report(cal, runs)
    for name, idx, lo, hi in BOX:
        v = getattr(cal, name)[idx] if idx is not None else getattr(cal, name)
        at = " (at its bound)" if np.isclose(v, lo, rtol=1e-3) or np.isclose(v, hi, rtol=1e-3) else ""
        print(f"  {name}{'' if idx is None else f'[{idx}]'} = {v:.4g}{at}")
    with open(args.out, "w") as f:
        json.dump({"fitted": cal.fitted(), "engines": list(ENGINES), "runs": len(runs),
                   "objective": "least squares of log(predicted/measured output tokens/s per GPU), every source "
                                "weighing the same, plus the online rows' log TPOT error as one more source",
                   **figures, "command": "python -m objectives.serving.fit"}, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
