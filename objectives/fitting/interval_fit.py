"""The prediction intervals' parameters, derived from the model's held-out residuals (their coverage:
objectives/fitting/coverage.py).

    python -m objectives.fitting.fit --cross-validate   # refits without each source (minutes): writes the residuals
                                                # and derives the intervals from them
    python -m objectives.fitting.interval_fit           # derives catalog/intervals.json again from the residuals file
                                                # alone (seconds) and prints the coverage (with
                                                # catalog/logo_residuals.csv, where present: step 4)

``catalog/loso_residuals.csv`` holds one row per published run: the run predicted by factors fitted
without its source, its log(predicted / measured tokens/s per GPU) (``log_ratio``) and the columns the
interval reads (stack, dense/MoE, the axes of :data:`objectives.training.intervals.FEATURES`, the GPU generation
among them).

Derivation (:func:`derive`; the interval's form is in objectives/training/intervals.py):

1. Distances: each run's distance from the validated ground of the *other* sources (the ground a design
   outside every source sees), so that the widening per octave is learnt from real extrapolation.
2. Scale: log sigma = b0 + b_stack + b_moe + kappa * d, fitted by maximum likelihood of a Laplace
   distribution of the log ratio (scale sigma; the mean absolute deviation as spread, as Lei et al. 2018
   Sec. 5.2 fit it), every source weighing the same, Newton's method. The level effects carry a Gaussian
   prior (ridge) of precision :data:`RIDGE`, one source's weight: a level seen in one source is pulled
   half-way to the pool, a level no source has (a stack held out) is the pool. kappa is kept >= 0
   (distance never narrows an interval). A GPU-generation level was tried and left out: confounded with
   the stack, it lowered the nested held-out Laplace likelihood (-1.642 against -1.683 per run) and the
   nested coverage (63% against 73% of runs) on the residuals of 2026-12; the generation is an axis of
   the distance instead.
3. Quantiles: z_10 and z_90 of log_ratio / sigma, the wider of those with every source weighing the same
   and with every run weighing the same: the interval is to hold 80% of the runs however they are counted.
   With the source-weighted quantiles alone the nested coverage was 68% over runs (74% source-weighted):
   the two MosaicML A100 sources hold 139 of the 294 runs and one twelfth of the weight each.

4. Generation term (:func:`generation_terms`): g >= 0 per GPU generation, added to log sigma, the smallest
   widening exp(g) of the intervals of steps 2-3 that holds LEVEL of the generation's residuals (the wider of
   every source weighing the same and every run weighing the same). Which residuals: for a generation whose
   runs come from fewer than :data:`MIN_SOURCES` (2) sources, its leave-one-generation-out residuals
   (``catalog/logo_residuals.csv``, objectives.fitting.generation_check: its runs predicted by factors fitted on the
   other generations' runs alone), at the distance of the validated ground they are on (0 for the runs
   themselves): a generation seen by one source has never been checked against a second one, and its
   leave-one-source-out rows are nearly leave-one-generation-out ones whose within-source refits (each run
   predicted by its source's other runs, objectives.fitting.fit.held_out) see the generation after all, so its
   interval is as wide as the model's error on it when unseen. For a generation of several sources, its
   leave-one-source-out rows at their held-out distances (a per-group, "Mondrian", calibration); without the
   leave-one-generation-out file, every generation's from those rows.
   Measured (training_runs.csv of 2026-12-03, 330 runs, the 48 Blackwell ones all Megatron-Bridge's; ``python -m
   objectives.fitting.fit --cross-validate --hold-out-generation``): held out, Blackwell's runs are off by 17.3%
   (bias +8.9%; Hopper 6.9%, Ampere 11.6% with each source weighing the same), and intervals derived
   without Blackwell hold 52% of them; its term is g = 0.94 (x2.57), Ampere's x1.03, Hopper's x1.00. The
   widened intervals, the term derived without the run's GPU, hold 77% of Blackwell's held-out-generation
   runs (B200 67%, B300 80%, GB200 72%, GB300 92%); on left-out sources (:func:`nested`, Blackwell's one
   source out with it) 70% Ampere, 76% Hopper, 58% Blackwell, 71% of all runs (78% source-weighted).

Coverage (:func:`coverage`) is nested: for each source, the intervals are derived again without it (its
runs neither in the factors' fit nor in the intervals'), its runs' distances taken from the others'
ground, and the share of its measurements inside their intervals counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from objectives.calibration import STACKS
from objectives.fitting import interval_derivation
from objectives.fitting.interval_derivation import FLOOR, RIDGE, band_quantiles, equal_source_weights, fit_log_scale, weighted_quantile
from objectives.fitting.validation import source_of
from objectives.table import CATEGORIES
from objectives.training.intervals import (
    AXES,
    FEATURES,
    GENERATIONS,
    INTERVAL_PATH,
    LEVEL,
    distance_oct,
    feature_octaves,
    generation,
    ground_keys,
    log_band,
)

__all__ = ["RESIDUALS_PATH", "LOGO_RESIDUALS_PATH", "RIDGE", "MIN_SOURCES", "residual_table", "write_residuals",
           "read_residuals", "read_generation_residuals", "ground_of", "heldout_distances", "fit_scale",
           "needed_widening", "generation_terms", "derive", "write_params", "bands", "main"]

RESIDUALS_PATH = Path(__file__).resolve().parent.parent / "catalog" / "loso_residuals.csv"
#: the leave-one-generation-out residuals (objectives.fitting.generation_check writes them)
LOGO_RESIDUALS_PATH = Path(__file__).resolve().parent.parent / "catalog" / "logo_residuals.csv"
#: a generation whose validated runs come from fewer sources than this takes its term from its
#: leave-one-generation-out residuals (module doc, step 4)
MIN_SOURCES = 2
_COLUMNS = ("run_id", "source", "source_key", "model", "stack", "gpu", "generation", "moe", "precision", "n_gpus",
            "tp", "pp", "cp", "ep", "n_params", "n_params_active", "seq_len", "global_batch", "gpu_bf16_tflop_s",
            "gpu_hbm_tbyte_s", "scaleup_gbyte_s", "scaleup_size", "scaleup_mesh", "measured_tokens_per_s_per_gpu",
            "predicted_tokens_per_s_per_gpu", "log_ratio", "log_ratio_in_sample")


def residual_table(held_out: pd.DataFrame, in_sample: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run from :func:`objectives.fitting.validation.predict` outputs: ``held_out`` predicted by factors
    fitted without its source, ``in_sample`` (optional) by the shipped calibration."""
    r = held_out
    gen = generation(r["model_gpu_fp8_tflop_s"].to_numpy(float), r["model_gpu_fp4_tflop_s"].to_numpy(float))
    out = pd.DataFrame({
        "run_id": r["run_id"], "source": r["source_key"].map(source_of), "source_key": r["source_key"],
        "model": r["model"], "stack": r["stack"], "gpu": r["gpu"],
        "generation": np.asarray(GENERATIONS, dtype=object)[gen.astype(int)],
        "moe": (r["moe_experts"].fillna(0) > 0).astype(int), "precision": r["precision"],
        "n_gpus": r["n_gpus"], "tp": r["model_tp"], "pp": r["model_pp"], "cp": r["model_cp"], "ep": r["model_ep"],
        **{c: r[f"model_{c}"] for c in ("n_params", "n_params_active")},
        "seq_len": r["seq_len"], "global_batch": r["global_batch"],
        **{c: r[f"model_{c}"] for c in ("gpu_bf16_tflop_s", "gpu_hbm_tbyte_s", "scaleup_gbyte_s", "scaleup_size",
                                         "scaleup_mesh")},
        "measured_tokens_per_s_per_gpu": r["measured_tokens_per_s_per_gpu"],
        "predicted_tokens_per_s_per_gpu": r["predicted_tokens_per_s_per_gpu"],
    })
    out["log_ratio"] = np.log(out["predicted_tokens_per_s_per_gpu"] / out["measured_tokens_per_s_per_gpu"])
    if in_sample is not None:
        inside = in_sample.set_index("run_id")
        ratio = inside["predicted_tokens_per_s_per_gpu"] / inside["measured_tokens_per_s_per_gpu"]
        out["log_ratio_in_sample"] = np.log(out["run_id"].map(ratio).to_numpy(float))
    else:
        out["log_ratio_in_sample"] = np.nan
    return out.sort_values("run_id", kind="stable").reset_index(drop=True)[list(_COLUMNS)]


