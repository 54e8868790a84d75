"""Pareto fronts and hypervolume of objective tables (numpy, minimization form).

Everything here works on an ``(n, m)`` float array ``F`` of objective values where smaller is better in
every column; :func:`to_minimization` turns a table with ``min``/``max`` directions into that form.
Used by the sweep after every batch (:mod:`dse.store.front`: the current front, ``pareto.parquet``), by the
report, by the tests (the exhaustive front against a brute-force one) and by the search-quality benchmark
(hypervolume ratio).

Conventions (those of pymoo and Optuna): a point ``a`` dominates ``b`` when ``a <= b`` in every objective
and ``a < b`` in at least one. Equal points do not dominate each other, so duplicates share a rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "to_minimization",
    "nondominated_mask",
    "nondominated_rank",
    "hypervolume",
    "reference_point",
    "front_table",
]


def to_minimization(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """``values`` (n, m) with ``directions[j]`` in {"min", "max"} -> a float copy where smaller is better.

    NaN (a metric the model could not give) becomes +inf: the worst possible value.
    """
    F = np.array(values, dtype=np.float64, copy=True, ndmin=2)
    if F.shape[1] != len(directions):
        raise ValueError(f"{F.shape[1]} objective columns but {len(directions)} directions")
    for j, d in enumerate(directions):
        if d == "max":
            F[:, j] = -F[:, j]
        elif d != "min":
            raise ValueError(f"direction must be 'min' or 'max', not {d!r}")
    F[np.isnan(F)] = np.inf
    return F


def _dominated_by(F: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rows of ``F`` that ``p`` dominates."""
    return np.all(p <= F, axis=1) & np.any(p < F, axis=1)


