"""The serving intervals' parameters, derived from the held-out residuals, and their coverage.

    python -m objectives.serving.fit --cross-validate   # the refits, then this derivation (about a minute)
    python -m objectives.serving.interval_fit           # the derivation alone, from the stored residuals (seconds)

Derivation (:func:`derive`; the interval's form is in objectives/serving/intervals.py), as training's
(objectives/fitting/interval_fit.py) with the model architecture as the held-out unit (objectives/serving/heldout.py):

1. Distances: each measurement's distance from the validated ranges of the *other* architectures (what a
   design of a model no measurement has sees), so that the widening per octave is learnt from real
   extrapolation.
2. Scale: log sigma = b0 + b_engine + b_moe + b_attn_dp + b_mla + kappa * d by maximum likelihood of a Laplace
   distribution of the log ratio, every source weighing the same, Newton's method; the level effects carry a
   ridge of one source's weight (:data:`RIDGE`), kappa >= 0. The held-out distances are mostly of model
   size (each fold keeps every GPU, engine and deployment shape), and dense models extrapolate in size
   cleanly: kappa comes out near 0 over the d_cap the residuals reach. They say nothing beyond d_cap, nor of
   the deployment axes (GPU counts, concurrency, lengths) far from the published ones: past d_cap the
   interval widens at ``kappa_beyond``, the larger of kappa and the training model's measured widening per
   octave (objectives/catalog/intervals.json, its runs held out by source), up to the training residuals'
   own farthest distance ``d_far``; such designs are marked ``interval_extrapolated``.
3. Unvalidated: b_unvalidated = log of the weighted mean of |log_ratio_engine_out| / sigma_pool, sigma_pool
   the scale of step 2 with the engine's level at the pool (0) and its distance from the other engine's runs:
   the Laplace maximum likelihood of one added constant, the rest held.
4. Quantiles: z_10, z_90 of log_ratio / sigma, every source weighing the same. The latencies: the 80%
   quantile q of |log ratio| / sigma of TPOT (TTFT) on the online rows (the mean ITL and TTFT at a fixed
   request rate; the 500-request bursts' TTFT is mostly admission queueing, which the model leaves out),
   the band [-q, q] symmetric: only two architectures carry latency measurements, and their held-out TPOT
   errors have opposite signs (Llama 3 70B +21%, 8B -30%), so a signed quantile learnt from one would
   claim the other's sign.

Coverage (:func:`coverage`) is nested: for each architecture, the intervals are derived again without it
(its measurements neither in the factors' fit nor in the intervals'), and the share of its measurements
inside their intervals counted; per source and over every measurement. The unvalidated-engine term is
checked the same way: each engine's held-out runs against the intervals with b_unvalidated derived from the
other engine alone.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd

from objectives.fitting import interval_derivation
from objectives.fitting.interval_derivation import (
    FLOOR,
    RIDGE,
    band_quantiles,
    equal_source_weights,
    fit_log_scale,
    weighted_quantile,
    write_params,
)
from objectives.serving.engines import ENGINES
from objectives.serving.heldout import RESIDUALS_PATH, read_residuals
from objectives.serving.intervals import FEATURES, INTERVAL_PATH, LEVEL, feature_octaves, log_sigma, range_distance
from objectives.table import CATEGORIES
from objectives.training.intervals import GENERATIONS
from objectives.training.intervals import INTERVAL_PATH as TRAINING_INTERVALS

__all__ = ["RIDGE", "columns", "ground_of", "heldout_distances", "fit_scale", "derive", "write_params", "bands", "nested",
           "coverage", "coverage_text", "main"]


def columns(res: pd.DataFrame) -> dict[str, np.ndarray]:
    """The residual rows as the model's float columns (categoricals as their codes)."""
    c = {name: res[name].to_numpy(dtype=np.float64) for name in FEATURES if name not in ("precision", "kv_precision",
                                                                                          "generation")}
    for name in ("precision", "kv_precision"):
        c[name] = res[name].map(CATEGORIES[name].index).to_numpy(dtype=np.float64)
    c["generation"] = res["generation"].map(GENERATIONS.index).to_numpy(dtype=np.float64)
    c["engine"] = res["engine"].map(ENGINES.index).to_numpy(dtype=np.float64)
    c["moe"] = res["moe"].to_numpy(dtype=np.float64)
    c["attn_dp_on"] = (res["attn_dp"].to_numpy(dtype=np.float64) > 1) * 1.0
    c["mla"] = res["mla"].to_numpy(dtype=np.float64)
    return c


