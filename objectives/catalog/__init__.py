"""Sourced catalogs (GPUs, models) and their expansion into design-table columns.

Each number in ``gpus.yaml`` and ``models.yaml`` carries its source; ``SOURCES.md`` lists them. A table
row names a catalog id (``gpu: h100-sxm``, ``model: llama3-70b``) and gets that entry's numeric columns,
except where the table already has the column: that is a what-if override (``gpu_hbm_tbps: 8``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from objectives.table import CATEGORIES, InputError, is_constant

__all__ = ["GPU_FIELDS", "MODEL_FIELDS", "gpus", "models", "gpu_ids", "model_ids", "expand"]

HERE = Path(__file__).parent

GPU_FIELDS = (
    "gpu_bf16_tflops", "gpu_fp8_tflops", "gpu_fp4_tflops",
    "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa2", "gpu_attn_eff_fa3",
    "gpu_hbm_gb", "gpu_hbm_tbps", "scaleup_size", "scaleup_gbps", "nic_gbps", "gpu_tdp_w",
)
MODEL_FIELDS = (
    "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind", "vocab_size",
    "seq_len", "moe_experts", "moe_topk", "tied_embeddings",
)


def _value(entry):
    """A catalog field is {value, source, confidence} or a bare value; None means 'not supported'."""
    v = entry.get("value") if isinstance(entry, dict) else entry
    if v is None:
        return np.nan
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        return v
    return float(v)


@functools.cache
def gpus() -> dict[str, dict[str, float]]:
    """GPU id -> {field: value} (NaN where the GPU lacks a precision)."""
    raw = yaml.safe_load((HERE / "gpus.yaml").read_text())["gpus"]
    out = {gid: {f: _value(spec.get(f)) for f in GPU_FIELDS} for gid, spec in raw.items()}
    for row in out.values():  # no architecture-tuned attention measured: the portable kernel's figure holds
        if np.isnan(row["gpu_attn_eff_fa3"]):
            row["gpu_attn_eff_fa3"] = row["gpu_attn_eff_fa2"]
    return out


@functools.cache
def models() -> dict[str, dict[str, float]]:
    """Model id -> {field: value}; ffn_kind encoded, d_head defaulting to d_model / n_heads."""
    raw = yaml.safe_load((HERE / "models.yaml").read_text())["models"]
    out = {}
    for mid, spec in raw.items():
        row = {f: _value(spec.get(f)) for f in MODEL_FIELDS}
        row["ffn_kind"] = float(CATEGORIES["ffn_kind"].index(str(row["ffn_kind"]).lower()))
        for key, default in (("moe_experts", 0.0), ("moe_topk", 0.0), ("tied_embeddings", 0.0)):
            if np.isnan(row[key]):
                row[key] = default
        if np.isnan(row["n_kv_heads"]):
            row["n_kv_heads"] = row["n_heads"]
        if np.isnan(row["d_head"]):
            row["d_head"] = row["d_model"] / row["n_heads"]
        out[mid] = row
    return out


def gpu_ids() -> list[str]:
    return sorted(gpus())


def model_ids() -> list[str]:
    return sorted(models())


def _expand_one(cols: dict, key: str, catalog: dict, fields: tuple[str, ...], strict: bool) -> dict:
    if is_constant(cols[key]):  # one id for every row: expand once, broadcast
        n = len(cols[key])
        one = _expand_one({k: np.asarray(v[:1]) for k, v in cols.items() if k == key or (k in fields and is_constant(v))},
                          key, catalog, fields, strict)
        return {f: (np.broadcast_to(v, (n,)) if f not in cols or is_constant(cols[f]) else
                    np.where(np.isnan(np.asarray(cols[f], dtype=np.float64)), v[0], cols[f]))
                for f, v in one.items()}
    codes, uniq = pd.factorize(cols[key])  # hashing: fast on 1M repeated labels; a blank cell gets -1
    uniq = [str(u) for u in uniq] + ["(blank)"]  # code -1 indexes the last entry
    inverse = codes
    present = uniq if (codes < 0).any() else uniq[:-1]
    unknown = [u for u in present if u not in catalog]
    nan_row = dict.fromkeys(fields, np.nan)
    if unknown and strict:
        row = int(np.argmax(codes == (uniq.index(unknown[0]) if unknown[0] != "(blank)" else -1)))
        raise InputError(f"unknown {key} '{unknown[0]}'; known: {', '.join(sorted(catalog))}", column=key, row=row)
    new = {}
    for f in fields:
        lut = np.array([catalog.get(u, nan_row)[f] for u in uniq], dtype=np.float64)  # one entry per distinct id
        values = lut[inverse]
        if f in cols:  # an override: keep the table's value where it has one
            given = np.asarray(cols[f], dtype=np.float64)
            values = np.where(np.isnan(given), values, given)
        new[f] = values
    return new


def expand(cols: dict) -> dict:
    """Columns with every catalog id (``gpu``, ``model``) expanded; returns a new dict, input untouched."""
    out = dict(cols)
    if "model" in cols:
        # a model name outside the catalog is fine when the row spells out its architecture
        spelled_out = all(f in cols for f in ("n_layers", "d_model", "n_heads", "d_ff", "vocab_size"))
        out.update(_expand_one(cols, "model", models(), MODEL_FIELDS, strict=not spelled_out))
    if "gpu" in cols:
        out.update(_expand_one(cols, "gpu", gpus(), GPU_FIELDS, strict=True))
    return out
