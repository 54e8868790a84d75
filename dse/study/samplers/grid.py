"""Exhaustive grid search, asked in batches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optuna.samplers import GridSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from dse.study.internals import restrict_grid

__all__ = ["BatchGridSampler"]


class BatchGridSampler(GridSampler):
    """``optuna.samplers.GridSampler`` that leaves stopping to the engine.

    Trial ``k`` gets grid point ``k`` of the seeded shuffle (Optuna's rule); the engine never asks more
    trials than the grid has, so the per-trial scan for an exhausted grid (``after_trial``) is skipped.
    ``points``: the grid points to walk (one per distinct design, dse.space.Space.grid_points), in the
    shuffle's order; None: every point of the cartesian product.
    """

    def __init__(self, search_space: Mapping[str, Sequence], seed: int | None = None,
                 points: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(search_space, seed=seed)
        if points is not None:
            names = list(search_space)
            restrict_grid(self, names, {tuple(p[n] for n in names) for p in points})

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        """Called by ``study.tell``: nothing to do (the engine stops at the grid's size)."""