def write_residuals(table: pd.DataFrame, path: str | Path = RESIDUALS_PATH, command: str = "") -> None:
    with open(path, "w") as fh:
        fh.write(f"# written by `{command or 'python -m objectives.fitting.fit --cross-validate'}`: each published run "
                 f"predicted by factors fitted without its source; log_ratio = log(predicted / measured)\n")
        table.to_csv(fh, index=False, float_format="%.6g", lineterminator="\n")


def read_residuals(path: str | Path = RESIDUALS_PATH) -> pd.DataFrame:
    with open(path) as fh:
        skip = 0
        for line in fh:
            if not line.startswith("#"):
                break
            skip += 1
    return pd.read_csv(path, skiprows=skip)


def _columns(res: pd.DataFrame) -> dict[str, np.ndarray]:
    """The residual rows as the model's float columns (categoricals as their codes)."""
    c = {name: res[name].to_numpy(dtype=np.float64) for name in FEATURES if name not in ("precision", "generation")}
    c["precision"] = res["precision"].map(CATEGORIES["precision"].index).to_numpy(dtype=np.float64)
    c["stack"] = res["stack"].map(STACKS.index).to_numpy(dtype=np.float64)
    c["generation"] = res["generation"].map(GENERATIONS.index).to_numpy(dtype=np.float64)
    c["moe"] = res["moe"].to_numpy(dtype=np.float64)
    return c


