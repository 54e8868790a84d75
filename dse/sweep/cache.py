"""The results of every design a run has scored, so that a design proposed again is looked up, not scored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ScoreCache"]


class ScoreCache:
    """Results of every design scored in this run, keyed by its searched columns.

    The model is deterministic, so a design the sampler proposes again (frequent in discrete spaces once
    NSGA-II converges) is looked up instead of scored again, and a batch scores each distinct new design
    once. Called once per batch by the sweep (:meth:`submit`, one batch at a time: a batch's new designs
    are stored when its results come back); on resume it is refilled from the parts
    (:meth:`add_table`). A design's key is a 64-bit hash of its searched columns (pandas, vectorized),
    found by binary search in a sorted array and checked against the stored columns; results live in
    columns that grow by doubling. So a batch costs O(batch log n), never a pass over the whole run, and
    no Python loop over rows. Memory: the result row of every distinct design (about 8 bytes a column).
    """

    def __init__(self, key_columns: list[str]) -> None:
        self.key_columns = list(key_columns)
        self._hashes = np.zeros(0, dtype=np.uint64)  # sorted
        self._rows = np.zeros(0, dtype=np.int64)  # row of each sorted hash
        self._columns: dict[str, np.ndarray] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _keys(self, table: Mapping[str, Any], n: int) -> pd.DataFrame:
        """Numbers as float64 (1024 and 1024.0 are one design), names as text."""
        cols = {}
        for c in self.key_columns:
            a = np.broadcast_to(np.asarray(table[c]), (n,))
            cols[c] = a.astype(np.float64) if a.dtype.kind in "iufb" else a.astype(str).astype(object)
        return pd.DataFrame(cols)

    def _lookup(self, keys: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(hash of each row, stored row of each row or -1)."""
        h = pd.util.hash_pandas_object(keys, index=False).to_numpy(np.uint64)
        pos = np.full(len(h), -1, dtype=np.int64)
        if self._n:
            i = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
            hit = self._hashes[i] == h
            rows = self._rows[i]
            for c in self.key_columns:  # a hash collision would be a wrong answer: check the key itself
                hit &= self._columns["__key__" + c][np.where(hit, rows, 0)] == keys[c].to_numpy()
            pos[hit] = rows[hit]
        return h, pos

    def _append(self, h: np.ndarray, keys: pd.DataFrame, results: Mapping[str, Any]) -> np.ndarray:
        """Store new distinct designs; returns their rows."""
        m = len(h)
        rows = np.arange(self._n, self._n + m)
        new = {"__key__" + c: keys[c].to_numpy() for c in self.key_columns}
        new.update((k, np.broadcast_to(np.asarray(v), (m,))) for k, v in results.items())
        need = self._n + m
        for k, v in new.items():
            col = self._columns.get(k)
            if col is None:
                col = self._columns[k] = np.empty(max(need, 1024), dtype=v.dtype)
            elif len(col) < need:  # grow by doubling: appends cost O(1) per design on average
                grown = np.empty(max(need, 2 * len(col)), dtype=np.result_type(col.dtype, v.dtype))
                grown[: self._n] = col[: self._n]
                col = self._columns[k] = grown
            elif col.dtype != v.dtype and np.result_type(col.dtype, v.dtype) != col.dtype:
                col = self._columns[k] = col.astype(np.result_type(col.dtype, v.dtype))
            col[self._n: need] = v
        order = np.argsort(h, kind="stable")  # sorted new hashes keep the array sorted after the insert
        at = np.searchsorted(self._hashes, h[order])
        self._hashes = np.insert(self._hashes, at, h[order])
        self._rows = np.insert(self._rows, at, rows[order])
        self._n = need
        return rows

    def add_table(self, table: Mapping[str, Any]) -> None:
        """Remember already scored rows (resume: the committed parts)."""
        n = max((len(v) for v in table.values() if np.ndim(v) > 0), default=0)
        if n == 0 or not self.key_columns:
            return
        keys = self._keys(table, n)
        h, pos = self._lookup(keys)
        _, first = np.unique(h, return_index=True)
        fresh = np.intersect1d(first, np.flatnonzero(pos < 0))
        self._append(h[fresh], keys.iloc[fresh].reset_index(drop=True),
                     {k: np.asarray(v)[fresh] for k, v in table.items() if np.ndim(v) > 0})

    def submit(self, table: Mapping[str, Any], submit: Callable[[Mapping[str, Any]], Callable[[], Mapping[str, np.ndarray]]]
               ) -> Callable[[], tuple[dict[str, np.ndarray], int]]:
        """Start scoring the distinct unknown designs of ``table`` with ``submit`` (which returns at once
        with a function that waits for their results, as :meth:`dse.cluster.Pool.submit` does); returns
        a function that waits and gives the results of every row and how many designs were scored."""
        n = max((len(v) for v in table.values() if np.ndim(v) > 0), default=1)
        if not self.key_columns:
            waiting = submit(table)
            return lambda: (dict(waiting()), n)
        keys = self._keys(table, n)
        h, pos = self._lookup(keys)
        unknown = pos < 0
        uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        fresh = first[unknown[first]]  # first row of each distinct unknown design
        waiting = submit({k: (np.asarray(v)[fresh] if np.ndim(v) > 0 else v) for k, v in table.items()}) if len(fresh) else None

        def wait() -> tuple[dict[str, np.ndarray], int]:
            nonlocal pos
            if waiting is not None:
                rows = self._append(h[fresh], keys.iloc[fresh].reset_index(drop=True), waiting())
                row_of_hash = np.full(len(uniq), -1, dtype=np.int64)
                row_of_hash[np.searchsorted(uniq, h[fresh])] = rows
                pos = np.where(unknown, row_of_hash[inverse.reshape(-1)], pos)
            return {k: v[pos] for k, v in self._columns.items() if not k.startswith("__key__")}, len(fresh)

        return wait

    def score(self, table: Mapping[str, Any], score: Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]
              ) -> tuple[dict[str, np.ndarray], int]:
        """Results for every row of ``table`` (scoring only the distinct unknown designs) and how many were scored."""
        def now(sub):
            result = score(sub)
            return lambda: result

        return self.submit(table, now)()
