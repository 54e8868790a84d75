"""Design names a reviewer reads: only the axes that vary across the designs shown, each with its unit.

``2,048×b200 fp8 · tp4 pp4 vp4 · HBM 6.5 TB/s`` names a design among others that differ in GPU count,
GPU, precision, mapping and HBM bandwidth; an axis every shown design shares is left out (the page says
it once). Hardware first (GPU count × GPU or cloud instance, then the named choices: precision, network,
storage, pricing), then the mapping, then the numeric what-ifs with their units (from the column's name,
docs/model-contract.md: ``_tbyte_s`` is TB/s, ``_gbyte_s`` GB/s, ``_usd`` dollars, ...). A number gets the
fewest significant digits, 2 to 4, that keep the shown values apart (``7.999`` and ``8.0`` are both
``8`` unless another shown design has ``7.95``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["design_names", "shared_axes", "unit_of", "number", "money", "MAPPING_AXES", "mapping_words", "choice_text"]

#: column-name suffix -> unit, longest first (docs/model-contract.md: units in names)
UNITS = (
    ("_usd_per_gpu_hr", "$/GPU-h"), ("_usd_per_tb_month", "$/TB-month"), ("_usd_per_kwh", "$/kWh"),
    ("_usd_per_mw", "$/MW"), ("_usd_per_gpu", "$/GPU"), ("_w_per_gpu", "W/GPU"), ("_tbyte_s", "TB/s"),
    ("_gbyte_s", "GB/s"), ("_gbit_s", "Gb/s"), ("_tflop_s", "TFLOP/s"), ("_days", "days"), ("_mwh", "MWh"),
    ("_usd", "$"), ("_mw", "MW"), ("_gb", "GB"), ("_tb", "TB"), ("_w", "W"), ("_h", "h"), ("_s", "s"),
)
#: short labels of the columns a space commonly sweeps (others: the name without its unit, spaced)
LABELS = {
    "gpu_hbm_tbyte_s": "HBM", "gpu_hbm_gb": "HBM", "nic_gbyte_s": "NIC", "scaleup_gbyte_s": "NVLink",
    "net_port_gbyte_s": "port", "storage_units_min": "storage units",
    "gpu_bf16_tflop_s": "bf16", "gpu_fp8_tflop_s": "fp8", "gpu_fp4_tflop_s": "fp4", "seq_len": "seq",
    "global_batch": "batch", "train_tokens": "tokens", "ckpt_every_s": "ckpt every", "pue": "PUE",
}
#: mapping columns in the order a name gives them, with their prefix; dp is left out (n_gpus / (tp pp cp))
MAPPING_AXES = (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep"), ("vp", "vp"), ("attn_dp", "adp"), ("micro_batch", "mb"),
                ("zero_stage", "zero"), ("recompute", "rc "), ("sequence_parallel", "sp"))
#: named (text) choices and how a value reads in a name
PRICING = {"on_demand": "on-demand", "reserved_1y": "1y reserved", "reserved_3y": "3y reserved", "spot": "spot"}
_TEXT_SUFFIX = {"ckpt_mode": " ckpt", "stack": "", "cost_mode": ""}
_CODES = {"cost_mode": ("owned", "cloud"), "ckpt_mode": ("sync", "async"), "precision": ("bf16", "fp8", "fp4"),
          "recompute": ("none", "selective", "full")}


def unit_of(column: str) -> str:
    """The unit a column's name carries ('' for a count or a ratio)."""
    for suffix, unit in UNITS:
        if column.endswith(suffix):
            return unit
    return ""


def _label(column: str) -> str:
    if column in LABELS:
        return LABELS[column]
    for suffix, _ in UNITS:
        if column.endswith(suffix):
            column = column[: -len(suffix)]
            break
    return column.replace("_", " ")


