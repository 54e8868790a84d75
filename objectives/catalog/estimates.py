"""Announced systems as sourced estimates: the range of a catalog figure, and how sure an entry is.

A ``gpus.yaml`` field may carry ``low`` and ``high`` beside ``value`` where its sources disagree or only a
marketing figure exists (sparse against dense FLOP/s, die against package counts, an HBM bandwidth revised
after the announcement); ``value`` is the figure the model runs on. Of the figures the throughput depends
on (:data:`RANGE_FIELDS`: the peak of each precision, HBM capacity and bandwidth, the scale-up and NIC
bandwidths) the range reaches the design table as two columns per field, ``<field>_lo_frac`` and
``<field>_hi_frac`` (low / value and high / value, 1 where the field has no range), gathered from the
catalog like the field itself (objectives.catalog.expand); objectives.training.intervals widens a design's 80%
interval by them. A row that gives the field itself (a what-if override, or a rented instance's own
figure) fixes it: its fractions are 1 there.

``gpu_announced`` (1 / 0) marks a system that is announced and not shipped: its ``system`` field's
confidence is ``announced``. No published run validates it, so a design on it is always extrapolated
(objectives.training.intervals).

Confidence labels, weakest last in :data:`CONFIDENCE_ORDER`: ``meas`` measured, ``spec`` vendor datasheet,
``rep`` press or third party, ``rec`` recalled, ``announced`` a vendor's figure for a part not yet shipped
(keynote, press release), ``est`` estimated (the reasoning in the source string).
"""

from __future__ import annotations

__all__ = ["RANGE_FIELDS", "RANGE_COLUMNS", "RANGE_DEFAULTS", "CONFIDENCE_ORDER", "SPEC_FIELDS", "range_columns",
           "weakest_confidence", "gpu_confidence", "clear_given"]

#: the catalog figures the throughput depends on, whose range widens a design's interval
RANGE_FIELDS = ("gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_hbm_gb", "gpu_hbm_tbyte_s",
                "scaleup_gbyte_s", "nic_gbyte_s")
#: the design-table columns the ranges reach it as, and the announced-system flag
RANGE_COLUMNS = tuple(f"{f}_{end}_frac" for f in RANGE_FIELDS for end in ("lo", "hi")) + ("gpu_announced",)
#: a table naming no catalog GPU: no range, not announced
RANGE_DEFAULTS = {**dict.fromkeys(RANGE_COLUMNS[:-1], 1.0), "gpu_announced": 0.0}
#: strongest first; an entry is as sure as its weakest spec-sheet figure
CONFIDENCE_ORDER = ("meas", "spec", "rep", "rec", "announced", "est")
#: the figures a spec sheet states, whose weakest confidence summarises an entry (``dse catalog gpus``)
SPEC_FIELDS = RANGE_FIELDS + ("scaleup_size",)


def _fraction(entry, end: str) -> float:
    """``end`` (low or high) over the value of a {value, low, high} field; 1 where it has none."""
    if not isinstance(entry, dict) or entry.get(end) is None or not entry.get("value"):
        return 1.0
    return float(entry[end]) / float(entry["value"])


def range_columns(spec: dict) -> dict[str, float]:
    """The :data:`RANGE_COLUMNS` of one raw gpus.yaml entry."""
    out = {f"{f}_{end}_frac": _fraction(spec.get(f), low_high)
           for f in RANGE_FIELDS for end, low_high in (("lo", "low"), ("hi", "high"))}
    system = spec.get("system")
    out["gpu_announced"] = 1.0 if isinstance(system, dict) and system.get("confidence") == "announced" else 0.0
    return out


def weakest_confidence(spec: dict) -> str:
    """The weakest confidence among an entry's :data:`SPEC_FIELDS` that have a value."""
    seen = [spec[f]["confidence"] for f in SPEC_FIELDS
            if isinstance(spec.get(f), dict) and spec[f].get("value") is not None]
    return max(seen, key=CONFIDENCE_ORDER.index) if seen else "–"


def gpu_confidence() -> dict[str, str]:
    """GPU id -> the weakest confidence of its spec-sheet figures (``dse catalog gpus``)."""
    from objectives.catalog import _load

    return {gid: weakest_confidence(spec) for gid, spec in _load("gpus.yaml", "gpus").items()}


def clear_given(expanded: dict, cols: dict) -> dict:
    """The range columns of ``expanded`` with each row that gives a range field itself (``cols``, the
    table's and a rented instance's own values) set to 1: an override fixes the figure. New columns only."""
    import numpy as np

    out = {}
    for f in RANGE_FIELDS:
        if f not in cols:
            continue
        given = np.isfinite(np.asarray(cols[f], dtype=np.float64))
        if not given.any():
            continue
        for end in ("lo", "hi"):
            name = f"{f}_{end}_frac"
            if name in expanded and name not in cols:
                out[name] = np.where(given, 1.0, expanded[name])
    return out

