"""How often the 80% intervals hold measurements they were not derived from: nested over sources (each
source's runs inside intervals derived without it) and per GPU generation (inside intervals derived without
the generation, and inside the shipped ones widened by its term). The derivation itself is
objectives/fitting/interval_fit.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from objectives.fitting.interval_fit import MIN_SOURCES, _columns, bands, derive, ground_of, heldout_distances
from objectives.training.intervals import GENERATIONS, distance_oct, feature_octaves, ground_keys

__all__ = ["nested", "coverage", "coverage_text", "unseen_generation", "widened_generation", "generation_coverage",
           "generation_coverage_text"]


def _without(logo: pd.DataFrame | None, column: str, value) -> pd.DataFrame | None:
    return None if logo is None else logo[(logo[column] != value).to_numpy()].reset_index(drop=True)


def nested(res: pd.DataFrame, logo: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run: its held-out distance, the interval derived without its source (``lo``, ``hi`` of the log
    ratio; ``logo``'s rows of the source left out too), whether its measurement is inside, the half-width
    (fraction of the prediction), and whether the shipped intervals (derived from every source) hold it."""
    dist = heldout_distances(res)
    lo_s, hi_s = bands(res, derive(res, logo=logo), dist)
    r = res["log_ratio"].to_numpy(dtype=np.float64)
    lo, hi = np.zeros(len(res)), np.zeros(len(res))
    for name in res["source"].unique():
        rows = (res["source"] == name).to_numpy()
        params = derive(res[~rows].reset_index(drop=True), logo=_without(logo, "source", name))
        lo[rows], hi[rows] = bands(res[rows], params, dist[rows])
    return pd.DataFrame({"source": res["source"], "generation": res["generation"], "gpu": res["gpu"],
                         "distance_oct": dist, "lo": lo, "hi": hi,
                         "inside": (r >= lo) & (r <= hi), "half_width": (np.exp(-lo) - np.exp(-hi)) / 2.0,
                         "inside_shipped": (r >= lo_s) & (r <= hi_s)})


def coverage(res: pd.DataFrame, logo: pd.DataFrame | None = None) -> tuple[pd.DataFrame, dict]:
    """(per source: runs, coverage, median half-width, median held-out distance, the shipped intervals'
    coverage; overall: coverage over runs, with every source weighing the same, median half-width)."""
    per_run = nested(res, logo)
    g = per_run.groupby("source", sort=True)
    per = pd.DataFrame({"rows": g.size(), "coverage": g["inside"].mean(), "median_half_width": g["half_width"].median(),
                        "median_distance_oct": g["distance_oct"].median(), "coverage_shipped": g["inside_shipped"].mean()})
    overall = {"coverage": float(per_run["inside"].mean()), "coverage_source_weighted": float(per["coverage"].mean()),
               "median_half_width": float(per_run["half_width"].median()),
               "coverage_shipped": float(per_run["inside_shipped"].mean())}
    return per, overall


def coverage_text(res: pd.DataFrame, logo: pd.DataFrame | None = None) -> str:
    per, overall = coverage(res, logo)
    lines = [f"{'source':<24} {'runs':>5} {'inside 80%':>10} {'half-width':>10} {'distance':>9}"]
    for name, row in per.iterrows():
        lines.append(f"{name:<24} {int(row['rows']):>5} {row['coverage']:>10.0%} {row['median_half_width']:>10.1%} "
                     f"{row['median_distance_oct']:>8.2f}o")
    lines.append(f"80% intervals on left-out sources: {overall['coverage']:.0%} of runs inside "
                 f"({overall['coverage_source_weighted']:.0%} with each source weighing the same), median half-width "
                 f"{overall['median_half_width']:.1%}; the shipped intervals (every source in their derivation) "
                 f"hold {overall['coverage_shipped']:.0%}")
    lines.append("(distance: median octaves from the other sources' runs of the stack, objectives.training.intervals)")
    return "\n".join(lines)


def unseen_generation(res: pd.DataFrame, logo: pd.DataFrame) -> np.ndarray:
    """Per row of ``logo``: inside the interval derived without its generation (the leave-one-source-out rows
    of the other generations; distances from their ground), as a design on a generation no published run is
    on gets it."""
    inside = np.zeros(len(logo), dtype=bool)
    for name in logo["generation"].unique():
        rows = (logo["generation"] == name).to_numpy()
        others = res[(res["generation"] != name).to_numpy()].reset_index(drop=True)
        part = logo[rows].reset_index(drop=True)
        c = _columns(part)
        d = distance_oct(feature_octaves(c), c["stack"], ground_keys(ground_of(others)))
        lo, hi = bands(part, derive(others), d)
        r = part["log_ratio"].to_numpy(dtype=np.float64)
        inside[rows] = (r >= lo) & (r <= hi)
    return inside


