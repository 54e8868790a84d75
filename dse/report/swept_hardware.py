"""A what-if the space sweeps: a catalog field (HBM bandwidth, NIC speed, ...) given several values, and
what each value buys.

A space may sweep a hardware field the catalog fixes for each GPU (spaces/small.yaml sweeps
``gpu_hbm_tbyte_s`` from 2 to 8 TB/s on every GPU). The sweep has already scored every value, so the effect
is read from its designs, no model call (dse.report.whatif re-scores the front instead): at each value, the
best design (dse.report.buyer's rule applied to that value's designs) and how its objectives change against
the best design *as catalogued*, each design at its own GPU's catalog value (the swept value nearest it
where the grid does not hold it exactly). A field the catalog does not give per GPU is compared with its
lowest swept value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.buyer import choose, target
from dse.report.data import Run
from dse.report.display import label, value_text
from dse.report.names import design_names, number
from dse.report.whatif import FIELDS
from dse.store.pareto import front_table

__all__ = ["swept_fields", "catalog_values", "value_name", "effect_table"]


def swept_fields(run: Run) -> list[str]:
    """The catalog (hardware) fields among the run's searched columns that take more than one value."""
    t = run.trials
    return [c for c in run.design_columns if c in FIELDS and c in t and pd.api.types.is_numeric_dtype(t[c])
            and t[c].nunique() > 1]


def value_name(field: str, v: float) -> str:
    """'HBM 8 TB/s': the field's short label, the value and its unit."""
    from dse.report.names import LABELS, unit_of

    return " ".join(p for p in (LABELS.get(field, field.replace("_", " ")), number(v, 3), unit_of(field)) if p)


def catalog_values(trials: pd.DataFrame, field: str) -> np.ndarray:
    """Each design's catalog value of ``field`` for its GPU (objectives.catalog.gpus); NaN where unknown."""
    try:
        from objectives.catalog import gpus

        table = gpus()
    except Exception:  # no catalog (a custom model): no baseline
        return np.full(len(trials), np.nan)
    if "gpu" not in trials:
        return np.full(len(trials), np.nan)
    return np.array([float(table.get(str(g), {}).get(field, np.nan)) for g in trials["gpu"]], dtype=np.float64)


def _best(run: Run, sub: pd.DataFrame) -> pd.Series | None:
    front = front_table(sub, run.objectives, feasible="admissible", dedupe=run.design_columns or None)
    if front.empty:
        return None
    first = list(run.objectives)[0]
    front = front.sort_values(first, ascending=run.objectives[first] == "min", kind="stable").reset_index(drop=True)
    row, _ = choose(front, sub, run.objectives, target(run))
    return row


def _baseline(run: Run, field: str) -> tuple[str, np.ndarray]:
    """(what the baseline is, the mask of the designs it is chosen among)."""
    t = run.trials
    v = t[field].to_numpy(dtype=np.float64)
    cat = catalog_values(t, field)
    if np.isfinite(cat).any():
        dist = np.abs(v - cat)
        nearest = pd.Series(dist).groupby(t["gpu"].astype(str).to_numpy()).transform("min").to_numpy()
        exact = bool(np.all(nearest[np.isfinite(nearest)] == 0))
        return ("each GPU's catalog value" if exact else "each GPU's catalog value (the nearest swept)"), \
            np.isfinite(dist) & (dist == nearest)
    low = np.nanmin(v)
    return f"the lowest value, {value_name(field, low)}", v == low


def effect_table(run: Run, field: str) -> tuple[list[str], list[list], str]:
    """(header, rows, baseline): per swept value, its designs, feasible designs, best design, the best
    design's objectives and their change (percent) against the baseline's best design; the first row is the
    baseline itself."""
    t = run.trials
    objectives = list(run.objectives)
    what, mask = _baseline(run, field)
    picks = [("as catalogued" if "catalog" in what else "baseline", mask)]
    for v in sorted(t[field].dropna().unique()):
        picks.append((value_name(field, v), (t[field] == v).to_numpy()))
    best = [(name, m, _best(run, t[m])) for name, m in picks]
    base = best[0][2]
    shown = pd.DataFrame([b for _, _, b in best if b is not None])
    names = iter(design_names(shown, [c for c in run.design_columns if c != field]) if len(shown) else [])
    header = [label(field), "best design", "designs", "feasible"] + objectives + [f"{label(m).split(' (')[0]} change (%)"
                                                                                 for m in objectives]
    rows = []
    for name, m, row in best:
        sub = t[m]
        cells = [name, next(names) if row is not None else "(none feasible)", len(sub),
                 int(sub["admissible"].astype(bool).sum())]
        cells += [float(row[o]) if row is not None else np.nan for o in objectives]
        for o in objectives:
            ok = row is not None and base is not None and float(base[o]) != 0
            cells.append(round((float(row[o]) / float(base[o]) - 1) * 100, 1) if ok else np.nan)
        rows.append(cells)
    if base is not None:
        what += " (best there: " + ", ".join(value_text(o, float(base[o])) for o in objectives) + ")"
    return header, rows, what
