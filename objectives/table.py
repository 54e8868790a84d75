"""The design table: a mapping of column name -> 1-D numpy array, one row per design.

Helpers here turn what a user or the engine hands in (scalars, lists, pandas columns) into equal-length
arrays, and encode the few categorical columns as small integer codes once, at the boundary, so the models
only ever see numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

from objectives.calibration import STACKS

__all__ = [
    "Columns",
    "InputError",
    "CATEGORIES",
    "n_rows",
    "is_constant",
    "as_columns",
    "factorize",
    "encode",
    "decode",
]

Columns = dict[str, np.ndarray]


def _instance_ids() -> tuple[str, ...]:
    """The ids of objectives/catalog/instances.yaml in file order (read here: objectives.catalog, which loads
    the entries, imports this module)."""
    text = (Path(__file__).parent / "catalog" / "instances.yaml").read_text()
    return tuple(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["instances"])


# Categorical columns and their codes (index in the tuple). Models read the codes.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "precision": ("bf16", "fp8", "fp4"),
    # how an fp8 run scales its tensors (objectives/training/quantization.py); blank: MXFP8 on GPUs with block-scaled
    # tensor cores, per-tensor current scaling elsewhere
    "fp8_recipe": ("tensor_delayed", "tensor_current", "blockwise", "mxfp8"),
    "recompute": ("none", "selective", "full"),
    "ffn_kind": ("gelu", "swiglu"),
    # windowed layers attend within a sliding window (gpt-oss, Gemma 3) or aligned chunks (Llama 4)
    "attn_window_kind": ("sliding", "chunked"),
    "stack": STACKS,
    "ckpt_mode": ("sync", "async"),  # checkpoint writes stall training, or only the GPU->host copy does
    "cost_mode": ("owned", "cloud"),  # buy the cluster (capex amortized, power, upkeep) or rent it per GPU-hour
    # rent an instance of a cloud (objectives/catalog/instances.yaml; code 0: none, the cluster is owned), at a price
    "instance": ("owned", *_instance_ids()),
    "pricing": ("on_demand", "reserved_1y", "reserved_3y", "spot"),
    # the rental an owned design is weighed against (objectives/catalog/offers.py; code 0: the GPU's market figure)
    "rental_instance": ("market", *_instance_ids()),
    # serving (objectives/serving): the KV cache's precision, the inference engine, aggregated or disaggregated
    "kv_precision": ("bf16", "fp8", "fp4"),
    "engine": ("trtllm", "vllm", "sglang", "trtllm-2024"),
    "serving": ("aggregated", "disaggregated"),
    # speculative decoding: none, the model's multi-token-prediction module, an EAGLE-3 head, a draft model
    # (objectives/serving/speculative.py)
    "spec_decode": ("none", "mtp", "eagle3", "draft"),
}
_ALIASES = {
    "precision": {"fp16": "bf16", "bfloat16": "bf16", "float8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"},
    "fp8_recipe": {"delayed": "tensor_delayed", "current": "tensor_current", "fp8_cs": "tensor_current",
                   "cs": "tensor_current", "tensorwise": "tensor_current", "block": "blockwise", "fp8_sc": "blockwise",
                   "subchannel": "blockwise", "mx": "mxfp8", "fp8_mx": "mxfp8"},
    "recompute": {"no": "none", "false": "none", "true": "full"},
    "stack": {"megatron": "megatron-core", "nemo": "megatron-core", "megatron-bridge": "megatron-core", "fsdp": "pytorch-fsdp"},
    "attn_window_kind": {"swa": "sliding", "sliding_window": "sliding", "chunk": "chunked", "local": "sliding"},
    "ffn_kind": {"swiglu": "swiglu", "silu": "swiglu", "geglu": "swiglu", "gelu": "gelu", "relu": "gelu"},
    "ckpt_mode": {"synchronous": "sync", "asynchronous": "async"},
    "cost_mode": {"own": "owned", "buy": "owned", "on-prem": "owned", "onprem": "owned", "rent": "cloud", "rented": "cloud"},
    "instance": {"none": "owned", "own": "owned", "on-prem": "owned"},
    "pricing": {"on-demand": "on_demand", "ondemand": "on_demand", "reserved-1y": "reserved_1y", "1y": "reserved_1y",
                "reserved-3y": "reserved_3y", "3y": "reserved_3y", "capacity_block": "spot", "capacity-block": "spot",
                "preemptible": "spot"},
    "kv_precision": {"fp16": "bf16", "bfloat16": "bf16", "auto": "bf16", "float8": "fp8", "fp8_e4m3": "fp8", "nvfp4": "fp4"},
    "engine": {"tensorrt-llm": "trtllm", "trt-llm": "trtllm", "trtllm-pytorch": "trtllm", "tensorrt-llm-2024": "trtllm-2024",
               "trtllm-engine": "trtllm-2024"},
    "serving": {"agg": "aggregated", "colocated": "aggregated", "disagg": "disaggregated", "pd": "disaggregated"},
    "spec_decode": {"off": "none", "no": "none", "false": "none", "eagle": "eagle3", "eagle-3": "eagle3",
                    "draft_model": "draft", "nextn": "mtp"},
}


class InputError(ValueError):
    """Bad user input in a design table; ``row`` and ``column`` name the offending cell (row may be None)."""

    def __init__(self, message: str, column: str | None = None, row: int | None = None):
        self.column = column
        self.row = row
        self.detail = message
        where = []
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column '{column}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


def n_rows(table: Mapping[str, object]) -> int:
    """Length of the longest array-like column (scalars broadcast); 1 if every column is a scalar."""
    n = 1
    for value in table.values():
        if np.ndim(value) > 0:
            n = max(n, len(value))
    return n


def is_constant(arr: np.ndarray) -> bool:
    """True for a broadcast scalar (a zero-stride view): work on its one value, then broadcast."""
    return arr.ndim == 1 and len(arr) > 1 and arr.strides[0] == 0


def as_columns(table: Mapping[str, object]) -> Columns:
    """Every column as a 1-D numpy array of the table's length.

    Scalars become read-only zero-stride views (no copies); arrays are used as they are.
    """
    n = n_rows(table)
    out: Columns = {}
    for name, value in table.items():
        arr = np.asarray(value)
        if arr.ndim == 0:
            arr = np.broadcast_to(arr.reshape(1), (n,))
        elif arr.ndim != 1 or len(arr) != n:
            raise InputError(f"has length {len(arr)} but the table has {n} rows", column=name)
        out[name] = arr
    return out


class _Addresses:
    """The object pointers an object array holds, seen as a read-only integer array (kept alive by it)."""

    def __init__(self, values: np.ndarray):
        self._values = values
        self.__array_interface__ = {"shape": values.shape, "strides": values.strides, "version": 3,
                                    "typestr": np.dtype(np.uintp).str, "data": (values.ctypes.data, True)}


#: an object column with at most this many distinct objects is factorized without pandas
_FEW_OBJECTS = 64


def _in_first_order(codes: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes renumbered in order of first appearance (``first``: each code's first cell), and those cells."""
    order = np.argsort(first)
    rank = np.empty(len(first), dtype=np.intp)
    rank[order] = np.arange(len(first))
    return rank[codes], first[order]