def ground_of(res: pd.DataFrame) -> dict[str, list[list[float]]]:
    """Per axis, per engine code, [lo, hi] of the validated values (octaves); an engine without runs gets all runs'."""
    c = columns(res)
    octaves = feature_octaves(c)
    out = {}
    for name in FEATURES:
        v = np.round(octaves[name], 6)
        every = [float(v.min()), float(v.max())]
        out[name] = [[float(v[mine].min()), float(v[mine].max())] if (mine := c["engine"] == code).any() else every
                     for code in range(len(ENGINES))]
    return out


def heldout_distances(res: pd.DataFrame, by: str = "group") -> np.ndarray:
    """Each measurement's distance (octaves) from the validated ground of the other ``by`` groups."""
    c = columns(res)
    octaves = feature_octaves(c)
    dist = np.empty(len(res))
    for name in res[by].unique():
        rows = (res[by] == name).to_numpy()
        dist[rows] = range_distance({k: v[rows] for k, v in octaves.items()}, c["engine"][rows], ground_of(res[~rows]))
    return dist


def fit_scale(res: pd.DataFrame, dist: np.ndarray, ridge: float = RIDGE) -> dict:
    """Step 2 of the derivation (module doc): objectives.fitting.interval_derivation.fit_log_scale."""
    c = columns(res)
    x = np.column_stack([np.ones(len(res)), np.eye(len(ENGINES))[c["engine"].astype(int)], c["moe"], c["attn_dp_on"],
                         c["mla"], dist])
    a = np.maximum(np.abs(res["log_ratio"].to_numpy(dtype=np.float64)), FLOOR)
    theta = fit_log_scale(x, a, equal_source_weights(res), ridge)
    k = len(ENGINES)
    return {"intercept": float(theta[0]), "engine": [float(t) for t in theta[1:1 + k]], "moe": float(theta[1 + k]),
            "attn_dp": float(theta[2 + k]), "mla": float(theta[3 + k]),
            "kappa": float(theta[-1]), "d_cap": float(np.max(dist)), "unvalidated": 0.0,
            **_beyond(float(theta[-1]), float(np.max(dist)))}


def _beyond(kappa: float, d_cap: float) -> dict:
    """The widening past d_cap: the training model's measured rate where it is the larger, up to the training
    residuals' own farthest distance (objectives/catalog/intervals.json; module doc, step 2)."""
    training = json.loads(TRAINING_INTERVALS.read_text())["scale"]
    return {"kappa_beyond": max(kappa, float(training["kappa"])), "d_far": max(float(training["d_cap"]), d_cap)}


def _sigma(res: pd.DataFrame, params: dict, dist: np.ndarray, unvalidated=0.0, pool_engine: bool = False) -> np.ndarray:
    """sigma of each row; ``pool_engine``: every engine's level at the pool's (0), as for an engine without runs."""
    c = columns(res)
    if pool_engine:
        params = {**params, "scale": {**params["scale"], "engine": [0.0] * len(ENGINES)}}
    return np.exp(log_sigma(c["engine"], c["moe"], c["attn_dp_on"], c["mla"], dist, unvalidated, params))


def _unvalidated(res: pd.DataFrame, params: dict, dist_engine: np.ndarray) -> float:
    """Step 3 of the derivation (module doc); ``dist_engine``: each run's distance from the other engines' runs."""
    r = res["log_ratio_engine_out"].to_numpy(dtype=np.float64)
    ok = np.isfinite(r)
    sigma = _sigma(res[ok].reset_index(drop=True), params, dist_engine[ok], pool_engine=True)
    w = equal_source_weights(res[ok])
    return float(np.log(np.sum(w * np.maximum(np.abs(r[ok]), FLOOR) / sigma) / np.sum(w)))