def nondominated_mask(F: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``F`` (minimization).

    Two objectives: one sort and a running minimum, O(n log n). More: repeated culling in lexicographic
    order, each step takes the first remaining point (no remaining point can dominate it) and drops
    every point it dominates, O(n * front size) in vectorized steps. ``F`` must not hold NaN.
    """
    F = np.asarray(F, dtype=np.float64)
    n = len(F)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    if F.ndim != 2:
        raise ValueError("F must be a 2-D array (n points, m objectives)")
    if F.shape[1] == 1:
        return F[:, 0] == F[:, 0].min()
    if F.shape[1] == 2:
        order = np.lexsort((F[:, 1], F[:, 0]))  # by f0, ties by f1
        f0, f1 = F[order, 0], F[order, 1]
        best_before = np.minimum.accumulate(np.concatenate(([np.inf], f1[:-1])))
        keep = f1 < best_before
        # a point equal to the last kept point in both objectives is not dominated either
        kept_idx = np.maximum.accumulate(np.where(keep, np.arange(n), 0))
        same = (f0 == f0[kept_idx]) & (f1 == f1[kept_idx])
        mask[order[keep | same]] = True
        return mask
    # lexicographic order: the first remaining point cannot be dominated by any remaining point
    order = np.lexsort(tuple(F[:, j] for j in reversed(range(F.shape[1]))))
    remaining = order
    while len(remaining):
        p = F[remaining[0]]
        mask[remaining[0]] = True
        dominated = _dominated_by(F[remaining], p)
        dominated[0] = True  # done with p itself; its exact duplicates stay and are picked next
        remaining = remaining[~dominated]
    return mask


def nondominated_rank(F: np.ndarray, max_rank: int | None = None) -> np.ndarray:
    """Non-domination rank of every row: 1 for the front, 2 for the front of the rest, ...

    Rows beyond ``max_rank`` (when given) get rank 0, meaning "not ranked".
    """
    F = np.asarray(F, dtype=np.float64)
    rank = np.zeros(len(F), dtype=np.int64)
    remaining = np.arange(len(F))
    r = 0
    while len(remaining) and (max_rank is None or r < max_rank):
        r += 1
        front = nondominated_mask(F[remaining])
        rank[remaining[front]] = r
        remaining = remaining[~front]
    return rank


def _hv2d(P: np.ndarray, ref: np.ndarray) -> float:
    """Area dominated by the points ``P`` (each strictly better than ``ref``) up to ``ref``."""
    if len(P) == 0:
        return 0.0
    order = np.lexsort((P[:, 1], P[:, 0]))
    x, y = P[order, 0], P[order, 1]
    ymin = np.minimum.accumulate(y)
    step = np.concatenate(([ref[1]], ymin[:-1]))  # the height already covered before each x
    heights = np.maximum(step - ymin, 0.0)  # new height each point adds
    return float(np.sum(heights * (ref[0] - x)))


def hypervolume(F: np.ndarray, ref: Sequence[float]) -> float:
    """Exact hypervolume (minimization) dominated by ``F`` and bounded by the reference point ``ref``.

    One, two or three objectives. Points not strictly better than ``ref`` in every objective add nothing.
    Three objectives: slices along the third objective, each slice a two-objective area (O(n^2 log n)).
    """
    F = np.asarray(F, dtype=np.float64).reshape(len(F), -1) if len(F) else np.zeros((0, len(ref)))
    ref = np.asarray(ref, dtype=np.float64)
    if F.shape[1] != len(ref):
        raise ValueError(f"points have {F.shape[1]} objectives but the reference point has {len(ref)}")
    P = F[np.all(F < ref, axis=1)]
    if len(P) == 0:
        return 0.0
    P = P[nondominated_mask(P)]
    m = len(ref)
    if m == 1:
        return float(ref[0] - P[:, 0].min())
    if m == 2:
        return _hv2d(P, ref)
    if m == 3:
        order = np.argsort(P[:, 2], kind="stable")
        P = P[order]
        z = np.concatenate((P[:, 2], [ref[2]]))
        volume = 0.0
        for i in range(len(P)):
            depth = z[i + 1] - z[i]
            if depth > 0:
                volume += _hv2d(P[: i + 1, :2], ref[:2]) * depth
        return float(volume)
    raise ValueError("hypervolume supports one, two or three objectives")


def reference_point(F: np.ndarray, margin: float = 0.1) -> np.ndarray:
    """A reference point just worse than the worst finite value of each objective (by ``margin`` of range)."""
    F = np.asarray(F, dtype=np.float64)
    finite = np.where(np.isfinite(F), F, np.nan)
    hi, lo = np.nanmax(finite, axis=0), np.nanmin(finite, axis=0)
    span = np.where(hi > lo, hi - lo, np.maximum(np.abs(hi), 1.0))
    return hi + margin * span


def front_table(
    frame: pd.DataFrame,
    objectives: Mapping[str, str],
    feasible: str | None = "feasible",
    dedupe: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The non-dominated feasible rows of ``frame`` for ``objectives`` (column -> "min"/"max").

    ``dedupe`` names the columns that identify a design; repeated designs keep their first row. The
    result is sorted by the first objective (best first) and gets ``pareto_rank`` (always 1 here: the
    front) and ``front_index`` (1-based position along the first objective).
    """
    cols = list(objectives)
    rows = frame
    if feasible is not None and feasible in frame:
        rows = frame[frame[feasible].astype(bool)]
    if dedupe:
        rows = rows.drop_duplicates(subset=[c for c in dedupe if c in rows.columns], keep="first")
    F = to_minimization(rows[cols].to_numpy(dtype=np.float64), [objectives[c] for c in cols])
    finite = np.isfinite(F).all(axis=1)
    rows, F = rows[finite], F[finite]
    front = rows[nondominated_mask(F)].copy()
    Ff = to_minimization(front[cols].to_numpy(dtype=np.float64), [objectives[c] for c in cols])
    order = np.lexsort(tuple(Ff[:, j] for j in reversed(range(len(cols)))))
    front = front.iloc[order].reset_index(drop=True)
    front.insert(0, "front_index", np.arange(1, len(front) + 1))
    front.insert(0, "pareto_rank", 1)
    return front
