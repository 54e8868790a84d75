"""How many GPUs a facility's power holds: the largest whole-server or whole-rack count of a design whose
peak facility power (objectives/economics/facility.py) is within its ``facility_mw``.

It runs the model itself (the peak grows with the count: servers, switches, storage), so it sits beside the
pipeline that assembles the models, not in the economics it reads."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.economics.facility import server_peak_w_per_gpu, unit_gpus
from objectives.pipeline import MODELS, prepare, run_models

__all__ = ["largest_fitting_gpus"]


def largest_fitting_gpus(table: Mapping[str, object], cal=None) -> np.ndarray:
    """Per row of ``table`` (designs with a ``facility_mw``; any ``n_gpus`` and mapping ignored), the largest
    GPU count of whole servers or racks (whole instances rented) whose ``facility_power_peak_mw`` is at most
    ``facility_mw``: 0 where not one fits, NaN without a budget. Raises InputError as objectives.evaluate.

    The peak grows with the count (more servers, switches and storage bandwidth), so a bisection on the whole
    units finds it: from 0 to the units whose servers alone fit, facility_mw / (pue x unit x server peak per
    GPU), each pass one vectorized model run over every row (about log2 of that many passes). The peak does not
    depend on the mapping; each pass runs one GPU per model-parallel group (tp = pp = cp = micro_batch = 1)."""
    rows = dict(table)
    rows.update({"n_gpus": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "vp": 1, "micro_batch": 1})
    _, floats = prepare(rows)
    upto = MODELS[: next(i for i, m in enumerate(MODELS) if "facility_power_peak_mw" in m.provides) + 1]
    unit = unit_gpus(floats)
    budget = floats["facility_mw"]
    with np.errstate(all="ignore"):
        hi = np.floor(budget * 1e6 / (floats["pue"] * unit * server_peak_w_per_gpu(floats)))
        hi = np.where(np.isfinite(hi) & (hi > 0), hi, 0.0)
        lo = np.zeros_like(hi)
        while (hi > lo).any():  # passes of the bisection, each over every row at once
            mid = np.ceil((lo + hi) / 2.0)
            work = dict(floats)
            work["n_gpus"] = np.maximum(mid, 1.0) * unit
            peak = run_models(work, cal, upto, keep={"facility_power_peak_mw"})["facility_power_peak_mw"]
            fits = (peak <= budget) | (hi <= lo)
            lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid - 1.0)
    return np.where(np.isnan(budget), np.nan, np.minimum(lo, hi) * unit)
