"""How sure the model is of a recommended design: its 80% interval, and where the interval is wide, why.

The interval and the distance come from objectives.training.intervals (the columns ``<metric>_lo`` / ``_hi``,
``interval_half_width_frac``, ``validated_distance_oct``, ``interval_extrapolated``); the generation's
widening from the shipped interval parameters (``scale.generation``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from dse.report.names import number

__all__ = ["THIN_GROUND_HALF_WIDTH", "sureness", "thin_ground", "interval_span", "generation_widening"]

#: an 80% interval wider than this share either side makes a recommendation one on thin ground
THIN_GROUND_HALF_WIDTH = 0.25


def _finite(v) -> bool:
    return isinstance(v, (int, float, np.number)) and bool(np.isfinite(float(v)))


def thin_ground(metric: str, row: pd.Series) -> list[str] | None:
    """Why the design's ``metric`` stands on thin ground (its 80% interval wider than THIN_GROUND_HALF_WIDTH
    either side, or past every held-out run): the reasons, possibly none named; None where it does not."""
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if not (_finite(lo) and _finite(hi)):
        return None
    half = row.get("interval_half_width_frac")
    far = bool(row.get("interval_extrapolated") or False)
    if not (_finite(half) and float(half) > THIN_GROUND_HALF_WIDTH) and not far:
        return None
    why = []
    d = row.get("validated_distance_oct")
    if _finite(d) and float(d) >= 1.0:
        why.append(f"{number(d, 2)} octaves from the published runs of its software stack")
    widen = generation_widening(row)
    if widen > 1.5:
        why.append(f"on a GPU generation one published source validates, intervals x{number(widen, 2)}")
    if far:
        why.append("beyond every held-out run, so the interval is a lower bound on the uncertainty")
    return why


def interval_span(metric: str, row: pd.Series) -> str:
    """The 80% interval relative to the value: '-40% to +62%' (or '±40%' where the value is not positive)."""
    lo, hi, v = float(row[f"{metric}_lo"]), float(row[f"{metric}_hi"]), float(row[metric])
    half = row.get("interval_half_width_frac")
    if v > 0:
        return f"{lo / v - 1.0:+.0%} to {hi / v - 1.0:+.0%}"
    return f"±{float(half):.0%}" if _finite(half) else "unknown"


def sureness(metric: str, row: pd.Series, amount: Callable[[str, float], str]) -> str:
    """The sentence on the design's ``metric`` (its first objective; ``amount`` writes a value with its unit):
    its 80% interval and, where it is wide (beyond THIN_GROUND_HALF_WIDTH, or past every held-out run), "thin
    ground" with the reasons: the octaves from the validated runs, a GPU generation one source validates."""
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    if not (_finite(lo) and _finite(hi)):
        return ""
    from dse.report.display import phrase

    said = f"its 80% interval of {phrase(metric)} is [{amount(metric, float(lo))}, {amount(metric, float(hi))}]"
    why = thin_ground(metric, row)
    if why is None:
        return said
    return said + f" ({interval_span(metric, row)}: thin ground" + (", " + "; ".join(why) if why else "") + ")"


def generation_widening(row: pd.Series) -> float:
    """The shipped intervals' widening of the design's GPU generation (1 where the row or the file lacks it)."""
    from objectives.training.intervals import generation, load_params

    fp8, fp4 = row.get("gpu_fp8_tflop_s"), row.get("gpu_fp4_tflop_s")
    if fp8 is None or fp4 is None:
        return 1.0
    terms = load_params()[0]["scale"].get("generation")
    if not terms:
        return 1.0
    code = int(generation(np.array([float(fp8)]), np.array([float(fp4)]))[0])
    return float(np.exp(terms[code]))