def _by_object(addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each cell, first cell of each code), codes in order of first appearance, by object address.

    At most _FEW_OBJECTS distinct objects (labels): the objects of a sample of cells, every cell looked up
    among them; else (a cell outside the sample's objects, text built per row) sorted by address."""
    n = len(addresses)
    seen = np.unique(addresses[::max(1, n // 4096)])
    if len(seen) <= _FEW_OBJECTS:
        where = np.minimum(np.searchsorted(seen, addresses), len(seen) - 1)
        if np.array_equal(seen[where], addresses):
            first = np.array([np.argmax(where == k) for k in range(len(seen))])  # few codes, one pass each
            return _in_first_order(where, first)
    _, first, inverse = np.unique(addresses, return_index=True, return_inverse=True)
    return _in_first_order(inverse.reshape(-1), first)


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values)``: (codes, distinct values in order of first appearance), code -1 for a
    blank cell (None, NaN).

    A column of repeated labels (``gpu``, ``recompute``) holds few distinct Python objects, so an object
    column is factorized by object identity first (8-byte pointers instead of strings, in numpy), then only
    its distinct objects by value (a dict where they are all text, else pandas); the result is the same."""
    if values.dtype == object and len(values):
        by_object, first = _by_object(np.asarray(_Addresses(values)))
        objects = values[first]
        if all(type(v) is str for v in objects):  # by value: equal strings share the first one's code
            index: dict[str, int] = {}
            lut = np.array([index.setdefault(v, len(index)) for v in objects], dtype=np.intp)
            distinct = np.array(list(index), dtype=object)
            return (by_object if len(distinct) == len(objects) else lut[by_object]), distinct
        import pandas as pd

        codes, distinct = pd.factorize(objects)
        return codes[by_object], distinct
    import pandas as pd

    return pd.factorize(values)


def encode(name: str, values: np.ndarray) -> np.ndarray:
    """Map a categorical column (strings or codes) to float codes; raises InputError naming the bad value."""
    labels = CATEGORIES[name]
    if is_constant(values):
        return np.broadcast_to(encode(name, values[:1]), values.shape)
    if values.dtype.kind in "iuf":
        codes = values.astype(np.float64)
        bad = ~np.isin(codes, np.arange(len(labels))) & ~np.isnan(codes)
    else:
        inverse, uniq = factorize(values)  # missing cells get code -1, mapped to the last lut entry
        uniq = np.asarray([str(u) for u in uniq] + ["nan"])
        lut = np.empty(len(uniq))
        for i, u in enumerate(uniq):  # loop over distinct labels, not rows
            key = u.strip().lower()
            key = _ALIASES[name].get(key, key)
            lut[i] = labels.index(key) if key in labels else (np.nan if key in ("", "nan") else -1)
        codes = lut.take(inverse)
        bad = (codes < 0) if (lut < 0).any() else None  # every distinct label occurs in some row
    if bad is not None and bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"'{values[row]}' is not one of {', '.join(labels)}", column=name, row=row)
    return codes


def decode(name: str, codes: np.ndarray) -> np.ndarray:
    """Inverse of :func:`encode` for output (codes -> labels)."""
    labels = np.asarray(CATEGORIES[name], dtype=object)
    return labels[np.asarray(codes, dtype=np.int64)]
