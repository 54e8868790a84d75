"""Which hardware change pays most: every front design re-scored with each hardware parameter of the
space improved by 10% (bandwidths and GEMM efficiency x1.1, prices x0.9, the scale-up domain to the next
size), its mapping searched again, all designs x changes in one vectorized call of the model: the training
model's mapping search (``objectives.search_mapping``), or for a serving run the serving model's
(``objectives.search_serving``: tp, pp, ep and attention data parallelism searched again at the design's
concurrency, docs/serving.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from dse.report.data import Run
from dse.report.serving import SUMMARY

GEMM_EFF = ("gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4")


def _next_domain(v: np.ndarray) -> np.ndarray:
    """The next scale-up domain size at least 10% larger, on multiples of 8 (8 -> 16, 72 -> 80)."""
    v = np.asarray(v, dtype=np.float64)
    return np.maximum(np.ceil(v * 1.1 / 8.0) * 8.0, v + 1.0)


#: (name, what changes, columns, how): ``how`` maps the column's values to improved ones
CHANGES: tuple[tuple[str, str, tuple[str, ...], Callable[[np.ndarray], np.ndarray]], ...] = (
    ("HBM bandwidth", "gpu_hbm_tbyte_s x1.1", ("gpu_hbm_tbyte_s",), lambda v: v * 1.1),
    ("scale-up bandwidth", "scaleup_gbyte_s x1.1", ("scaleup_gbyte_s",), lambda v: v * 1.1),
    ("scale-up size", "scaleup_size to the next multiple of 8 >= x1.1", ("scaleup_size",), _next_domain),
    ("NIC bandwidth", "nic_gbyte_s x1.1", ("nic_gbyte_s",), lambda v: v * 1.1),
    ("GEMM efficiency", "gpu_gemm_eff_* x1.1 (at most 1)", GEMM_EFF, lambda v: np.minimum(v * 1.1, 1.0)),
    ("server price", "server_usd_per_gpu x0.9", ("server_usd_per_gpu",), lambda v: v * 0.9),
    ("cloud price", "cloud_usd_per_gpu_hr x0.9", ("cloud_usd_per_gpu_hr",), lambda v: v * 0.9),
)


def design_table(run: Run, front: pd.DataFrame) -> dict[str, np.ndarray]:
    """The front designs as the sweep scored them: the space's fixed columns (its facility limits too, or a
    change that draws more power than the facility has would pass) and each design's searched ones."""
    spec = run.info.get("spec", {})
    table: dict[str, object] = {}
    for k, v in spec.get("workload", {}).items():
        table[k] = np.asarray(front[k]) if k in front.columns else v
    for k, v in spec.get("cluster", {}).items():
        table[k] = np.asarray(front[k]) if k in front.columns else v
    mapping = spec.get("mapping")
    if isinstance(mapping, Mapping):  # mapping columns the space fixes to one value
        for k, v in mapping.items():
            if isinstance(v, list) and len(v) == 1:
                table[k] = v[0]
            elif not isinstance(v, (list, dict)) and v != "auto":
                table[k] = v
    for k in ("facility_mw", "rack_kw_max"):  # the facility's limits, on every row as dse.space.Space gives them
        if spec.get(k) is not None:
            table[k] = spec[k]
    n = len(front)
    out = {k: (np.asarray(v) if np.ndim(v) else np.full(n, v, dtype=object if isinstance(v, str) else None))
           for k, v in table.items()}
    if spec.get("prices"):  # the space's price file, as the sweep gave it (dse.spec.prices)
        from dse.spec.prices import apply_prices

        out = apply_prices(out, spec["prices"]["usd_per_gpu_hr"], n)
        out["cloud_usd_per_gpu_hr"] = np.broadcast_to(out["cloud_usd_per_gpu_hr"], (n,))
    return out


def _calibration(run):
    """The calibration the run's designs were scored with (its space's ``calibration:``; None: the shipped one)."""
    given = run.info.get("spec", {}).get("calibration")
    if not given:
        return None
    from objectives import InputError
    from objectives.calibration import Calibration

    try:
        return Calibration.read(given["path"])
    except InputError as exc:
        from dse.errors import UserError

        raise UserError(f"the run was scored with a calibration file that is gone or changed: {exc}") from None


