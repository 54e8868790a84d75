"""Which front design to recommend: the knee of the front, or the cheapest design within the space's deadline.

The knee (Das 1999, "On characterizing the 'knee' of the Pareto curve based on normal-boundary
intersection", Struct. Optim. 18; Deb & Gupta 2011, "Understanding knee points in bicriteria problems",
Eng. Optim. 43(11), Sec. 3; Branke et al. 2004, "Finding knees in multi-objective optimization", PPSN
VIII, Sec. 3) is the front design farthest from the line (two objectives) or hyperplane (three: Zhang, Tian
& Jin 2015, "A knee point-driven evolutionary algorithm", IEEE TEVC 19(6), Sec. III-B) through the front's
extreme designs, on the ideal side: the one where moving along the front in either direction costs most
of one objective for least of another. Each objective is put in its direction (smaller is better), on a
log scale where its front values are positive and span more than a factor of 10 (a cost from $2M to $50M
is judged by ratios, not dollars), and normalized to [0, 1] over the front.

With a deadline (a space constraint ``time_to_train_days <= D``), the question a buyer asks is what the
cheapest design is that meets it: the design with the least cost (the space's cost objective, else the run's
cost column) among those within the constraints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["normalized", "knee_index", "deadline_days", "cost_metric", "cheapest_index", "slo_targets", "SERVING_COST",
           "SLO_METRICS"]

#: the metric a deadline constrains
DEADLINE_METRIC = "time_to_train_days"
#: the run's cost, newest name first (objectives renamed ``tco_usd`` to ``run_cost_usd``; the old name is an alias)
RUN_COST = ("run_cost_usd", "tco_usd")
#: what a serving design costs per unit of work (objectives.serving.economics)
SERVING_COST = "usd_per_mtok_out"
#: the latency metrics a serving target bounds, and the model's own target columns of each (docs/serving.md)
SLO_METRICS = {"ttft_s": "ttft_slo_s", "tpot_s": "tpot_slo_s", "e2e_latency_s": None, "tokens_per_s_per_user": None}
_BOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|<|>=|>)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")
_CONSTRAINT = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|<)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")


def normalized(F: np.ndarray) -> np.ndarray:
    """``F`` (n, m; smaller is better, finite) with each column log-scaled where positive and spanning more
    than 10x, then mapped to [0, 1] (0 the best front value); a column with one value becomes 0."""
    F = np.array(F, dtype=np.float64, ndmin=2)
    lo, hi = F.min(axis=0), F.max(axis=0)
    logged = (lo > 0) & (hi > 10 * lo)
    F[:, logged] = np.log10(F[:, logged])
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (F - lo) / span


def knee_index(F: np.ndarray) -> int:
    """Row of the knee of the front ``F`` (n, m; smaller is better in every column, finite, non-dominated).

    The extreme design of each objective (its best; ties: the least sum over the others) spans a line or
    hyperplane ``w . f = 1`` in the normalized objectives; the knee maximizes the signed distance
    ``(1 - w . f) / |w|`` towards the ideal point. Where the extremes do not span one (a front of one or
    two designs, coinciding extremes), the plane ``sum f = 1`` stands in: the design with the least sum
    of normalized objectives. Ties go to the earlier row (the front's order: best first objective first).
    """
    N = normalized(F)
    n, m = N.shape
    if n <= 2:
        return int(np.argmin(N.sum(axis=1)))
    extremes = [int(np.lexsort((N.sum(axis=1), N[:, j]))[0]) for j in range(m)]
    E = N[extremes]
    w = np.ones(m)
    if len(set(extremes)) == m and np.linalg.matrix_rank(E) == m:
        w = np.linalg.solve(E, np.ones(m))
    distance = (1.0 - N @ w) / np.linalg.norm(w)
    best = distance.max()
    return int(np.flatnonzero(distance >= best - 1e-12 * max(1.0, abs(best)))[0])


def deadline_days(constraints: Sequence[str]) -> float | None:
    """The tightest deadline among a space's constraints (``time_to_train_days <= D``), or None."""
    bounds = [float(m.group(3)) for c in constraints if isinstance(c, str) and (m := _CONSTRAINT.match(c))
              and m.group(1) == DEADLINE_METRIC]
    return min(bounds) if bounds else None


def slo_targets(constraints: Sequence[str], given: Mapping[str, object] | None = None) -> dict[str, tuple[str, float]]:
    """A serving space's latency targets: metric -> (op, bound), the tightest of its constraints on
    :data:`SLO_METRICS` and of the model's target columns its ``given`` workload or cluster fixes to one number
    (``tpot_slo_s: 0.05`` is ``tpot_s <= 0.05``)."""
    out: dict[str, tuple[str, float]] = {}

    def put(metric, op, bound):
        old = out.get(metric)
        upper = op.startswith("<")
        if old is None or (bound < old[1] if upper else bound > old[1]):
            out[metric] = (op, bound)

    for c in constraints:
        m = _BOUND.match(c) if isinstance(c, str) else None
        if m and m.group(1) in SLO_METRICS:
            put(m.group(1), m.group(2), float(m.group(3)))
    for metric, column in SLO_METRICS.items():
        v = (given or {}).get(column) if column else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v):
            put(metric, "<=", float(v))
    return out


def cost_metric(objectives: Mapping[str, str], columns) -> str | None:
    """What "cheapest" means: the space's first minimized cost objective (a ``_usd`` metric), else the run's
    cost column the table has (``run_cost_usd``, or ``tco_usd`` before the rename)."""
    for name, direction in objectives.items():
        if name.endswith("_usd") and direction == "min":
            return name
    return next((c for c in RUN_COST if c in columns), None)


def cheapest_index(frame: pd.DataFrame, cost: str, first: str, direction: str = "min") -> int | None:
    """Row (position) of the least ``cost`` in ``frame`` (ties: the better ``first`` objective, then the
    earlier row), or None where no row has a finite cost."""
    c = frame[cost].to_numpy(dtype=np.float64)
    f = frame[first].to_numpy(dtype=np.float64)
    f = -f if direction == "max" else f
    ok = np.isfinite(c)
    if not ok.any():
        return None
    rows = np.flatnonzero(ok)
    order = np.lexsort((rows, np.where(np.isfinite(f[rows]), f[rows], np.inf), c[rows]))
    return int(rows[order[0]])
