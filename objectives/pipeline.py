"""Prepare a design table and run the model modules over it in order.

``prepare`` is the boundary: it broadcasts columns, encodes categoricals, expands catalog ids, fills
defaults and checks user input once (raising :class:`InputError` naming the row and column). The modules
then only see float arrays. ``evaluate`` runs them in chunks that stay in cache.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives import catalog
from objectives.base import Model
from objectives.calibration import Calibration
from objectives.checkpoint import Checkpoint
from objectives.communication import Communication
from objectives.compute import ComputeTime
from objectives.cost import Cost
from objectives.layout import Layout
from objectives.memory import Memory
from objectives.power import Power
from objectives.reliability import Reliability
from objectives.steptime import StepTime
from objectives.topology import Topology
from objectives.table import CATEGORIES, Columns, InputError, as_columns, encode, is_constant
from objectives.transformer import TransformerMath

__all__ = ["MODELS", "DESIGN_MODELS", "MAPPING_MODELS", "ECONOMICS_MODELS", "MAPPING_COLUMNS", "run_models", "DEFAULTS", "REQUIRED", "prepare", "evaluate", "check_layout", "metrics"]

#: the model modules, in data-flow order: the design-only ones (the fabric's bandwidth and latency feed the
#: collectives), the mapping-dependent ones up to the step time, then the cluster economics.
#: what depends on the design alone (model arithmetic, the fabric for n GPUs): run once per design
DESIGN_MODELS: tuple[Model, ...] = (TransformerMath(), Topology())
#: what depends on the mapping too: run for every candidate mapping
MAPPING_MODELS: tuple[Model, ...] = (Layout(), Memory(), ComputeTime(), Communication(), StepTime())
#: the economics of a design run on its chosen mapping (the mapping search ranks on step time and runs
#: these only on each design's winner)
ECONOMICS_MODELS: tuple[Model, ...] = (Checkpoint(), Reliability(), Power(), Cost())
MODELS: tuple[Model, ...] = DESIGN_MODELS + MAPPING_MODELS + ECONOMICS_MODELS

MAPPING_COLUMNS = ("tp", "pp", "cp", "ep", "vp", "micro_batch", "recompute", "sequence_parallel", "zero_stage")

#: what an absent or blank optional column means
DEFAULTS: dict[str, float] = {
    "cp": 1.0, "ep": 1.0, "vp": 1.0, "zero_stage": 1.0, "recompute": 0.0, "precision": 0.0,
    "moe_experts": 0.0, "moe_topk": 0.0, "tied_embeddings": 0.0, "ffn_kind": 1.0, "oversubscription": 1.0,
    "train_tokens": np.nan, "stack": 0.0, "dropout": 0.0,
    # cluster economics (issue 4): checkpoints synchronous, the cluster owned; NaN = derived by the model
    "ckpt_mode": 0.0, "cost_mode": 0.0, "ckpt_every_s": np.nan, "storage_units_min": np.nan, "dataset_tb": np.nan,
    # GPU columns a table without a `gpu` id may lack (costs and power come out NaN, or from gpu_tdp_w)
    "gpu_tdp_w": np.nan, "server_usd_per_gpu": np.nan, "server_w_per_gpu": np.nan, "server_gpus": np.nan,
    "cloud_usd_per_gpu_hr": np.nan,
    # prices and operating assumptions, each with its source in catalog/prices.yaml
    **catalog.operating_defaults(),
}
#: columns every row needs, after catalog expansion, with the smallest valid value
REQUIRED: dict[str, float] = {
    "n_gpus": 1, "global_batch": 1, "tp": 1, "pp": 1, "micro_batch": 1,
    "n_layers": 1, "d_model": 1, "n_heads": 1, "d_ff": 1, "vocab_size": 1, "seq_len": 1,
    "gpu_bf16_tflops": 0, "gpu_gemm_eff_bf16": 0, "gpu_hbm_gb": 0, "gpu_hbm_tbps": 0,
    "scaleup_size": 1, "scaleup_gbps": 0, "nic_gbps": 0,
}
INTEGER_COLUMNS = ("n_gpus", "global_batch", "tp", "pp", "cp", "ep", "vp", "micro_batch", "zero_stage",
                   "n_layers", "n_heads", "n_kv_heads", "moe_experts", "moe_topk", "seq_len", "scaleup_size")
CHUNK_ROWS = 1 << 15


def metrics() -> dict[str, str]:
    """Every output column of every module -> 'unit; meaning'."""
    out: dict[str, str] = {}
    for model in MODELS:
        out.update(model.provides)
    return out


def _bad_row(mask: np.ndarray) -> int | None:
    return int(np.argmax(mask)) if mask.any() else None


def _as_float(value: np.ndarray) -> np.ndarray | None:
    """A column as float64, or None for a label column carried through (gpu, model, notes)."""
    if value.dtype.kind in "iufb":
        return value.astype(np.float64, copy=False)
    if value.dtype.kind in "US":
        return None
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _numeric_columns() -> frozenset[str]:
    """Columns whose cells must be numbers (blank allowed): model, GPU and operating fields, the mapping."""
    names = set(REQUIRED) | set(DEFAULTS) | set(INTEGER_COLUMNS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS)
    return frozenset(names - set(CATEGORIES))


def _check_numbers(user: Columns) -> None:
    """Raise InputError for a numeric column holding text that is not a number ('abc' where n_gpus goes)."""
    import pandas as pd

    for name in _numeric_columns() & set(user):
        value = user[name]
        if value.dtype.kind in "iufb":
            continue
        raw = pd.Series(value[:1] if is_constant(value) else value, dtype=object)
        blank = raw.isna() | raw.astype(str).str.strip().isin(("", "nan", "NaN", "None"))
        as_num = pd.to_numeric(raw.where(~blank, np.nan), errors="coerce")
        bad = (as_num.isna() & ~blank).to_numpy()
        row = _bad_row(bad)
        if row is not None:
            raise InputError(f"'{raw.iloc[row]}' is not a number", column=name, row=row)


def _fill(values: np.ndarray, default: float) -> np.ndarray:
    """Blank (NaN) cells of a float column set to ``default``; a constant column stays a constant view."""
    if is_constant(values):
        return np.broadcast_to(np.where(np.isnan(values[:1]), default, values[:1]), values.shape)
    return np.where(np.isnan(values), default, values)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The cells worth checking: one for a constant column (its row 0 stands for all), else all."""
    return values[:1] if is_constant(values) else values