def _choices(run):
    """The mapping choices the sweep searched, as dse.problem.default_scorer passes them: None for a space
    whose mapping is ``auto`` (the model's own search), else the model's defaults with the lists the space
    gives. The two search alike since a searched sequence_parallel keeps tp 1 candidates (with it off,
    objectives/mapping.py); before, the defaults spelled out searched it over (1,), dropped every tp 1 mapping,
    and a what-if's baseline differed from its front (roadmap-2027-moe #1: 1.62 days at tp 2, not 1.57)."""
    import objectives

    mapping = run.info.get("spec", {}).get("mapping")
    if not isinstance(mapping, Mapping) or not mapping:
        return None
    if run.serving:
        from objectives.serving import SERVING_CHOICES

        choices = dict(SERVING_CHOICES)
    else:
        choices = dict(objectives.DEFAULT_CHOICES)
    for k, v in mapping.items():
        if isinstance(v, list) and len(v) > 1:
            choices[k] = tuple(v)
    return choices


def stack_blocks(blocks: Sequence[Mapping], front: pd.DataFrame) -> dict[str, np.ndarray]:
    """Design tables of ``len(front)`` rows each, one after another, as one table to score in one call; a
    column that only some blocks set takes the front's values in the others."""
    table = {}
    for k in set().union(*blocks):
        parts = [b[k] if k in b else front[k].to_numpy() for b in blocks]
        table[k] = np.concatenate([np.asarray(p, dtype=object) if np.asarray(p).dtype.kind in "OUS" else
                                   np.asarray(p, dtype=np.float64) for p in parts])
    return table


def default_score(run: Run) -> Callable[[dict], Mapping[str, np.ndarray]]:
    """The model the run's designs were scored with, as a design table -> metrics function: the serving
    model's mapping search for a serving run (its calibration, objectives/serving_calibration.json), the
    training model's under the run's calibration otherwise; both over the space's mapping choices."""
    import objectives

    choices = _choices(run)
    if run.serving:
        return lambda t: objectives.search_serving(t, choices=choices)
    cal = _calibration(run)
    return lambda t: objectives.search_mapping(t, choices=choices, cal=cal)


def metrics_of(run: Run) -> dict[str, str]:
    """The metrics the sensitivity reports (metric -> direction): the objectives, and for a serving run the
    serving summary (dse.report.serving.SUMMARY) beside them."""
    out = dict(run.objectives)
    if run.serving:
        for m in SUMMARY:
            if m in run.front.columns:
                out.setdefault(m, "min" if m in ("usd_per_mtok_out", "ttft_s") else "max")
    return out


def sensitivity(run: Run, score: Callable[[dict], Mapping[str, np.ndarray]] | None = None,
                metrics: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per (front design, change): each of ``metrics``' improvement in percent (positive = better;
    default :func:`metrics_of`, the objectives first).

    ``score`` maps a design table to metrics (default :func:`default_score`: the run's model with the space's
    mapping choices). Changes whose columns the front lacks are skipped.
    """
    front = run.front
    if front.empty:
        return pd.DataFrame()
    score = score or default_score(run)
    metrics = dict(metrics or metrics_of(run))

    base = design_table(run, front)
    n = len(front)
    changes = [c for c in CHANGES if all(col in front.columns for col in c[2])]
    blocks = [base]
    for _, _, cols, how in changes:
        block = dict(base)
        for col in cols:
            block[col] = how(front[col].to_numpy(dtype=np.float64))
        blocks.append(block)
    with np.errstate(all="ignore"):
        out = score(stack_blocks(blocks, front))
    feasible = np.asarray(out.get("feasible", np.ones(n * (len(changes) + 1), dtype=bool)), dtype=bool)
    rows = []
    for j, (name, what, _, _) in enumerate(changes, start=1):
        for i in range(n):
            r = {"design": i, "change": name, "what": what}
            for metric, direction in metrics.items():
                old = float(np.asarray(out[metric])[i])
                new = float(np.asarray(out[metric])[j * n + i])
                ok = feasible[i] and feasible[j * n + i] and old not in (0.0,) and math.isfinite(old) and math.isfinite(new)
                gain = ((old - new) / abs(old) if direction == "min" else (new - old) / abs(old)) * 100 if ok else np.nan
                r[metric] = gain
            rows.append(r)
    return pd.DataFrame(rows)


def ranking(sens: pd.DataFrame, objectives: Mapping[str, str]) -> pd.DataFrame:
    """Per change: the median improvement of each metric ``sens`` has over the front, ranked by the mean of
    the ``objectives``' medians; ``best_on_front``: the largest gain of one design on an objective."""
    if sens.empty:
        return pd.DataFrame()
    metrics = list(objectives)
    shown = [c for c in sens.columns if c not in ("design", "change", "what")]
    g = sens.groupby("change", sort=False)
    table = g[shown].median()
    table["what"] = g["what"].first()
    table["mean"] = table[metrics].mean(axis=1)
    table["best_on_front"] = g[metrics].max().max(axis=1)
    return table.sort_values("mean", ascending=False, na_position="last")
