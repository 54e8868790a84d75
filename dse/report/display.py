"""The one table of display names: every metric a report shows, as a reader reads it, with its unit.

A column's name carries its unit for the engine (``ttft_s``, ``power_mw``: docs/model-contract.md); a
reader wants "TTFT (ms)" and "Power (kW)". :data:`DISPLAY` gives each metric its name, its unit and the
factor from the column's unit to it, and, where a front's values are all below 1 in that unit, a smaller
unit (``power_mw`` 0.0016 reads 1.6 kW; ``ttft_s`` 0.12 reads 120 ms). A direction reads "↓ better" or
"↑ better", never "(min)" / "(max)" (read as minutes). Every chart title, table header, tick and
sentence of the report takes its words from here; a metric the table lacks reads as its column name
without the unit suffix, with the unit that suffix names (dse.report.names.unit_of).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.report.names import money, number, unit_of

__all__ = ["Display", "DISPLAY", "display", "unit_for", "label", "axis_title", "better", "tick_text", "value_text",
           "phrase", "SMALL_BELOW"]


@dataclass(frozen=True)
class Display:
    """How a metric reads: ``name``, ``unit`` ('$' for dollars, '%' for a fraction shown in percent), the
    factor from the column's value to the unit, and an optional smaller (unit, factor) for small values."""

    name: str
    unit: str
    scale: float = 1.0
    small: tuple[str, float] | None = None


#: values all below this (in the metric's unit) read in its smaller unit (ms for s, kW for MW)
SMALL_BELOW = 1.0

DISPLAY: dict[str, Display] = {
    # training
    "time_to_train_days": Display("Time to train", "days"),
    "run_cost_usd": Display("Run cost", "$"),
    "tco_usd": Display("Run cost", "$"),
    "capex_usd": Display("Capex", "$"),
    "lifetime_cost_usd": Display("Lifetime cost", "$"),
    "mfu": Display("MFU", "%", 100.0),
    "goodput": Display("Goodput", "%", 100.0),
    "step_time_s": Display("Step time", "s", small=("ms", 1e3)),
    "hbm_used_gb": Display("HBM used", "GB/GPU"),
    "energy_mwh": Display("Energy", "MWh"),
    "usd_per_mtok": Display("Cost per M tokens", "$"),
    "tokens_per_s": Display("Throughput", "tokens/s"),
    "tokens_per_s_per_gpu": Display("Throughput per GPU", "tokens/s"),
    # power and the facility
    "power_mw": Display("Power", "MW", small=("kW", 1e3)),
    "facility_power_peak_mw": Display("Facility peak power", "MW", small=("kW", 1e3)),
    "facility_budget_frac": Display("Facility budget used", "%", 100.0),
    "n_gpus": Display("GPUs", "count"),
    "n_gpus_billed": Display("GPUs billed", "count"),
    # serving
    "usd_per_mtok_out": Display("Cost per M output tokens", "$"),
    "usd_per_hr": Display("Cost per hour", "$"),
    "tokens_per_s_per_user": Display("Speed per user", "tokens/s"),
    "output_tokens_per_s_per_gpu": Display("Throughput per GPU", "output tokens/s"),
    "output_tokens_per_s": Display("Throughput", "output tokens/s"),
    "ttft_s": Display("TTFT", "s", small=("ms", 1e3)),
    "tpot_s": Display("TPOT", "ms", 1e3),
    "e2e_latency_s": Display("End-to-end latency", "s", small=("ms", 1e3)),
    "energy_j_per_tok_out": Display("Energy per output token", "J"),
    "kv_cache_gb": Display("KV cache", "GB/GPU"),
    "concurrency": Display("Requests in flight", "count"),
    "replicas_used": Display("Replicas", "count"),
    "prefill_gpus": Display("Prefill GPUs", "count"),
    # the catalog's hardware fields a space may sweep (dse.report.whatif.FIELDS)
    "gpu_hbm_tbyte_s": Display("HBM bandwidth", "TB/s"),
    "gpu_hbm_gb": Display("HBM capacity", "GB"),
    "nic_gbyte_s": Display("NIC bandwidth", "GB/s"),
    "scaleup_gbyte_s": Display("Scale-up bandwidth", "GB/s"),
    "scaleup_size": Display("Scale-up domain", "GPUs"),
    "gpu_bf16_tflop_s": Display("BF16 peak", "TFLOP/s"),
    "gpu_fp8_tflop_s": Display("FP8 peak", "TFLOP/s"),
    "gpu_fp4_tflop_s": Display("FP4 peak", "TFLOP/s"),
    "gpu_gemm_eff_bf16": Display("BF16 GEMM efficiency", "%", 100.0),
    "gpu_gemm_eff_fp8": Display("FP8 GEMM efficiency", "%", 100.0),
    "gpu_gemm_eff_fp4": Display("FP4 GEMM efficiency", "%", 100.0),
    "gpu_tdp_w": Display("GPU power", "W"),
    "server_w_per_gpu": Display("Server power", "W/GPU"),
    # a serving deployment's named columns (no unit: choices and mapping degrees)
    "precision": Display("Precision", ""),
    "kv_precision": Display("KV precision", ""),
    "engine": Display("Engine", ""),
    "serving": Display("Serving", ""),
    "tp": Display("tp", ""),
    "pp": Display("pp", ""),
    "ep": Display("ep", ""),
    "attn_dp": Display("attention dp", ""),
    # the cost labels of dse.report.data.COSTS (table headers of the best-design tables)
    "capex": Display("Capex", "$"),
    "run cost": Display("Run cost", "$"),
    "lifetime cost": Display("Lifetime cost", "$"),
}