def widened_generation(res: pd.DataFrame, logo: pd.DataFrame) -> np.ndarray:
    """Per row of ``logo``: inside the interval of the shipped derivation (every source, the generation
    terms) at the validated ground it is on, the terms derived without the rows of its GPU (so that a term
    read from the leave-one-generation-out residuals is checked on a GPU it has not seen)."""
    keys = ground_keys(ground_of(res))
    inside = np.zeros(len(logo), dtype=bool)
    for gpu in logo["gpu"].unique():
        rows = (logo["gpu"] == gpu).to_numpy()
        part = logo[rows].reset_index(drop=True)
        c = _columns(part)
        lo, hi = bands(part, derive(res, logo=_without(logo, "gpu", gpu)), distance_oct(feature_octaves(c), c["stack"], keys))
        r = part["log_ratio"].to_numpy(dtype=np.float64)
        inside[rows] = (r >= lo) & (r <= hi)
    return inside


def generation_coverage(res: pd.DataFrame, logo: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per generation, per GPU of a generation validated by fewer than MIN_SOURCES sources (``  b200``), and
    ``all``: runs, the share inside the intervals derived without the run's source (``left_out_source``,
    :func:`nested`), and with ``logo``: inside the intervals derived without the generation on the runs
    predicted without it (``left_out_generation``, :func:`unseen_generation`) and inside the shipped
    intervals with the generation term derived without the run's GPU (``widened``, :func:`widened_generation`),
    with the generation's term g (its widening exp(g))."""
    per_run = nested(res, logo)
    params = derive(res, logo=logo)
    frame = pd.DataFrame({"generation": per_run["generation"], "gpu": per_run["gpu"], "inside": per_run["inside"]})
    if logo is not None:
        lg = pd.DataFrame({"run_id": logo["run_id"], "unseen": unseen_generation(res, logo),
                           "widened": widened_generation(res, logo)}).set_index("run_id")
        frame["unseen"] = res["run_id"].map(lg["unseen"]).astype(float).to_numpy()
        frame["widened"] = res["run_id"].map(lg["widened"]).astype(float).to_numpy()
    groups = []
    for code, name in enumerate(GENERATIONS):
        rows = (frame["generation"] == name).to_numpy()
        if not rows.any():
            continue
        groups.append((name, rows, params["scale"]["generation"][code]))
        if params["generation_basis"][code] != "logo" and "widened" in frame:
            frame.loc[rows, "widened"] = np.nan  # its term is read from its leave-one-source-out rows
        if res.loc[rows, "source"].nunique() < MIN_SOURCES:
            groups += [(f"  {gpu}", rows & (frame["gpu"] == gpu).to_numpy(), np.nan)
                       for gpu in sorted(frame.loc[rows, "gpu"].unique())]
    groups.append(("all", np.ones(len(frame), dtype=bool), np.nan))
    out = []
    for name, rows, term in groups:
        part = frame[rows]
        row = {"group": name, "runs": int(rows.sum()), "widening": float(np.exp(term)),
               "left_out_source": float(part["inside"].mean())}
        if logo is not None:
            row["left_out_generation"] = float(part["unseen"].mean())
            row["widened"] = float(part["widened"].mean()) if name != "all" else np.nan
        out.append(row)
    return pd.DataFrame(out).set_index("group")


def generation_coverage_text(res: pd.DataFrame, logo: pd.DataFrame | None = None) -> str:
    table = generation_coverage(res, logo)
    cols = [("left_out_source", "source out")] + ([("left_out_generation", "gen. out"), ("widened", "widened")]
                                                   if logo is not None else [])
    head = f"{'generation':<12} {'runs':>5} {'widening':>9}" + "".join(f" {label:>10}" for _, label in cols)
    lines = [head, "-" * len(head)]
    for name, row in table.iterrows():
        widening = "" if np.isnan(row["widening"]) else f"x{row['widening']:.2f}"
        lines.append(f"{name:<12} {int(row['runs']):>5} {widening:>9}"
                     + "".join(f" {'-' if np.isnan(row[c]) else format(row[c], '.0%'):>10}" for c, _ in cols))
    lines.append("(share of runs inside their 80% interval. source out: intervals derived without the run's source, "
                 "its runs predicted without it;")
    if logo is not None:
        lines.append(" gen. out: its runs predicted by factors fitted without their generation, intervals derived "
                     "without it; widened: those runs inside the shipped intervals, a one-source generation's widening "
                     "derived without the run's GPU)")
    else:
        lines[-1] = lines[-1][:-1] + ")"
    return "\n".join(lines)