def prepare(table: Mapping[str, object]) -> tuple[Columns, Columns]:
    """(user columns broadcast, model inputs as float arrays). Raises InputError on bad user input."""
    user = as_columns(table)
    _check_numbers(user)
    cols: Columns = dict(user)
    for name in CATEGORIES:
        if name in cols:
            cols[name] = encode(name, cols[name])
    cols = catalog.expand(cols)
    n = len(next(iter(cols.values()))) if cols else 0
    for name in REQUIRED:
        if name not in cols:
            raise InputError(f"is required (missing from the table{' and the catalog' if name.startswith(('gpu_', 'scale', 'nic')) else ''})", column=name)
    floats: Columns = {}
    for name, value in cols.items():
        if is_constant(value):
            one = _as_float(value[:1])
            if one is not None:
                floats[name] = np.broadcast_to(one, (n,))
        else:
            one = _as_float(value)
            if one is not None:
                floats[name] = one
    for name, default in DEFAULTS.items():  # absent: a zero-copy constant column
        floats[name] = _fill(floats[name], default) if name in floats else np.broadcast_to(np.float64(default), (n,))
    if "n_kv_heads" not in floats:
        floats["n_kv_heads"] = floats["n_heads"]
    floats["n_kv_heads"] = np.where(np.isnan(floats["n_kv_heads"]), floats["n_heads"], floats["n_kv_heads"])
    d_head = floats.get("d_head", np.full(n, np.nan))
    with np.errstate(divide="ignore", invalid="ignore"):  # n_heads 0 is reported below, as an InputError
        floats["d_head"] = np.where(np.isnan(d_head), floats["d_model"] / floats["n_heads"], d_head)
    sp = floats.get("sequence_parallel", np.full(n, np.nan))
    floats["sequence_parallel"] = np.where(np.isnan(sp), (floats["tp"] > 1).astype(np.float64), sp)
    for name, low in REQUIRED.items():
        v = _distinct(floats[name])
        bad = ~((v > 0) if low == 0 else (v >= low)) | (v == np.inf)  # NaN compares False: caught too
        row = _bad_row(bad)
        if row is not None:
            what = "missing" if np.isnan(v[row]) else f"{v[row]:g}"
            raise InputError(f"{what} is not valid; needs a finite number >= {low}" + (" (> 0)" if low == 0 else ""), column=name, row=row)
    for name in INTEGER_COLUMNS:
        if name in floats:
            v = _distinct(floats[name])
            row = _bad_row((v != np.floor(v)) & np.isfinite(v) | (v < 0))
            if row is not None:
                raise InputError(f"{v[row]:g} is not a non-negative whole number", column=name, row=row)
    row = _bad_row(~np.isin(floats["zero_stage"], (0, 1, 2, 3)))
    if row is not None:
        raise InputError(f"{floats['zero_stage'][row]:g} is not a ZeRO stage (0, 1, 2 or 3)", column="zero_stage", row=row)
    return user, floats