#: names a sentence keeps capitalized (acronyms)
_ACRONYMS = ("TTFT", "TPOT", "MFU", "HBM", "KV", "GPU", "NIC", "BF16", "FP8", "FP4")


def display(metric: str) -> Display:
    """The metric's entry in :data:`DISPLAY`, or one made from its column name (unit from the suffix)."""
    if metric in DISPLAY:
        return DISPLAY[metric]
    unit = unit_of(metric)
    name = metric
    for suffix in ("_usd_per_gpu_hr", "_usd_per_gpu", "_tbyte_s", "_gbyte_s", "_gbit_s", "_tflop_s", "_days", "_usd",
                   "_mwh", "_mw", "_gb", "_tb", "_w", "_h", "_s"):
        if metric.endswith(suffix):
            name = metric[: -len(suffix)]
            break
    name = name.replace("_", " ")
    return Display(name[:1].upper() + name[1:], unit)


def _finite(values: Iterable[float] | None) -> np.ndarray:
    if values is None:
        return np.zeros(0)
    v = pd.to_numeric(pd.Series(list(values) if not isinstance(values, np.ndarray) else values.ravel(), dtype=object),
                      errors="coerce").to_numpy(dtype=np.float64)
    return v[np.isfinite(v)]


def unit_for(metric: str, values: Iterable[float] | None = None) -> tuple[str, float]:
    """(unit, factor) the metric reads in for these values: the smaller unit where every value is below
    :data:`SMALL_BELOW` in the metric's own."""
    d = display(metric)
    v = _finite(values)
    if d.small is not None and len(v) and float(np.max(np.abs(v * d.scale))) < SMALL_BELOW:
        return d.small[0], d.small[1]
    return d.unit, d.scale


def label(metric: str, values: Iterable[float] | None = None) -> str:
    """'Time to train (days)', 'TTFT (ms)', 'Run cost ($)', 'GPUs (count)'."""
    unit, _ = unit_for(metric, values)
    name = display(metric).name
    return f"{name} ({unit})" if unit else name


def better(direction: str) -> str:
    return "↓ better" if direction == "min" else "↑ better"


def axis_title(metric: str, direction: str, values: Iterable[float] | None = None) -> str:
    """A chart axis' title: 'Time to train (days), ↓ better'."""
    return f"{label(metric, values)}, {better(direction)}"


def _short(v: float) -> str:
    a = abs(v)
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def tick_text(metric: str, v: float, unit: tuple[str, float] | None = None) -> str:
    """A tick's text for the column value ``v``, in the axis' unit (``unit``: from :func:`unit_for`): '$2M',
    '40%', '120' (ms: the title says it)."""
    name, scale = unit or unit_for(metric)
    x = float(v) * scale
    if name == "$":
        return ("-" if x < 0 else "") + "$" + _short(abs(x))
    if name == "%":
        return f"{x:.3g}%"
    return _short(x)


def value_text(metric: str, v: float, unit: tuple[str, float] | None = None) -> str:
    """A value with its unit, three significant digits: '$3.7M', '12.8 days', '95.8 ms', '31%', '4,096'."""
    name, scale = unit or unit_for(metric, [v])
    x = float(v) * scale
    if not np.isfinite(x):
        return "–"
    if name == "$":
        return money(x)
    if name == "%":
        return f"{number(x, 3)}%"
    if name == "count":
        return number(x, 3)
    return f"{number(x, 3)} {name}".rstrip()


def phrase(metric: str) -> str:
    """The metric's name inside a sentence: 'time to train', 'run cost', 'TTFT'."""
    name = display(metric).name
    return name if name.startswith(_ACRONYMS) or name[:2].islower() else name[:1].lower() + name[1:]


def is_metric_header(header: str) -> bool:
    """A table header that is a metric's column name (or a cost's label): shown by its display name."""
    return header in DISPLAY or ("_" in header and header.isidentifier())


def human_table(header: list[str], rows: list[list]) -> tuple[list[str], list[list]]:
    """A table with its metric columns as a reader reads them: each header its display name with the unit
    the column's values read in, each number in that unit, dollars as Money ('$3.7M')."""
    from dse.report.html import Money

    header, rows = list(header), [list(r) for r in rows]
    for i, h in enumerate(header):
        if not is_metric_header(h):
            continue
        numbers = [r[i] for r in rows if isinstance(r[i], (int, float, np.number)) and not isinstance(r[i], bool)]
        unit = unit_for(h, numbers)
        header[i] = f"{display(h).name} ({unit[0]})" if unit[0] else display(h).name
        for r in rows:
            v = r[i]
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
                r[i] = Money(float(v) * unit[1]) if unit[0] == "$" else float(v) * unit[1]
    return header, rows