def derive(res: pd.DataFrame, command: str = "", dist_engine: np.ndarray | None = None) -> dict:
    """The interval parameters (objectives/serving/intervals.py reads them) from residual rows; the
    unvalidated-engine term from their engine-held-out residuals at ``dist_engine`` (default: their distances
    from the other engines' runs among them; none where they have one engine)."""
    dist = heldout_distances(res)
    scale = fit_scale(res, dist)
    params = {"scale": scale, "quantile": {}}
    if dist_engine is None and res["engine"].nunique() > 1:
        dist_engine = heldout_distances(res, by="engine")
    scale["unvalidated"] = _unvalidated(res, params, dist_engine) if dist_engine is not None else 0.0
    sigma = _sigma(res, params, dist)
    w = equal_source_weights(res)
    z = res["log_ratio"].to_numpy(dtype=np.float64) / sigma
    lo, hi = band_quantiles(z, w, LEVEL)  # the wider of source and measurement weights, as training's
    params["quantile"] = {"lo": lo, "hi": hi}
    online = (res["scenario"] == "online").to_numpy()
    for key in ("tpot", "ttft"):
        r = res[f"log_ratio_{key}"].to_numpy(dtype=np.float64)
        ok = online & np.isfinite(r)
        q = weighted_quantile(np.abs(r[ok]) / sigma[ok], w[ok], LEVEL) if ok.any() else float("nan")
        params["quantile"][f"{key}_lo"], params["quantile"][f"{key}_hi"] = -q, q
    validated = set(res["engine"])
    params.update({
        "level": LEVEL, "engines": list(ENGINES), "unvalidated_engines": [0.0 if e in validated else 1.0 for e in ENGINES],
        "generations": list(GENERATIONS), "features": list(FEATURES), "ground": ground_of(res),
        "runs": int(len(res)), "sources": int(res["source"].nunique()), "groups": int(res["group"].nunique()),
        "residuals": "objectives/catalog/serving_loso_residuals.csv",
        "command": f"python -m objectives.serving.interval_fit (from the residuals of "
                   f"`{command or 'python -m objectives.serving.fit --cross-validate'}`)",
    })
    return params


def bands(res: pd.DataFrame, params: dict, dist: np.ndarray, what: str = "", unvalidated=0.0):
    """(lo, hi) of each row's interval of log(predicted / measured) ``what`` ('' throughput, 'tpot', 'ttft')."""
    sigma = _sigma(res, params, dist, unvalidated)
    q = params["quantile"]
    key = f"{what}_" if what else ""
    return sigma * q[f"{key}lo"], sigma * q[f"{key}hi"]


def _inside(r, lo, hi):
    return (r >= lo) & (r <= hi)


def nested(res: pd.DataFrame) -> pd.DataFrame:
    """Per measurement: its held-out distance, whether it lies inside the interval derived without its
    architecture (throughput; TPOT and TTFT on the online rows, NaN elsewhere), the half-width (fraction of
    the prediction), and whether it lies inside the interval of an unvalidated engine derived without its
    own engine's runs (``inside_engine_out``)."""
    dist = heldout_distances(res)
    r = res["log_ratio"].to_numpy(dtype=np.float64)
    online = (res["scenario"] == "online").to_numpy()
    n = len(res)
    out = {"source": res["source"].to_numpy(), "group": res["group"].to_numpy(), "distance_oct": dist,
           **{k: np.full(n, np.nan) for k in ("inside", "half_width", "inside_tpot", "inside_ttft", "inside_engine_out")}}
    for name in res["group"].unique():
        rows = (res["group"] == name).to_numpy()
        params = derive(res[~rows].reset_index(drop=True))
        part = res[rows].reset_index(drop=True)
        lo, hi = bands(part, params, dist[rows])
        out["inside"][rows] = _inside(r[rows], lo, hi)
        out["half_width"][rows] = (np.exp(-lo) - np.exp(-hi)) / 2.0
        for key in ("tpot", "ttft"):
            lo_t, hi_t = bands(part, params, dist[rows], key)
            rt = res[f"log_ratio_{key}"].to_numpy(dtype=np.float64)[rows]
            keep = online[rows] & np.isfinite(rt)
            out[f"inside_{key}"][np.flatnonzero(rows)[keep]] = _inside(rt, lo_t, hi_t)[keep]
    # each engine's runs with its own factors at their priors, against intervals derived from the other
    # engine's runs alone (their held-out-architecture and held-out-engine residuals)
    r_e = res["log_ratio_engine_out"].to_numpy(dtype=np.float64)
    dist_e = heldout_distances(res, by="engine")
    for name in res["engine"].unique():
        rows = (res["engine"] == name).to_numpy()
        params = derive(res[~rows].reset_index(drop=True), dist_engine=dist_e[~rows])
        part = res[rows].reset_index(drop=True)
        sigma = _sigma(part, params, dist_e[rows], params["scale"]["unvalidated"], pool_engine=True)
        out["inside_engine_out"][rows] = _inside(r_e[rows], sigma * params["quantile"]["lo"],
                                                 sigma * params["quantile"]["hi"])
    return pd.DataFrame(out)


