"""The run's Pareto front: kept batch by batch while the sweep runs, written as ``pareto.parquet`` at the end."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dse.store.pareto import front_table, nondominated_mask, to_minimization
from dse.store.run_store import RunStore

__all__ = ["RunningFront", "write_front"]


class RunningFront:
    """The current front of admissible designs (objective vectors only), merged batch by batch (the
    progress line's front size; the written front is computed from every stored design, :func:`write_front`)."""

    def __init__(self, directions: Sequence[str]) -> None:
        self.directions = list(directions)
        self.F = np.zeros((0, len(self.directions)))

    def add(self, values: np.ndarray, admissible: np.ndarray) -> int:
        """Merge a batch's objective values (those of its admissible designs); returns the front's size."""
        F = to_minimization(values[admissible], self.directions)
        F = F[np.isfinite(F).all(axis=1)]
        if len(F):
            both = np.vstack([self.F, F])
            self.F = np.unique(both[nondominated_mask(both)], axis=0)  # one entry per distinct design value
        return len(self.F)


def write_front(store: RunStore, objectives: Mapping[str, str], design_columns: Sequence[str],
                metadata: Mapping[str, Any],
                units: Callable[[list[str]], Mapping[str, str]] | None = None) -> pd.DataFrame:
    """Compute the front of every committed design (admissible ones; repeated designs once) and write
    ``pareto.parquet`` with ``metadata``, the units of its columns (``units(columns)``) and the number of
    trials."""
    frame = store.read_trials()
    front = front_table(frame, objectives, feasible="admissible", dedupe=list(design_columns) or None)
    named = dict(units(list(front.columns))) if units is not None else {}
    store.write_pareto(front, {**metadata, "units": named, "n_trials": int(len(frame))})
    return front
