"""The base class every model module implements.

A model is a pure function from columns to new columns, like a pymoo vectorized problem: it reads the
columns it `requires` (whole arrays, one row per design) and returns exactly the columns it `provides`.
It never loops over rows, never mutates its inputs and never raises for an infeasible design: it marks
it in a ``con_*`` column (<= 0 feasible).

When each method is called:
  - ``requires`` / ``provides`` are read once, by :func:`objectives.pipeline.evaluate`, to order the models
    and to check the table before anything runs.
  - ``compute(cols, cal)`` is called once per batch with every required column present as a float array
    of the batch's length, or of length 1 where the column is constant over the batch (numpy broadcasts
    it; what is computed from constants alone is then computed once), and the calibration constants ``cal``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.calibration import Calibration
from objectives.table import is_constant

__all__ = ["Model", "as_codes", "lookup", "select"]


def as_codes(column: np.ndarray) -> np.ndarray:
    """A categorical code column (float codes 0, 1, ...) as integers to index with; a constant column stays
    a broadcast view. Convert once where several lookups read the same column."""
    if is_constant(column):
        return np.broadcast_to(column[:1].astype(np.intp), column.shape)
    return column.astype(np.intp)


def lookup(table, codes: np.ndarray) -> np.ndarray:
    """``table[code]`` row by row for a categorical code column (precision, recompute, stack): a constant
    per category. A constant code column (a broadcast view) costs one lookup, broadcast."""
    table = np.asarray(table, dtype=np.float64)
    if is_constant(codes):
        return np.broadcast_to(table[int(codes[0])], codes.shape)
    return table.take(codes if codes.dtype == np.intp else codes.astype(np.intp))


def select(codes: np.ndarray, options: tuple[np.ndarray, ...]) -> np.ndarray:
    """``options[code]`` row by row: one of a few columns picked by a categorical code column (precision).

    Exactly ``np.choose(codes, options)``, without its cost: a code no row holds costs no pass. The result
    may be a read-only view of an option (never write to it)."""
    if is_constant(codes):
        return np.broadcast_to(options[int(codes[0])], codes.shape)
    out = np.broadcast_to(options[0], np.broadcast_shapes(codes.shape, *(o.shape for o in options)))
    for code in range(1, len(options)):
        rows = codes == code
        if rows.any():
            out = np.where(rows, options[code], out)
    return out


class Model:
    """A vectorized model module: subclasses set ``requires``, ``provides`` and implement ``compute``."""

    #: input columns read by ``compute``
    requires: tuple[str, ...] = ()
    #: output columns -> "unit; meaning"
    provides: Mapping[str, str] = {}

    def compute(self, cols: Mapping[str, np.ndarray], cal: Calibration) -> dict[str, np.ndarray]:
        """Return a dict with exactly the keys of ``provides``, each a float or bool array."""
        raise NotImplementedError

    def __call__(self, cols: Mapping[str, np.ndarray], cal: Calibration | None = None) -> dict[str, np.ndarray]:
        missing = [c for c in self.requires if c not in cols]
        if missing:
            raise KeyError(f"{type(self).__name__} needs columns {missing}")
        out = self.compute(cols, cal or Calibration.load())
        if set(out) != set(self.provides):
            raise RuntimeError(
                f"{type(self).__name__} returned {sorted(set(out) ^ set(self.provides))} beyond/short of its declared outputs"
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
