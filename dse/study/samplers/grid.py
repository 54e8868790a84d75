"""Exhaustive grid search, asked in batches."""

from __future__ import annotations

from collections.abc import Sequence

from optuna.samplers import GridSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

__all__ = ["BatchGridSampler"]


class BatchGridSampler(GridSampler):
    """``optuna.samplers.GridSampler`` that leaves stopping to the engine.

    Trial ``k`` gets grid point ``k`` of the seeded shuffle (Optuna's rule); the engine never asks more
    trials than the grid has, so the per-trial scan for an exhausted grid (``after_trial``) is skipped.
    """

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        """Called by ``study.tell``: nothing to do (the engine stops at the grid's size)."""
