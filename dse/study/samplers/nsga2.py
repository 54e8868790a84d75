"""NSGA-II for whole generations: Optuna's NSGA-II selection, children made in one vectorized step.

:class:`BatchNSGAIISampler` computes the generation and its parents once per batch and makes all children
of a generation at once (:class:`~dse.study.samplers.variation.VectorizedChildGeneration`: binary
tournaments under constrained domination, uniform crossover, polynomial mutation for numbers, duplicate
elimination).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import NSGAIISampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.study.internals import generation_key, parent_cache_key, set_trial_system_attr, study_system_attrs, trial_id
from dse.study.samplers.generations import EliteSelection, GenerationIndex
from dse.study.samplers.variation import VectorizedChildGeneration, sample_uniform

__all__ = ["BatchNSGAIISampler", "GENERATION_KEY"]


class BatchNSGAIISampler(NSGAIISampler):
    """``optuna.samplers.NSGAIISampler`` for batched ask/tell with a fixed search space.

    Optuna's NSGA-II survival (elite selection by non-dominated sorting and crowding distance, constrained
    domination) and generation bookkeeping, with the work that Optuna repeats per trial done once per
    batch: the trial's generation is computed at the first ask after a tell (from :class:`GenerationIndex`
    when the caller keeps one), the parent population once per generation, and the children of a whole
    generation at once by :class:`VectorizedChildGeneration` (which adds duplicate elimination and
    polynomial mutation for numbers to Optuna's default variation). The first generation is drawn
    uniformly, without duplicates.
    """

    def __init__(self, *, search_space: Mapping[str, BaseDistribution], population_size: int, seed: int,
                 directions: Sequence[StudyDirection], generations: GenerationIndex | None = None,
                 seen: set | None = None) -> None:
        self._children = VectorizedChildGeneration(directions=directions, population_size=population_size,
                                                   seed=seed + 1, seen=seen, index=generations)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            super().__init__(population_size=population_size, seed=seed, child_generation_strategy=self._children,
                             elite_population_selection_strategy=EliteSelection(population_size, generations))
        self._space = {k: v for k, v in search_space.items() if not v.single()}
        self._generation: int | None = None
        self._parents: dict[int, list[FrozenTrial]] = {}
        self._uniform = np.random.RandomState((seed + 2) % (2**32))
        #: finished trials by generation, if the caller keeps them (valid until the next tell)
        self._generations = generations
        self._assigned: dict[int, int] = {}

    def sample_batch(self, study: Study, n: int) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        """Called once per batch by :meth:`dse.study.Searcher.ask`, instead of ``n`` per-trial asks: the
        varying parameters of ``n`` new designs and the system attributes every one of their trials gets
        (its generation). The same designs, in the same order, as ``n`` calls of :meth:`sample_relative`
        would make. None (ask trial by trial) when the caller keeps no :class:`GenerationIndex`."""
        if self._generations is None:
            return None
        latest, count = self._generations.latest()  # Optuna's rule (BaseGASampler.get_trial_generation)
        generation = latest if count < self.population_size else latest + 1
        self._generation = generation
        parents = self.get_parent_population(study, generation) if self._space else []
        if parents:
            designs = self._children.generate(self._space, parents, n)[::-1]
        else:
            designs = [self._children.random(self._space) for _ in range(n)]
        return designs, {GENERATION_KEY: generation}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        """Called for the first generation and for mutated parameters: a uniform draw, as Optuna's
        RandomSampler makes it (log scale for log distributions, steps respected), without its per-call
        search-space transform."""
        return sample_uniform(param_distribution, self._uniform)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """Called at every ask: the space is fixed for a run, so no scan of past trials."""
        return dict(self._space)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """Called at every ask: children of the generation's parents; in the first generation, a new
        uniformly drawn design (Optuna would draw each parameter in ``sample_independent``)."""
        if search_space and self.get_trial_generation(study, trial) == 0:
            return self._children.random(search_space)
        return super().sample_relative(study, trial, search_space)

    def get_trial_generation(self, study: Study, trial: FrozenTrial) -> int:
        """Called at every ask (twice: here and in NSGA-II's ``sample_relative``): Optuna's rule (see
        BaseGASampler), evaluated once until the next tell, and stored once per trial."""
        key = GENERATION_KEY
        generation = trial.system_attrs.get(key)
        if generation is None:
            generation = self._assigned.get(trial_id(trial))
        if generation is not None:
            return generation
        if self._generation is None and self._generations is None:
            generation = super().get_trial_generation(study, trial)  # stores it
        else:
            if self._generation is None:
                latest, count = self._generations.latest()  # Optuna's rule without the scan of every trial
                self._generation = latest if count < self.population_size else latest + 1
            generation = self._generation
            set_trial_system_attr(study, trial, key, generation)
        self._generation = generation
        self._assigned[trial_id(trial)] = generation
        return generation

    def get_population(self, study: Study, generation: int) -> list[FrozenTrial]:
        """Called once per generation (parent selection): the finished trials of a generation."""
        if self._generations is None:
            return super().get_population(study, generation)
        return self._generations.population(generation)

    def get_parent_population(self, study: Study, generation: int) -> list[FrozenTrial]:
        """Called once per generation: the parents of a generation never change once chosen (Optuna caches
        their ids in the study; the index turns ids into trials without a scan of the study)."""
        if generation not in self._parents:
            parents = None
            if self._generations is not None and generation > 0:
                ids = study_system_attrs(study).get(parent_cache_key(BatchNSGAIISampler, generation))
                parents = self._generations.trials(ids) if ids is not None else None
            if parents is None:
                parents = super().get_parent_population(study, generation)
            # in study order, as Optuna returns them from its cache: the first selection (elite order) and
            # a lookup after a resume then give the same children
            self._parents[generation] = sorted(parents, key=lambda t: t.number)
        return self._parents[generation]

    def after_batch(self, study: Study) -> None:
        """Called once per told batch by :meth:`dse.study.Searcher.tell`, in place of ``after_trial`` per
        trial: NSGA-II's after-trial strategy only runs a ``constraints_func``, which this sampler never
        has (the model's constraints are told as system attributes), so only the generation is reset."""
        self._generation = None
        self._generations = None  # the index is stale now

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        """Called by ``study.tell``: the next ask recomputes the generation."""
        self.after_batch(study)
        super().after_trial(study, trial, state, values)


#: the trial system attribute holding a trial's generation (Optuna's key for this sampler class)
GENERATION_KEY = generation_key(BatchNSGAIISampler)