def coverage(res: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """(per source: measurements, coverage, median half-width, median held-out distance, TPOT and TTFT
    coverage on the online rows, coverage of the unvalidated-engine intervals; overall figures)."""
    per_run = nested(res)
    g = per_run.groupby("source", sort=True)
    per = pd.DataFrame({"rows": g.size(), "coverage": g["inside"].mean(), "median_half_width": g["half_width"].median(),
                        "median_distance_oct": g["distance_oct"].median(),
                        "tpot_coverage": g["inside_tpot"].mean(), "ttft_coverage": g["inside_ttft"].mean(),
                        "engine_out_coverage": g["inside_engine_out"].mean()})
    overall = {"coverage": float(per_run["inside"].mean()), "coverage_source_weighted": float(per["coverage"].mean()),
               "median_half_width": float(per_run["half_width"].median()),
               "tpot_coverage": float(per_run["inside_tpot"].mean()), "ttft_coverage": float(per_run["inside_ttft"].mean()),
               "tpot_rows": int(per_run["inside_tpot"].notna().sum()),
               "engine_out_coverage": float(per_run["inside_engine_out"].mean())}
    return per, overall


def _pct(v) -> str:
    return "     -" if v != v else f"{v:>6.0%}"


def coverage_text(res: pd.DataFrame) -> str:
    per, overall = coverage(res)
    lines = [f"{'source':<27} {'rows':>5} {'inside 80%':>10} {'half-width':>10} {'distance':>9} {'TPOT':>6} {'TTFT':>6} "
             f"{'engine out':>10}"]
    for name, row in per.iterrows():
        lines.append(f"{name:<27} {int(row['rows']):>5} {row['coverage']:>10.0%} {row['median_half_width']:>10.1%} "
                     f"{row['median_distance_oct']:>8.2f}o {_pct(row['tpot_coverage'])} {_pct(row['ttft_coverage'])} "
                     f"{row['engine_out_coverage']:>10.0%}")
    lines.append(f"80% intervals of output tokens/s per GPU on left-out model architectures: {overall['coverage']:.0%} of "
                 f"measurements inside ({overall['coverage_source_weighted']:.0%} with each source weighing the same), "
                 f"median half-width {overall['median_half_width']:.1%}; TPOT {overall['tpot_coverage']:.0%} and TTFT "
                 f"{overall['ttft_coverage']:.0%} on the {overall['tpot_rows']} online rows; an engine's runs with its own "
                 f"factors at their priors inside the unvalidated-engine intervals: {overall['engine_out_coverage']:.0%}")
    lines.append("(distance: median octaves from the other architectures' measurements of the engine, "
                 "objectives/serving/intervals.py)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return interval_derivation.main(argv, prog="python -m objectives.serving.interval_fit", doc=__doc__,
                                    residuals=RESIDUALS_PATH, out=INTERVAL_PATH, read_residuals=read_residuals,
                                    derive=derive, coverage_text=coverage_text)


if __name__ == "__main__":
    sys.exit(main())
