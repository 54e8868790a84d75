"""Design and result tables as they travel to the scoring workers: chunks, and a few buffers per table.

A table is a mapping of column name -> 1-D numpy array (a scalar for a column that is the same in every
row). :func:`split` cuts a batch's design table into one chunk per worker and :func:`concat` joins their
result tables back in order; :func:`pack` makes a result table a few buffers for Ray's serializer (and
for the sweep's writer process), :func:`unpack` restores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["n_rows", "split", "concat", "pack", "unpack"]


def n_rows(table: Mapping[str, Any]) -> int:
    """Rows of a table (1 when every column is a scalar)."""
    return max((len(v) for v in table.values() if np.ndim(v) > 0), default=1)


def split(table: Mapping[str, Any], n_chunks: int) -> list[dict[str, Any]]:
    """Cut a design table into ``n_chunks`` contiguous chunks of nearly equal size (scalars are shared)."""
    n = n_rows(table)
    n_chunks = max(1, min(n_chunks, n))
    bounds = np.linspace(0, n, n_chunks + 1).round().astype(int)
    return [
        {k: (v[a:b] if np.ndim(v) > 0 else v) for k, v in table.items()}
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def concat(parts: list[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Join result chunks in order (every chunk has the same columns)."""
    if len(parts) == 1:
        return {k: np.asarray(v) for k, v in parts[0].items()}
    out = {}
    for k in parts[0]:
        out[k] = np.concatenate([np.broadcast_to(np.asarray(p[k]), (n_rows(p),)) if np.ndim(p[k]) == 0 else np.asarray(p[k])
                                 for p in parts])
    return out



def pack(table: Mapping[str, np.ndarray]) -> tuple:
    """A result table as few buffers: the float64 columns stacked into one 2-D block, the rest as they are.

    Ray (and the pipe to the writer process) serializes each array separately, with a fixed cost per
    array; a model's hundred-odd float columns travel as one block instead. :func:`unpack` restores the
    table (columns are rows of the block: views).
    """
    floats = [k for k, v in table.items() if v.dtype == np.float64 and v.ndim == 1]
    block = np.stack([table[k] for k in floats]) if floats else np.zeros((0, 0))
    stacked = set(floats)
    rest = {k: v for k, v in table.items() if k not in stacked}
    return list(table), floats, block, rest


def unpack(packed: tuple) -> dict[str, np.ndarray]:
    """The table :func:`pack` packed, columns in their original order."""
    order, floats, block, rest = packed
    cols = dict(zip(floats, block))
    cols.update(rest)
    return {k: cols[k] for k in order}
