"""Samplers of the outer search, one file per sampler (as in ``optuna.samplers``).

:func:`make_sampler` is called by :meth:`dse.study.Searcher.ask` before every batch and returns a fresh
sampler seeded with :func:`batch_seed`: NSGA-II (:mod:`~dse.study.samplers.nsga2`, the default; its
bookkeeping in :mod:`~dse.study.samplers.generations`, its variation in
:mod:`~dse.study.samplers.variation`), TPE and random (Optuna's own), or the exhaustive grid
(:mod:`~dse.study.samplers.grid`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import optuna
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import StudyDirection

from dse.space import Space
from dse.spec import SearchSettings
from dse.study.samplers.generations import GenerationIndex
from dse.study.samplers.grid import BatchGridSampler
from dse.study.samplers.nsga2 import GENERATION_KEY, BatchNSGAIISampler
from dse.study.samplers.variation import VectorizedChildGeneration, sample_uniform, uniform_params

__all__ = ["make_sampler", "batch_seed", "sample_uniform", "uniform_params", "BatchNSGAIISampler", "BatchGridSampler",
           "GenerationIndex", "GENERATION_KEY", "VectorizedChildGeneration"]


def batch_seed(seed: int, batch_index: int) -> int:
    """The sampler seed of one batch: independent streams, the same on every rerun and resume."""
    return int(np.random.SeedSequence([int(seed), int(batch_index)]).generate_state(1)[0])


def make_sampler(settings: SearchSettings, space: Space, batch_index: int,
                 directions: Sequence[StudyDirection], generations: GenerationIndex | None = None,
                 seen: set | None = None) -> BaseSampler:
    """The sampler for one batch (called by :meth:`dse.study.Searcher.ask` before every batch).

    Samplers keep no state of their own between batches (the study holds it), so a fresh one seeded
    with :func:`batch_seed` makes every batch reproducible, also after a resume.
    """
    seed = batch_seed(settings.seed, batch_index)
    if settings.sampler == "nsga2":
        return BatchNSGAIISampler(search_space=space.distributions, population_size=settings.batch_size,
                                  seed=seed, directions=directions, generations=generations, seen=seen)
    if settings.sampler == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return TPESampler(seed=seed, n_startup_trials=settings.batch_size, multivariate=True)
    if settings.sampler == "random":
        return RandomSampler(seed=seed)
    if settings.sampler == "grid":
        return BatchGridSampler(space.grid(), seed=settings.seed, points=space.grid_points())
    raise ValueError(f"unknown sampler {settings.sampler!r}")