def ground_of(res: pd.DataFrame) -> dict[str, list[list[float]]]:
    """Per axis, per stack code, the distinct validated values (octaves); a stack without runs gets all runs'."""
    c = _columns(res)
    octaves = feature_octaves(c)
    out = {}
    for name in AXES:
        v = np.round(octaves[name], 6)
        every = sorted(set(v.tolist()))
        out[name] = [sorted(set(v[c["stack"] == code].tolist())) or every for code in range(len(STACKS))]
    return out


def heldout_distances(res: pd.DataFrame) -> np.ndarray:
    """Each run's distance (octaves) from the validated ground of the other sources."""
    c = _columns(res)
    octaves = feature_octaves(c)
    dist = np.empty(len(res))
    for name in res["source"].unique():
        rows = (res["source"] == name).to_numpy()
        keys = ground_keys(ground_of(res[~rows]))
        dist[rows] = distance_oct({k: v[rows] for k, v in octaves.items()}, c["stack"][rows], keys)
    return dist


def _design(c: dict[str, np.ndarray], dist: np.ndarray) -> np.ndarray:
    """Columns: intercept, one per stack, moe, distance."""
    stack = np.eye(len(STACKS))[c["stack"].astype(int)]
    return np.column_stack([np.ones(len(dist)), stack, c["moe"], dist])


def fit_scale(res: pd.DataFrame, dist: np.ndarray, ridge: float = RIDGE) -> dict:
    """The scale model of log sigma (module doc, step 2): objectives.fitting.interval_derivation.fit_log_scale."""
    a = np.maximum(np.abs(res["log_ratio"].to_numpy(dtype=np.float64)), FLOOR)
    theta = fit_log_scale(_design(_columns(res), dist), a, equal_source_weights(res), ridge)
    k = len(STACKS)
    return {"intercept": float(theta[0]), "stack": [float(t) for t in theta[1:1 + k]],
            "moe": float(theta[-2]), "kappa": float(theta[-1]), "d_cap": float(np.max(dist))}


