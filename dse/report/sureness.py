"""How sure the model is of a recommended design: its 80% interval, and where the interval is wide, why.

The interval and the distance come from objectives.intervals (the columns ``<metric>_lo`` / ``_hi``,
``interval_half_width_frac``, ``validated_distance_oct``, ``interval_extrapolated``); the generation's
widening from the shipped interval parameters (``scale.generation``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from dse.report.names import number

__all__ = ["THIN_GROUND_HALF_WIDTH", "sureness", "generation_widening"]

#: an 80% interval wider than this share either side makes a recommendation one on thin ground
THIN_GROUND_HALF_WIDTH = 0.25


def _finite(v) -> bool:
    return isinstance(v, (int, float, np.number)) and bool(np.isfinite(float(v)))


def sureness(metric: str, row: pd.Series, amount: Callable[[str, float], str]) -> str:
    """The sentence on the design's ``metric`` (its first objective; ``amount`` writes a value with its unit):
    its 80% interval and, where it is wide (beyond THIN_GROUND_HALF_WIDTH, or past every held-out run), "thin
    ground" with the reasons: the octaves from the validated runs, a GPU generation one source validates."""
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if not (_finite(lo) and _finite(hi)):
        return ""
    said = f"its 80% interval of {metric} is [{amount(metric, float(lo))}, {amount(metric, float(hi))}]"
    half = row.get("interval_half_width_frac")
    far = bool(row.get("interval_extrapolated") or False)
    if not (_finite(half) and float(half) > THIN_GROUND_HALF_WIDTH) and not far:
        return said
    why = []
    d = row.get("validated_distance_oct")
    if _finite(d) and float(d) >= 1.0:
        why.append(f"{number(d, 2)} octaves from the published runs of its software stack")
    widen = generation_widening(row)
    if widen > 1.5:
        why.append(f"on a GPU generation one published source validates, intervals x{number(widen, 2)}")
    if far:
        why.append("beyond every held-out run, so the interval is a lower bound on the uncertainty")
    v = float(row[metric])
    span = f"{float(lo) / v - 1.0:+.0%} to {float(hi) / v - 1.0:+.0%}" if v > 0 else f"±{float(half):.0%}"
    return said + f" ({span}: thin ground" + (", " + "; ".join(why) if why else "") + ")"


def generation_widening(row: pd.Series) -> float:
    """The shipped intervals' widening of the design's GPU generation (1 where the row or the file lacks it)."""
    from objectives.intervals import generation, load_params

    fp8, fp4 = row.get("gpu_fp8_tflop_s"), row.get("gpu_fp4_tflop_s")
    if fp8 is None or fp4 is None:
        return 1.0
    terms = load_params()[0]["scale"].get("generation")
    if not terms:
        return 1.0
    code = int(generation(np.array([float(fp8)]), np.array([float(fp4)]))[0])
    return float(np.exp(terms[code]))
