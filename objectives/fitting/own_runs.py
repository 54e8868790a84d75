"""The model calibrated on one's own measured runs (``dse calibrate``): the fit, its held-out error, its intervals.

A runs table is a design table plus a measurement per row (``measured_tokens_per_s_per_gpu``, or
``measured_step_time_s`` converted with the row's global_batch x seq_len / n_gpus). :func:`calibrate`
refits the factors the runs inform with the bounded least squares of :mod:`objectives.fitting.fit`, started from
the shipped calibration (``start``); :func:`objectives.fitting.fit.plan` decides which factors the runs inform, and
those they do not stay at the shipped values. Every row weighs the same (one source), or every source the
same where the table has a ``source_key`` column.

Held-out error: each run predicted by factors refitted without it (leave one run out; leave one source out
where the table names three or more sources), every fold refitted from the shipped values, its search
warm-started at the full fit.

Intervals (:func:`interval_params`), for designs under the new calibration: the shipped form and
parameters (objectives.training.intervals), with

- the validated ground extended by the runs' values on each axis, on their stack: a design like one of the
  runs is on validated ground;
- the scale multiplied by c = exp(w log m), m = mean over the runs of |held-out log ratio| / sigma_i, sigma_i
  the shipped scale at the run's distance from the shipped ground and the *other* runs (a Laplace scale's
  maximum-likelihood factor, as objectives.fitting.interval_fit fits it), shrunk toward 1 by w = n / (n + N0) with
  :data:`N0` = 5 runs. With a few runs the shipped residuals of the published runs decide (a handful of
  runs says little about a scale: the relative sd of m is about 1/sqrt(n)), with many the cluster's own.
  The quantiles z_10, z_90 stay the shipped ones.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import pandas as pd

from objectives.calibration import STACKS, Calibration
from objectives.fitting.fit import BOX, Fit, fit_factors, held_out, label, plan
from objectives.fitting.interval_derivation import FLOOR
from objectives.fitting.validation import predict, source_of
from objectives.table import CATEGORIES, InputError
from objectives.training.intervals import FEATURES, distance_oct, feature_octaves, generation, ground_keys, log_band

__all__ = ["N0", "MEASURED", "STEP_TIME", "measured_tokens", "Calibrated", "calibrate", "interval_params", "record"]

#: runs at which a cluster's own residuals weigh as much as the shipped ones in its interval scale
N0 = 5
MEASURED = "measured_tokens_per_s_per_gpu"
STEP_TIME = "measured_step_time_s"


def _numbers(values) -> tuple[np.ndarray, np.ndarray]:
    """(the cells as floats, which cells are blank)."""
    raw = pd.Series(values, dtype=object)
    blank = raw.isna().to_numpy() | raw.map(lambda x: isinstance(x, str) and not x.strip()).to_numpy(dtype=bool)
    return pd.to_numeric(raw.where(~blank), errors="coerce").to_numpy(dtype=np.float64), blank


def measured_tokens(runs: pd.DataFrame, seq_len: np.ndarray) -> np.ndarray:
    """Measured tokens/s per GPU of each row: its ``measured_tokens_per_s_per_gpu``, else (blank or absent)
    its ``measured_step_time_s`` as global_batch x seq_len / (n_gpus x step time) (``seq_len``: the model's,
    as the table or the catalog gives it). A cell that is not a positive number, or a row with neither, is an
    InputError naming its row and column."""
    n = len(runs)
    tokens, no_tokens = _numbers(runs[MEASURED]) if MEASURED in runs else (np.full(n, np.nan), np.ones(n, bool))
    step, no_step = _numbers(runs[STEP_TIME]) if STEP_TIME in runs else (np.full(n, np.nan), np.ones(n, bool))
    for column, v, blank in ((MEASURED, tokens, no_tokens), (STEP_TIME, step, no_step)):
        bad = ~blank & ~(np.isfinite(v) & (v > 0))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            cell = runs[column].iloc[row]
            shown = f"{float(cell):g}" if isinstance(cell, (int, float, np.number)) else repr(str(cell))
            raise InputError(f"must be a positive number, not {shown}", column=column, row=row)
    neither = no_tokens & no_step
    if neither.any():
        raise InputError(f"no measurement: give '{MEASURED}' or '{STEP_TIME}' (or a log) for every run",
                         column=MEASURED, row=int(np.flatnonzero(neither)[0]))
    batch = runs["global_batch"].to_numpy(dtype=np.float64)
    from_step = batch * seq_len / (runs["n_gpus"].to_numpy(dtype=np.float64) * np.where(no_step, 1.0, step))
    return np.where(no_tokens, from_step, tokens)


class Calibrated(NamedTuple):
    fit: Fit
    runs: pd.DataFrame  # the runs with their measured tokens/s per GPU
    before: pd.DataFrame  # predicted with the shipped calibration (objectives.fitting.validation.predict)
    after: pd.DataFrame  # with the new one
    held_out: pd.DataFrame | None  # each run predicted by factors fitted without it (row order)
    folds: str  # "run" or "source"
    intervals: dict | None


def _codes(values, name: str) -> np.ndarray:
    """A categorical column as its codes (the model's floats where it already is)."""
    v = np.asarray(values)
    if v.dtype.kind in "fiub":
        return v.astype(np.float64)
    return np.array([CATEGORIES[name].index(str(x).strip().lower()) for x in v], dtype=np.float64)


def _features(result: pd.DataFrame) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(each axis of objectives.training.intervals in octaves, the stack code, MoE 0/1) of predicted runs."""
    c = {name: result[f"model_{name}"].to_numpy(dtype=np.float64)
         for name in FEATURES if name not in ("n_gpus", "cp", "precision", "generation")}
    c["n_gpus"] = result["n_gpus"].to_numpy(dtype=np.float64)
    c["cp"] = result["model_cp"].to_numpy(dtype=np.float64)
    c["precision"] = _codes(result["model_precision"], "precision")
    c["generation"] = generation(result["model_gpu_fp8_tflop_s"].to_numpy(dtype=np.float64),
                                 result["model_gpu_fp4_tflop_s"].to_numpy(dtype=np.float64))
    moe = (result["model_moe_experts"].to_numpy(dtype=np.float64) > 0) * 1.0
    return feature_octaves(c), _codes(result["model_stack"], "stack"), moe


def _ground(base: dict, octaves: dict[str, np.ndarray], stack: np.ndarray, rows: np.ndarray) -> dict:
    """The ground ``base`` with the values of runs ``rows`` added on their stack (rounded as interval_fit)."""
    out = {}
    for name, per_stack in base.items():
        v = np.round(np.broadcast_to(octaves[name], stack.shape), 6)
        out[name] = [sorted(set(vals) | set(v[rows & (stack == code)].tolist())) for code, vals in enumerate(per_stack)]
    return out


def interval_params(base: dict, result: pd.DataFrame, log_ratio: np.ndarray) -> tuple[dict, pd.DataFrame]:
    """The intervals of the calibrated model (module doc) and, per run, its distance and shipped sigma."""
    octaves, stack, moe = _features(result)
    n = len(result)
    dist = np.empty(n)
    for i in range(n):  # each run's distance from the shipped ground and the other runs
        others = np.ones(n, dtype=bool)
        others[i] = False
        keys = ground_keys(_ground(base["ground"], octaves, stack, others))
        one = {k: np.broadcast_to(v, stack.shape)[i:i + 1] for k, v in octaves.items()}
        dist[i] = distance_oct(one, stack[i:i + 1], keys)[0]
    # with the shipped per-generation term (the generation axis is kept as its code, not in octaves)
    _, _, sigma = log_band(stack, moe, dist, base, octaves["generation"])
    ratio = float(np.mean(np.maximum(np.abs(log_ratio), FLOOR) / sigma))
    w = n / (n + N0)
    params = copy.deepcopy(base)
    params["scale"]["intercept"] = base["scale"]["intercept"] + w * np.log(ratio)
    params["ground"] = _ground(base["ground"], octaves, stack, np.ones(n, dtype=bool))
    params["own_runs"] = {"runs": n, "mean_abs_log_ratio_over_sigma": ratio, "shrinkage_weight": w,
                          "scale_factor": float(np.exp(w * np.log(ratio))), "n0": N0,
                          "derivation": "objectives/fitting/own_runs.py (module doc)"}
    params["command"] = "dse calibrate"
    return params, pd.DataFrame({"distance_oct": dist, "sigma_shipped": sigma})


def calibrate(runs: pd.DataFrame, start: Calibration, factors=None, max_nfev: int = 200, cross_validate: bool = True,
              base_intervals: dict | None = None, progress=None) -> Calibrated:
    """Refit the factors ``runs`` inform (module doc). ``factors``: BOX names the fit may free (default all);
    fewer runs than free factors is an InputError. ``progress(i, n)``: called after each held-out fold."""
    runs = runs.reset_index(drop=True).copy()
    given = runs[MEASURED].copy() if MEASURED in runs else None
    runs[MEASURED] = np.nan
    seq_len = predict(runs, start)["model_seq_len"].to_numpy(dtype=np.float64)
    if given is not None:
        runs[MEASURED] = given
    else:
        runs = runs.drop(columns=[MEASURED])
    runs[MEASURED] = measured_tokens(runs, seq_len)
    before = predict(runs, start)
    p = plan(runs, start, factors)
    if len(p.free) > len(runs):
        raise InputError(f"{len(runs)} runs cannot fit {len(p.free)} factors ({', '.join(label(j) for j in p.free)}): "
                         "give at least as many runs as factors, or fewer with --factors")
    fitted = fit_factors(runs, start, max_nfev, factors, fit_plan=p)
    after = predict(runs, fitted.cal)
    held, folds, intervals = None, "run", None
    if cross_validate and len(runs) >= 2:
        groups = runs["source_key"].map(source_of) if "source_key" in runs else None
        if groups is not None and groups.nunique() >= 3:
            folds, keys = "source", groups.to_numpy()
        else:
            keys = np.arange(len(runs))
        parts, order = [], []
        for k, key in enumerate(pd.unique(keys)):
            mask = keys == key
            parts.append(held_out(runs, mask, start, max_nfev, factors, init=fitted.cal)[0])
            order.append(np.flatnonzero(mask))
            if progress:
                progress(k + 1, len(pd.unique(keys)))
        held = pd.concat(parts, ignore_index=True)
        held.index = np.concatenate(order)
        held = held.sort_index()
        if base_intervals is not None:
            ratio = np.log(held["predicted_tokens_per_s_per_gpu"] / held["measured_tokens_per_s_per_gpu"]).to_numpy()
            intervals, _ = interval_params(base_intervals, after, ratio)
    return Calibrated(fitted, runs, before, after, held, folds, intervals)


def record(c: Calibrated, provenance: dict) -> dict:
    """The calibration file: the factors (all of them: the fitted ones and the shipped rest), what was fitted,
    provenance, the per-run residuals and the intervals."""
    cal = c.fit.cal
    factors = {}
    for j in range(len(BOX)):
        entry = {"status": c.fit.plan.status(j), "informing_runs": int(c.fit.plan.informing_runs[j]),
                 "before": float(np.exp(c.fit.x0[j])), "after": float(np.exp(c.fit.x[j]))}
        if np.isfinite(c.fit.se_log[j]):
            entry["se_log"] = float(c.fit.se_log[j])
        factors[label(j)] = entry
    per_run = pd.DataFrame({
        "row": np.arange(1, len(c.runs) + 1),
        "measured_tokens_per_s_per_gpu": c.runs[MEASURED].to_numpy(dtype=np.float64),
        "predicted_before": c.before["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=np.float64),
        "predicted_after": c.after["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=np.float64),
    })
    if "run_id" in c.runs:
        per_run.insert(1, "run_id", c.runs["run_id"].astype(str).to_numpy())
    per_run["log_ratio_after"] = np.log(per_run["predicted_after"] / per_run["measured_tokens_per_s_per_gpu"])
    if c.held_out is not None:
        per_run["predicted_held_out"] = c.held_out["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=np.float64)
        per_run["log_ratio_held_out"] = np.log(per_run["predicted_held_out"] / per_run["measured_tokens_per_s_per_gpu"])
    fitted = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cal.fitted().items()}
    return {"fitted": fitted, "stacks": list(STACKS), "factors": factors, "provenance": provenance,
            "held_out": c.folds if c.held_out is not None else None,
            "residuals": per_run.to_dict(orient="records"), "intervals": c.intervals}