def check_layout(floats: Columns) -> None:
    """Raise InputError for a fixed mapping that cannot divide (used where a user fixed the mapping)."""
    t, p, c, n = floats["tp"], floats["pp"], floats["cp"], floats["n_gpus"]
    row = _bad_row(np.mod(n, t * p * c) != 0)
    if row is not None:
        raise InputError(
            f"tp*pp*cp = {t[row]:g}*{p[row]:g}*{c[row]:g} = {t[row] * p[row] * c[row]:g} does not divide n_gpus = {n[row]:g}",
            column="n_gpus", row=row)
    dp = n / (t * p * c)
    row = _bad_row(np.mod(floats["global_batch"], dp * floats["micro_batch"]) != 0)
    if row is not None:
        raise InputError(
            f"global_batch {floats['global_batch'][row]:g} is not a multiple of dp*micro_batch = {dp[row]:g}*{floats['micro_batch'][row]:g}",
            column="global_batch", row=row)
    for name, num in (("tp", "n_heads"), ("pp", "n_layers")):
        row = _bad_row(np.mod(floats[num], floats[name]) != 0)
        if row is not None:
            raise InputError(f"{name} = {floats[name][row]:g} does not divide {num} = {floats[num][row]:g}", column=name, row=row)


def run_models(floats: Columns, cal: Calibration | None = None, models: tuple[Model, ...] = MODELS) -> Columns:
    """Run ``models`` (default: all, in order) over prepared float columns; inputs plus outputs (new dict).

    Large tables run in chunks of CHUNK_ROWS rows, which keep every temporary in cache."""
    cal = cal or Calibration.load()
    n = len(floats["n_gpus"])
    if n <= CHUNK_ROWS:
        work = dict(floats)
        for model in models:
            work.update(model.compute(work, cal))
        return work
    out: Columns = {}
    for i in range(0, n, CHUNK_ROWS):
        part = run_models({k: v[i:i + CHUNK_ROWS] for k, v in floats.items()}, cal, models)
        for k, v in part.items():
            if k not in out:
                out[k] = floats[k] if k in floats else np.empty(n, dtype=v.dtype)
            if k not in floats:
                out[k][i:i + CHUNK_ROWS] = v
    return out


def evaluate(table: Mapping[str, object], cal: Calibration | None = None) -> Columns:
    """Evaluate a design table with a fixed mapping: input columns plus every metric (see module doc)."""
    user, floats = prepare(table)
    work = run_models(floats, cal)
    out = dict(user)
    outputs = set(metrics())
    for name, value in work.items():
        if name not in user or name in outputs:
            out[name] = value
    for name in CATEGORIES:
        if name in user:
            out[name] = user[name]
    return out
