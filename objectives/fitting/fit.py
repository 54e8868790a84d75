"""Fit the model's few efficiency factors against the published runs, reproducibly.

    python -m objectives.fitting.fit                    # writes objectives/calibration.json and prints the errors
    python -m objectives.fitting.fit --cross-validate   # leave-one-source-out error (about 12 fits); writes the
                                                # held-out residuals (catalog/loso_residuals.csv) and the
                                                # prediction intervals derived from them (catalog/intervals.json)
    python -m objectives.fitting.fit --hold-out-generation                   # leave one GPU generation out (3 fits):
    python -m objectives.fitting.fit --cross-validate --hold-out-generation  # catalog/logo_residuals.csv, the intervals'
                                                # per-generation widening (objectives.fitting.generation_check)

The residual of a run is log(predicted / measured tokens/s per GPU), weighted so that every source weighs
the same (as in the validation's headline error). Trust-region least squares (scipy.optimize.least_squares,
deterministic, finite differences) over the log of each factor inside its physical box (:data:`BOX`),
started from the documented defaults (``dse calibrate``: from the shipped calibration).

Which factors a fit frees is read from the fitted runs, not set by hand (:func:`plan`): the sensitivity of
each run's log prediction to each log factor (a forward difference at the start, the Jacobian column of
the factor) says which runs inform it. A run informs a factor where a 1% change of the factor moves the
run's prediction by more than 1e-8 (:data:`INFORMS`; float noise is ~1e-12, every physical effect far
above it), which reads off the structure: a stack's ``kernel_overhead_s`` and ``attn_kernel_scale`` are
informed by that stack's runs alone, ``moe_expert_overhead_s`` by MoE runs on a
stack that overlaps the all-to-all, ``tp_comm_exposed`` by tp > 1 runs of a stack with TP overlap.

- informed by no run: fixed at the start value (the documented default in the main fit and in the
  leave-one-source-out folds, the shipped value in ``dse calibrate``), never free: with Megatron-Bridge
  held out, no remaining run is on megatron-core or an MoE model, and a free factor wandered to a bound on
  float noise (megatron-core's attn_kernel_scale to 0.30 or 1.50 by the order of a sum; that source's
  held-out error 19% or 30%). Where the held-out source does inform such a factor, each of its runs is
  predicted with the factor fitted on the source's other runs (:func:`held_out`: leave one run out, the
  fold's other factors held), so no prediction reads its own measurement and a stack measured by one
  source is predicted as a calibrated stack, not as one never measured. On the 294 runs of 2026-12
  (DeepSeek-V3's included), Megatron-Bridge held out: 9.3% with this, 26.5% with the four factors at their
  defaults (a stack and MoE never calibrated: Qwen3 and DeepSeek-V3 +35% to +89%), 7.9% at the full fit's
  values (its own runs in the fit; in-sample 7.8%); coverage of the 80% intervals 72%, 68%, 73% of runs.
  On the 330 runs of 2026-12-03 (the Blackwell archive in; three such factors, the expert all-to-all's
  exposure now derived): 14.5% held out, 13.8% in sample.
- informed by fewer than :data:`WELL_INFORMED_RUNS` runs, or not identified apart from the other free
  factors (less than :data:`IDENTIFIED`, 10%, of its weighted Jacobian column outside the span of theirs:
  attn_kernel_scale and attn_seq_half on runs of a single sequence length are one direction; every factor
  of the published runs has 31% or more in the full fit, 20% or more in every fold, 35% in the leave-one-run-out
  refits of Megatron-Bridge): free, with a Gaussian
  prior on its log around the start value (sd :data:`PRIOR_SD_LOG`, a factor 2) as a pseudo-run of the informing runs' weight and
  the runs' typical log error :data:`RUN_SD_LOG`: the least-squares form of the posterior mode
  (residual (x - x0) * RUN_SD_LOG / PRIOR_SD_LOG * weight). One or two runs then move a factor only as
  far as their error needs against that prior, not to a bound on their noise.
- otherwise free, no prior.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import NamedTuple

import numpy as np
import pandas as pd

from objectives.calibration import BOUNDS, CALIBRATION_PATH, FITTED, STACKS, Calibration
from objectives.fitting.validation import RUNS_PATH, load_runs, predict, source_of, summarize

__all__ = ["BOX", "INFORMS", "WELL_INFORMED_RUNS", "IDENTIFIED", "PRIOR_SD_LOG", "RUN_SD_LOG", "label", "source_weights",
           "log_errors", "residuals", "sensitivity", "Plan", "plan", "Fit", "fit_factors", "fit", "held_out", "hold_out_generations",
           "cross_validate", "main"]

# (name, index or None, lower, upper): the search box of each fitted factor
BOX = [("kernel_overhead_s", i, *BOUNDS["kernel_overhead_s"]) for i in range(len(STACKS))] + \
      [("attn_kernel_scale", i, *BOUNDS["attn_kernel_scale"]) for i in range(len(STACKS))] + \
      [(name, None, *BOUNDS[name]) for name in ("attn_seq_half", "tp_comm_exposed", "moe_expert_overhead_s", "gemm_n_half")]
#: a run informs a factor where |d log(predicted) / d log(factor)| exceeds this (module doc)
INFORMS = 1e-6
#: a factor informed by fewer runs than this is fitted with a prior toward its start value (module doc)
WELL_INFORMED_RUNS = 3
#: a free factor whose weighted sensitivity the other free factors' explain but for this share is fitted with
#: the prior too (collinear: a variance inflation above 1 / 0.1^2 = 100)
IDENTIFIED = 0.1
#: sd of that prior on log(factor): the start value good to a factor 2
PRIOR_SD_LOG = float(np.log(2.0))
#: a run's typical log error, the prior's exchange rate: the in-sample error of the published runs (4-5%)
RUN_SD_LOG = 0.05


def label(j: int) -> str:
    """The name of factor ``j`` of :data:`BOX`: ``kernel_overhead_s[megatron-core]``, ``gemm_n_half``."""
    name, idx, _, _ = BOX[j]
    return name if idx is None else f"{name}[{STACKS[idx]}]"


def _to_cal(x: np.ndarray, base: Calibration, free=None) -> Calibration:
    """``base`` with the factors ``free`` (indices into BOX; default all) set to exp(x), inside their box."""
    values = {"kernel_overhead_s": list(base.kernel_overhead_s), "attn_kernel_scale": list(base.attn_kernel_scale)}
    scalars = {}
    for j in range(len(BOX)) if free is None else free:
        name, idx, lo, hi = BOX[j]
        v = float(np.clip(np.exp(x[j]), lo, hi))
        if idx is None:
            scalars[name] = v
        else:
            values[name][idx] = v
    return base.replace(kernel_overhead_s=tuple(values["kernel_overhead_s"]),
                        attn_kernel_scale=tuple(values["attn_kernel_scale"]), **scalars)


def _to_x(cal: Calibration) -> np.ndarray:
    return np.log([getattr(cal, name)[idx] if idx is not None else getattr(cal, name) for name, idx, _, _ in BOX])


def _box() -> tuple[np.ndarray, np.ndarray]:
    return np.log([b[2] for b in BOX]), np.log([b[3] for b in BOX])


def source_weights(runs) -> np.ndarray:
    """1 / sqrt(runs of the row's source): each source's squared residuals sum to its mean (one source
    where the table has no ``source_key``)."""
    if "source_key" not in runs:
        return np.full(len(runs), 1.0 / np.sqrt(max(len(runs), 1)))
    sources = runs["source_key"].map(source_of)
    return 1.0 / np.sqrt(sources.map(sources.value_counts()).to_numpy(dtype=np.float64))


def log_errors(cal: Calibration, runs) -> np.ndarray:
    """log(predicted / measured tokens/s per GPU) of each run."""
    result = predict(runs, cal)
    return np.log(result["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=np.float64)
                  / result["measured_tokens_per_s_per_gpu"].to_numpy(dtype=np.float64))


def residuals(cal: Calibration, runs) -> np.ndarray:
    """Source-weighted log errors: each source's squared residuals sum to its mean squared log error."""
    return log_errors(cal, runs) * source_weights(runs)


def sensitivity(runs, cal: Calibration, step: float = 1e-3) -> np.ndarray:
    """(runs x factors of BOX) d log(predicted) / d log(factor) at ``cal``: forward differences, backward
    where the step would leave the box."""
    x0 = np.clip(_to_x(cal), *_box())
    _, hi = _box()
    base = log_errors(cal, runs)
    jac = np.empty((len(runs), len(BOX)))
    for j in range(len(BOX)):
        h = step if x0[j] + step <= hi[j] else -step
        x = x0.copy()
        x[j] += h
        jac[:, j] = (log_errors(_to_cal(x, cal, [j]), runs) - base) / h
    return jac


class Plan(NamedTuple):
    """What a fit does with each factor of BOX (module doc)."""

    informing_runs: np.ndarray  # per factor: runs whose prediction it moves (> INFORMS)
    free: np.ndarray  # indices into BOX of the fitted factors
    prior_weight: np.ndarray  # per factor: weight of its prior residual (0: none)
    separation: np.ndarray  # per free factor: share of its weighted sensitivity the others do not explain

    def status(self, j: int) -> str:
        return "fixed" if j not in self.free else ("prior" if self.prior_weight[j] > 0 else "free")


def plan(runs, start: Calibration, factors=None, jac: np.ndarray | None = None) -> Plan:
    """Which factors the runs inform (module doc); ``factors``: names of BOX entries (``kernel_overhead_s``,
    or one stack's ``kernel_overhead_s[pytorch-fsdp]``) that may be fitted (default: all)."""
    jac = sensitivity(runs, start) if jac is None else jac
    informs = np.abs(jac) > INFORMS
    counts = informs.sum(axis=0)
    allowed = np.array([factors is None or BOX[j][0] in factors or label(j) in factors for j in range(len(BOX))])
    free = np.flatnonzero(allowed & (counts > 0))
    w = source_weights(runs)
    separation = np.full(len(BOX), np.nan)
    weighted = jac[:, free] * w[:, None]
    for k, j in enumerate(free):  # the share of the factor's sensitivity no other free factor's explains
        others = np.delete(weighted, k, axis=1)
        col = weighted[:, k]
        rest = col - others @ np.linalg.lstsq(others, col, rcond=None)[0] if others.shape[1] else col
        separation[j] = float(np.linalg.norm(rest) / np.linalg.norm(col))
    prior = np.zeros(len(BOX))
    for j in free:
        if counts[j] < WELL_INFORMED_RUNS or separation[j] < IDENTIFIED:
            prior[j] = RUN_SD_LOG / PRIOR_SD_LOG * float(np.mean(w[informs[:, j]]))
    return Plan(counts, free, prior, separation)


class Fit(NamedTuple):
    cal: Calibration
    plan: Plan
    x0: np.ndarray  # log of the start value of each factor
    x: np.ndarray  # log of the fitted value of each factor (the start value where fixed)
    se_log: np.ndarray  # standard error of log(factor) from the Jacobian at the solution (nan where fixed)


def fit_factors(runs, start: Calibration | None = None, max_nfev: int = 400, factors=None,
                fit_plan: Plan | None = None, init: Calibration | None = None) -> Fit:
    """Bounded least squares of the free factors (:func:`plan`) from ``start``; the others stay at it.
    ``init``: where the search of the free factors starts (default ``start``; a warm start)."""
    from scipy.optimize import least_squares

    start = start or Calibration()
    p = fit_plan or plan(runs, start, factors)
    lo, hi = _box()
    x0 = _to_x(start)
    x = x0.copy()
    se = np.full(len(BOX), np.nan)
    if len(p.free):
        f = p.free
        xf0 = np.clip((x0 if init is None else _to_x(init))[f], lo[f] + 1e-9, hi[f] - 1e-9)
        pw = p.prior_weight[f]
        weights = source_weights(runs)

        def resid(xf):
            full = x.copy()
            full[f] = xf
            data = log_errors(_to_cal(full, start, f), runs) * weights
            return np.concatenate([data, pw[pw > 0] * (xf - x0[f])[pw > 0]])

        res = least_squares(resid, xf0, bounds=(lo[f], hi[f]), diff_step=1e-3, max_nfev=max_nfev, x_scale=1.0)
        x[f] = res.x
        # standard errors from the Jacobian at the solution, of the factors not at a bound of their box
        # (one at a bound is held there by it: no error bar)
        inner = (res.x > lo[f] + 1e-6) & (res.x < hi[f] - 1e-6)
        dof = max(len(runs) - int(inner.sum()), 1)
        s2 = float(np.sum(res.fun ** 2)) / dof
        jac = res.jac[:, inner]
        se[f[inner]] = np.sqrt(np.maximum(np.diag(s2 * np.linalg.pinv(jac.T @ jac)), 0.0))
    return Fit(_to_cal(x, start, p.free), p, x0, x, se)


def fit(runs, start: Calibration | None = None, max_nfev: int = 400, factors=None) -> Calibration:
    """The fitted calibration (:func:`fit_factors`)."""
    return fit_factors(runs, start, max_nfev, factors).cal


def held_out(runs, held: np.ndarray, start: Calibration | None = None, max_nfev: int = 400, factors=None,
             init: Calibration | None = None):
    """(the runs ``held`` predicted by factors fitted without them, the fold's Fit, the factors refitted per
    run). A factor no held-in run informs stays at ``start`` in the fold; where the held-out runs inform it,
    each held-out run is predicted with it fitted on the other held-out runs (leave one run out, the fold's
    other factors fixed), so that no run's prediction reads its own measurement and a stack or an MoE
    model with a single source is still predicted as a calibrated one (module doc)."""
    held = np.asarray(held, dtype=bool)
    fold = fit_factors(runs[~held].reset_index(drop=True), start, max_nfev, factors, init=init)
    test = runs[held].reset_index(drop=True)
    kept = [label(j) for j in range(len(BOX)) if j not in fold.plan.free
            and (factors is None or BOX[j][0] in factors or label(j) in factors)]
    if not kept or len(test) < 2 or not len(plan(test, fold.cal, kept).free):
        return predict(test, fold.cal), fold, []
    parts = [predict(test.iloc[[i]].reset_index(drop=True),
                     fit_factors(test.drop(index=i).reset_index(drop=True), fold.cal, max_nfev, kept).cal)
             for i in range(len(test))]
    return pd.concat(parts, ignore_index=True), fold, kept


def hold_out_generations(runs, max_nfev: int, loso_path, residuals_path=None, command: str = "") -> pd.DataFrame:
    """Leave one GPU generation out (objectives.fitting.generation_check): prints, per generation, the error of its
    runs predicted by factors fitted on the other generations' runs and the coverage of the 80% intervals
    on them (derived from the other generations' leave-one-source-out residuals in ``loso_path``); writes
    the residuals to ``residuals_path``. Returns the per-generation table."""
    from objectives.fitting import generation_check, interval_fit

    table, _ = generation_check.check(runs, interval_fit.read_residuals(loso_path), max_nfev, residuals_path, command)
    print(generation_check.generation_text(table))
    print("(each generation predicted by factors fitted without its runs; MAPE with each source weighing the same, "
          "then over rows; inside 80%: share inside the intervals derived without the generation, widened: with "
          "the generation term of objectives.fitting.interval_fit)")
    if residuals_path:
        print(f"wrote {residuals_path}")
    return table


def cross_validate(runs, max_nfev: int, residuals_path=None, intervals_path=None, command: str = "",
                   generation_residuals=None, hold_out: bool = False) -> int:
    """Out-of-sample error: each source predicted by factors fitted without it (:func:`held_out`). The
    held-out predictions' residuals go to ``residuals_path`` and the prediction intervals derived from
    them to ``intervals_path`` (objectives.fitting.interval_fit), with the per-generation widening read from the
    leave-one-generation-out residuals ``generation_residuals`` (written first by
    :func:`hold_out_generations` where ``hold_out``; read as stored otherwise, where the file exists)."""
    from pathlib import Path

    from objectives.fitting import coverage, interval_fit

    sources = runs["source_key"].map(source_of)
    rows, predictions = [], []
    for name in sorted(sources.unique()):
        held = (sources == name).to_numpy()
        result, _, kept = held_out(runs, held, max_nfev=max_nfev)
        predictions.append(result)
        s = summarize(result)
        rows.append((name, int(held.sum()), s.mape_row_weighted))
        print(f"{name:<24} {int(held.sum()):>4} runs  held-out MAPE {s.mape_row_weighted:6.1%}"
              + (f"  (informed by no other source, fitted leaving each run out: {', '.join(kept)})" if kept else ""),
              flush=True)
    mean = float(np.mean([r[2] for r in rows]))
    print(f"leave-one-source-out MAPE, every source weighing the same: {mean:.1%}")
    if residuals_path:
        table = interval_fit.residual_table(pd.concat(predictions, ignore_index=True), predict(runs))
        interval_fit.write_residuals(table, residuals_path, command)
        print(f"wrote {residuals_path}")
        table = interval_fit.read_residuals(residuals_path)  # as stored (6 digits), as the tests derive them
        if hold_out:
            print()
            hold_out_generations(runs, max_nfev, residuals_path, generation_residuals, command)
        logo = (interval_fit.read_residuals(generation_residuals)
                if generation_residuals and Path(generation_residuals).exists() else None)
        if intervals_path:
            params = interval_fit.derive(table, command=command, logo=logo)
            interval_fit.write_params(params, intervals_path)
            print(coverage.coverage_text(table))
            if logo is not None:
                print(coverage.generation_coverage_text(table, logo))
            print(f"wrote {intervals_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m objectives.fitting.fit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(RUNS_PATH))
    ap.add_argument("--max-nfev", type=int, default=400)
    ap.add_argument("--out", default=str(CALIBRATION_PATH))
    ap.add_argument("--cross-validate", action="store_true",
                    help="leave one source out: fit on the others, report the held-out source's error")
    ap.add_argument("--residuals", default=None,
                    help="with --cross-validate: where the held-out residuals go (default: catalog/loso_residuals.csv; "
                         "'-' writes none)")
    ap.add_argument("--hold-out-generation", action="store_true",
                    help="leave one GPU generation out: fit on the other generations' runs, report the held-out "
                         "generation's error and interval coverage (objectives.fitting.generation_check); with "
                         "--cross-validate, after it")
    ap.add_argument("--generation-residuals", default=None,
                    help="with --hold-out-generation: where its residuals go (default: catalog/logo_residuals.csv; "
                         "'-' writes none)")
    ap.add_argument("--intervals", default=None,
                    help="with --cross-validate: where the interval parameters go (default: catalog/intervals.json)")
    args = ap.parse_args(argv)
    runs = load_runs(args.runs)
    suffix = ("" if args.runs == str(RUNS_PATH) else f" --runs {args.runs}") \
        + ("" if args.max_nfev == 400 else f" --max-nfev {args.max_nfev}")
    if args.cross_validate or args.hold_out_generation:
        from objectives.fitting.generation_check import LOGO_RESIDUALS_PATH
        from objectives.fitting.interval_fit import RESIDUALS_PATH
        from objectives.training.intervals import INTERVAL_PATH


        residuals = None if args.residuals == "-" else (args.residuals or str(RESIDUALS_PATH))
        logo = None if args.generation_residuals == "-" else (args.generation_residuals or str(LOGO_RESIDUALS_PATH))
        if not args.cross_validate:  # the check alone, against the stored leave-one-source-out residuals
            hold_out_generations(runs, args.max_nfev, args.residuals or str(RESIDUALS_PATH), logo,
                                 "python -m objectives.fitting.fit --hold-out-generation" + suffix)
            return 0
        return cross_validate(runs, args.max_nfev, residuals, residuals and (args.intervals or str(INTERVAL_PATH)),
                              "python -m objectives.fitting.fit --cross-validate" + suffix
                              + (" --hold-out-generation" if args.hold_out_generation else ""),
                              generation_residuals=logo, hold_out=args.hold_out_generation)
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
        "command": "python -m objectives.fitting.fit",
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
