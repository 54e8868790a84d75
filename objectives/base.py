"""The base class every model module implements.

A model is a pure function from columns to new columns, like a pymoo vectorized problem: it reads the
columns it `requires` (whole arrays, one row per design) and returns exactly the columns it `provides`.
It never loops over rows, never mutates its inputs and never raises for an infeasible design: it marks
it in a ``con_*`` column (<= 0 feasible).

When each method is called:
  - ``requires`` / ``provides`` are read once, by :func:`objectives.pipeline.evaluate`, to order the models
    and to check the table before anything runs.
  - ``compute(cols, cal)`` is called once per batch with every required column present as a float array
    of the batch's length, and the calibration constants ``cal``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.calibration import Calibration

__all__ = ["Model"]


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