def number(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits, thousands grouped, no exponent below 10^15; whole numbers whole."""
    v = float(v)
    if not np.isfinite(v):
        return "–" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    if v == round(v) and abs(v) < 1e15:
        return f"{int(round(v)):,}"
    r = float(f"{v:.{digits}g}")  # rounded to its significant digits
    if 1000 <= abs(r) < 1e15:
        return f"{r:,.0f}"
    return f"{v:.{digits}g}"


def money(v: float) -> str:
    """Dollars as a buyer reads them: $18.6k, $21.7M, $1.47B (three significant digits)."""
    v = float(v)
    if not np.isfinite(v):
        return "–"
    a = abs(v)
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{'-' if v < 0 else ''}${number(a / scale, 3)}{suffix}"
    return f"{'-' if v < 0 else ''}${number(a, 3)}"


def _numbers(values: pd.Series) -> dict:
    """value -> text, with the fewest significant digits (2 to 4) that keep the distinct values apart."""
    distinct = [v for v in pd.unique(values) if isinstance(v, (int, float, np.number)) and not pd.isna(v)]
    for digits in (2, 3, 4):
        text = {v: number(v, digits) for v in distinct}
        if len(set(text.values())) == len(text):
            break
    return text


def _is_blank(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def _text(column: str, v) -> str:
    """A named choice as it reads in a name (a code stored as a number is read back as its name)."""
    if _is_blank(v):
        return "owned" if column == "instance" else ""  # a design that names no instance is bought
    if column in _CODES and isinstance(v, (int, float, np.number)):
        codes = _CODES[column]
        v = codes[int(v)] if 0 <= int(v) < len(codes) else v
    v = str(v)
    if column == "pricing":
        return PRICING.get(v, v)
    if column == "recompute":
        return {"none": "no rc", "selective": "selective rc", "full": "full rc"}.get(v, v)
    if column == "sequence_parallel":
        return "sp" if v in ("1", "1.0", "True", "true") else ""
    return v + _TEXT_SUFFIX.get(column, "")


def _varies(values: pd.Series) -> bool:
    return values.astype(str).nunique(dropna=False) > 1


def _column_text(frame: pd.DataFrame, column: str) -> list[str]:
    """Each shown design's part of its name for ``column``."""
    values = frame[column]
    numeric = pd.api.types.is_numeric_dtype(values) and column not in _CODES and column != "sequence_parallel"
    if column == "n_gpus":
        return [f"{number(v)}×" if not _is_blank(v) else "" for v in values]
    if numeric:
        text = _numbers(values)
        unit = unit_of(column)
        label = _label(column)
        if column == "scaleup_size":
            return [f"{text[v]}-GPU NVLink" if v in text else "" for v in values]
        if column == "oversubscription":
            return [f"{text[v]}:1 oversub" if v in text else "" for v in values]
        if unit.startswith("$"):  # $62,375/GPU
            return [f"{label} ${text[v]}{unit[1:]}" if v in text else "" for v in values]
        return [" ".join(p for p in (label, text[v], unit) if p) if v in text else "" for v in values]
    text = [_text(column, v) for v in values]
    if column == "gpu" and "catalog_estimated" in frame.columns:  # an announced system's figures are estimates
        text = [f"{t} (estimated)" if t and est == 1 else t
                for t, est in zip(text, frame["catalog_estimated"].tolist())]
    return text


def _compose(frame: pd.DataFrame, show: set[str], design: list[str]) -> list[str]:
    """Each row's name from the columns in ``show``: hardware, then mapping, then numeric what-ifs."""
    n = len(frame)
    head = [c for c in ("n_gpus", "gpu", "instance") if c in show]
    axes = {m for m, _ in MAPPING_AXES}
    named = [c for c in design if c in show and c not in head and c not in axes
             and (c in _CODES or not pd.api.types.is_numeric_dtype(frame[c]))]
    named.sort(key=lambda c: c != "pricing")  # the price kind right after the instance it prices
    numeric = [c for c in design if c in show and c not in head and c not in named and c not in axes]
    maps = [c for c, _ in MAPPING_AXES if c in show]
    cols = {c: _column_text(frame, c) for c in head + named + numeric}
    prefix = dict(MAPPING_AXES)
    for c in maps:
        values = frame[c]
        if c == "recompute" or c == "sequence_parallel":
            cols[c] = [_text(c, v) for v in values]
        else:
            text = _numbers(values)  # an absent cp, ep or vp is 1, as the mapping label leaves it out
            cols[c] = [f"{prefix[c]}{text[v]}" if v in text and not (c in ("cp", "ep", "vp", "attn_dp") and v == 1) else ""
                       for v in values]
    out = []
    for i in range(n):
        count, gpu = cols.get("n_gpus", [""] * n)[i], cols.get("gpu", [""] * n)[i]
        if count and not gpu:  # the GPU is not named: say what the count counts
            count = count[:-1] + " GPUs"
        hw = " ".join(p for p in [count + gpu] + [cols[c][i] for c in (["instance"] if "instance" in head else [])
                                                                 + named] if p)
        groups = [hw, " ".join(p for p in (cols[c][i] for c in maps) if p),
                  ", ".join(p for p in (cols[c][i] for c in numeric) if p)]
        out.append(" · ".join(g for g in groups if g))
    return out


def _axes(frame: pd.DataFrame, design: Sequence[str], mapping: bool) -> tuple[list[str], set[str], set[str]]:
    """(design columns in frame, the axes that vary across its rows, those every row shares)."""
    design = [c for c in dict.fromkeys(design) if c in frame.columns]
    candidates = set(design) | {c for c in ("n_gpus", "gpu", "instance") if c in frame.columns}
    if mapping:
        candidates |= {c for c, _ in MAPPING_AXES if c in frame.columns}
    varying = {c for c in candidates if _varies(frame[c])}
    return design, varying, candidates - varying


def design_names(frame: pd.DataFrame, design: Sequence[str], mapping: bool = True) -> list[str]:
    """One name per row of ``frame``: the axes among ``design`` (the space's searched columns), its GPU
    count, GPU and instance, and with ``mapping`` the mapping columns, those that vary across these rows,
    with their units. Rows that share every axis get the same name; rows that share all of them (a single
    design) are named by their GPU count and GPU."""
    if len(frame) == 0:
        return []
    design, varying, _ = _axes(frame, design, mapping)
    if not varying:
        varying = {c for c in ("n_gpus", "gpu") if c in frame.columns}
    return _compose(frame, varying, design)


def shared_axes(frame: pd.DataFrame, design: Sequence[str], mapping: bool = True) -> str:
    """What every row of ``frame`` shares among the axes :func:`design_names` considers, as one name
    ('3,072 GPUs fp8 · pp24'): the caption beside a table whose names leave it out."""
    if len(frame) < 2:
        return ""
    design, _, shared = _axes(frame, design, mapping)
    return _compose(frame.iloc[:1], shared, design)[0] if shared else ""


def mapping_words(row: pd.Series) -> str:
    """The mapping in words: 'dp 64 x tp 4 x pp 4 (vp 2), 1-sequence micro-batches, selective recompute, ZeRO-1'."""
    def whole(c):
        v = row.get(c)
        return int(v) if isinstance(v, (int, float, np.number)) and np.isfinite(float(v)) else None

    degrees = [f"{c} {whole(c)}" for c in ("dp", "tp", "pp", "cp", "ep") if whole(c) is not None
               and (whole(c) > 1 or c in ("dp", "tp", "pp"))]
    words = [" x ".join(degrees) + (f" (vp {whole('vp')})" if (whole("vp") or 1) > 1 else "")]
    if whole("micro_batch") is not None:
        words.append(f"{whole('micro_batch')}-sequence micro-batches")
    rc = row.get("recompute")
    if isinstance(rc, str) and rc:
        words.append("no recompute" if rc == "none" else f"{rc} recompute")
    if whole("sequence_parallel"):
        words.append("sequence parallel")
    if whole("zero_stage") is not None:
        words.append(f"ZeRO-{whole('zero_stage')}")
    return ", ".join(w for w in words if w)


def choice_text(column: str, v) -> str:
    """A named choice as a sentence reads it ('fp8', 'on-demand'; a code stored as a number read back as its name)."""
    return _text(column, v)