def needed_widening(res: pd.DataFrame, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per row, the factor its interval (``lo``, ``hi`` of the log ratio) must be widened by to hold it (<= 1:
    inside already)."""
    r = res["log_ratio"].to_numpy(dtype=np.float64)
    return np.where(r >= 0.0, r / hi, r / lo)


def _term(need: np.ndarray, source_weights: np.ndarray) -> float:
    """log of the widening that holds LEVEL of the rows counted either way (the larger), >= 0."""
    m = max(weighted_quantile(need, w, LEVEL) for w in (source_weights, np.ones(len(need))))
    return float(max(np.log(m), 0.0)) if m > 0 else 0.0


def generation_terms(res: pd.DataFrame, params: dict, dist: np.ndarray, logo: pd.DataFrame | None) -> tuple[list, list]:
    """(g per generation of GENERATIONS, the basis of each: ``logo``, ``loso`` or ``none``; module doc, step 4)
    under ``params`` (without a generation term) at the leave-one-source-out rows' distances ``dist``."""
    terms, basis = [], []
    keys = ground_keys(ground_of(res))
    for name in GENERATIONS:
        rows = (res["generation"] == name).to_numpy()
        few = res.loc[rows, "source"].nunique() < MIN_SOURCES
        held = None if logo is None else logo[(logo["generation"] == name).to_numpy()].reset_index(drop=True)
        if rows.any() and few and held is not None and len(held):
            c = _columns(held)  # at the validated ground they are on: the distance a design like them has
            d = distance_oct(feature_octaves(c), c["stack"], keys)
            lo, hi = bands(held, params, d)
            terms.append(_term(needed_widening(held, lo, hi), equal_source_weights(held)))
            basis.append("logo")
        elif rows.any():
            part = res[rows].reset_index(drop=True)
            lo, hi = bands(part, params, dist[rows])
            terms.append(_term(needed_widening(part, lo, hi), equal_source_weights(part)))
            basis.append("loso")
        else:
            terms.append(0.0)
            basis.append("none")
    return terms, basis


def derive(res: pd.DataFrame, command: str = "", logo: pd.DataFrame | None = None) -> dict:
    """The interval parameters (objectives/training/intervals.py reads them) from residual rows; ``logo``: the
    leave-one-generation-out residuals, for the per-generation term (without them, a generation's term
    comes from its leave-one-source-out rows; module doc, step 4)."""
    dist = heldout_distances(res)
    scale = fit_scale(res, dist)
    params = {"scale": scale, "quantile": {"lo": 0.0, "hi": 0.0}}
    c = _columns(res)
    _, _, sigma = log_band(c["stack"], c["moe"], dist, params)
    z = res["log_ratio"].to_numpy(dtype=np.float64) / sigma
    # the wider of the quantiles with every source weighing the same and with every run weighing the same,
    # so that the interval means LEVEL of a design's runs whichever way they are counted (module doc, step 3)
    lo, hi = band_quantiles(z, equal_source_weights(res), LEVEL)
    params["quantile"] = {"lo": lo, "hi": hi}
    terms, basis = generation_terms(res, params, dist, logo)
    params["scale"]["generation"] = terms
    params["generation_basis"] = basis
    params.update({
        "level": LEVEL, "stacks": list(STACKS), "generations": list(GENERATIONS), "features": list(FEATURES),
        "ground": ground_of(res),
        "runs": int(len(res)), "sources": int(res["source"].nunique()),
        "residuals": "objectives/catalog/loso_residuals.csv",
        "command": "python -m objectives.fitting.interval_fit (from the residuals of "
                   f"`{command or 'python -m objectives.fitting.fit --cross-validate'}`)",
    })
    return params


def write_params(params: dict, path: str | Path = INTERVAL_PATH) -> None:
    interval_derivation.write_params(params, path)


def bands(res: pd.DataFrame, params: dict, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of each row's log ratio interval under ``params`` (with their generation term, if any) at
    distances ``dist``."""
    c = _columns(res)
    lo, hi, _ = log_band(c["stack"], c["moe"], dist, params, c["generation"])
    return lo, hi


def read_generation_residuals(path: str | Path = LOGO_RESIDUALS_PATH) -> pd.DataFrame | None:
    """The leave-one-generation-out residuals, None where the file is absent."""
    return read_residuals(path) if Path(path).exists() else None


def _derive(res: pd.DataFrame, command: str = "") -> dict:
    return derive(res, command=command, logo=read_generation_residuals())


def _coverage_text(res: pd.DataFrame) -> str:
    from objectives.fitting.coverage import coverage_text, generation_coverage_text  # (it imports this module)

    logo = read_generation_residuals()
    return coverage_text(res, logo) + "\n\n" + generation_coverage_text(res, logo)


def main(argv: list[str] | None = None) -> int:
    return interval_derivation.main(argv, prog="python -m objectives.fitting.interval_fit", doc=__doc__,
                                    residuals=RESIDUALS_PATH, out=INTERVAL_PATH, read_residuals=read_residuals,
                                    derive=_derive, coverage_text=_coverage_text)


if __name__ == "__main__":
    sys.exit(main())
