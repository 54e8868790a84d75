"""The outer search: an Optuna study asked and told in whole batches.

:class:`Searcher` owns the study. Each batch, :mod:`dse.sweep` calls, in this order:

1. :meth:`Searcher.ask` -- a fresh sampler for the batch (seeded from the run's seed and the batch
   index, so seeded runs and resumed runs propose the same designs), then ``study.ask`` once per design.
   For NSGA-II a batch is one generation (``population_size`` = batch size).
2. :meth:`Searcher.tell` -- after the batch was scored: every trial's constraint values (stored as
   ``trial.set_constraint`` stores them, <= 0 feasible; an infeasible design is told, never failed) and
   its objective values (``study.tell``).
3. :meth:`Searcher.record` -- the batch's finished trials as plain JSON (stored with the batch's Parquet
   part, which is the commit point), then :meth:`Searcher.journal_append` appends them to the run's
   Optuna journal (``optuna.storages.JournalStorage`` file) with one write and fsync.

On ``--resume``, :meth:`Searcher.restore` rebuilds the study from the records of the committed parts.

Optuna's samplers do per-trial work that grows with the study; the subclasses here keep their algorithms
and make a batch cheap: :class:`BatchNSGAIISampler` (Optuna's NSGA-II selection) computes the generation
and the parents once per batch and makes all children of a generation in one vectorized step
(:class:`VectorizedChildGeneration`: binary tournaments under constrained domination, uniform crossover,
polynomial mutation for numbers, duplicate elimination); :class:`BatchGridSampler` drops the per-trial
scan for an exhausted grid. The live study runs on in-memory storage (:class:`_InMemoryStorage`); the
journal (:class:`dse.store.JournalMirror`) is written from it once per batch.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler, GridSampler, NSGAIISampler, RandomSampler, TPESampler
from optuna.storages import InMemoryStorage
from optuna.study import StudyDirection
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import FrozenTrial, TrialState

from dse.space import Space
from dse.spec import SearchSettings
from dse.store import STUDY_NAME, JournalMirror

__all__ = [
    "Searcher",
    "make_sampler",
    "batch_seed",
    "BatchNSGAIISampler",
    "VectorizedChildGeneration",
    "BatchGridSampler",
    "GenerationIndex",
]

optuna.logging.set_verbosity(optuna.logging.WARNING)


def batch_seed(seed: int, batch_index: int) -> int:
    """The sampler seed of one batch: independent streams, the same on every rerun and resume."""
    return int(np.random.SeedSequence([int(seed), int(batch_index)]).generate_state(1)[0])


# ----------------------------------------------------------------------------------------------------
# samplers


class VectorizedChildGeneration:
    """NSGA-II offspring for a whole generation at once (an ``NSGAIISampler`` child generation strategy).

    Called by the sampler once per trial with the generation's parent population; the first call of a
    generation makes ``population_size`` children in numpy, later calls hand them out. Selection and
    crossover are Optuna's defaults: two binary tournaments under constrained domination (the second
    without the first winner), uniform crossover with probability ``crossover_prob`` and ``swapping_prob``,
    otherwise a copy of a random parent. Then each parameter is mutated with probability ``1 / n_params``:
    a categorical one redrawn uniformly (Optuna's default), a numerical one by polynomial mutation (Deb et
    al. 2002, the NSGA-II paper's operator; ``optuna.samplers.nsgaii.PolynomialMutation``), in Optuna's
    transformed space (log for log ranges, half a step beyond each end for steps, then rounded), with
    distribution index ``eta`` = 20 for continuous ranges (Deb's and pymoo's default) and ``eta_discrete`` =
    3 for integer and stepped ones (pymoo's recipe for integer variables: wide enough that rounding does
    not undo the move). ``eta=None`` redraws numbers uniformly too, as Optuna does by default.

    Duplicates are eliminated, as pymoo's NSGA-II does by default: a child equal to a design already in
    ``seen`` (every design asked in this run) or to an earlier child is made again, up to ``max_tries``
    times, so the budget goes to new designs. :meth:`random` makes the first generation the same way.
    """

    def __init__(self, *, directions: Sequence[StudyDirection], population_size: int, seed: int,
                 crossover_prob: float = 0.9, swapping_prob: float = 0.5, mutation_prob: float | None = None,
                 seen: set | None = None, max_tries: int = 20, eta: float | None = 20.0, eta_discrete: float = 3.0):
        self._sign = np.array([1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions])
        self._size = population_size
        self._rng = np.random.RandomState(seed % (2**32))
        self._crossover_prob = crossover_prob
        self._swapping_prob = swapping_prob
        self._mutation_prob = mutation_prob
        self._seen = seen if seen is not None else set()
        self._max_tries = max_tries
        self._eta = eta
        self._eta_discrete = eta_discrete
        self._key: tuple | None = None
        self._children: list[dict[str, Any]] = []

    def __call__(self, study, search_space: dict[str, BaseDistribution], parents: list[FrozenTrial]) -> dict[str, Any]:
        key = (id(parents), len(parents), tuple(search_space))  # the sampler caches one list per generation
        if key != self._key or not self._children:
            self._key = key
            self._children = self._generate(search_space, parents, self._size)
        return self._children.pop()

    def random(self, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """A uniformly drawn design not seen yet (the first generation); called once per trial."""
        child: dict[str, Any] = {}
        for _ in range(self._max_tries + 1):
            child = {name: _uniform(dist, self._rng) for name, dist in search_space.items()}
            k = tuple(child[n] for n in search_space)
            if k not in self._seen:
                break
        self._seen.add(tuple(child[n] for n in search_space))
        return child

    def _tournament(self, F: np.ndarray, penalty: np.ndarray, size: int, exclude: np.ndarray | None) -> np.ndarray:
        n = len(F)
        if exclude is not None and n > 1:  # draw from the population without the first parent
            a, b = _draw_without(exclude, n, self._rng), _draw_without(exclude, n, self._rng)
        else:
            a, b = self._rng.randint(n, size=size), self._rng.randint(n, size=size)
        fa, fb = F[a], F[b]
        dom = np.all(fa <= fb, axis=1) & np.any(fa < fb, axis=1)
        pa, pb = penalty[a], penalty[b]
        ok_a, ok_b = pa <= 0, pb <= 0
        a_wins = np.where(ok_a & ok_b, dom, np.where(ok_a, True, np.where(ok_b, False, pa < pb)))
        return np.where(a_wins, a, b)

    def _offspring(self, space, names, values, F, penalty, size) -> list[list]:
        """``size`` children as rows of values (in ``names`` order), all operators vectorized."""
        n_par = len(F)
        first = self._tournament(F, penalty, size, None)
        second = self._tournament(F, penalty, size, first)
        cross = self._rng.rand(size) < self._crossover_prob
        copy_of = self._rng.randint(n_par, size=size)
        p0 = np.where(cross, first, copy_of)
        p1 = np.where(cross, second, copy_of)
        mutation_prob = self._mutation_prob if self._mutation_prob is not None else 1.0 / max(1.0, len(names))
        columns = []
        for name in names:
            take_second = self._rng.rand(size) >= self._swapping_prob
            chosen = np.where(take_second, values[name][p1], values[name][p0])
            mutate = self._rng.rand(size) < mutation_prob
            dist = space[name]
            missing = _missing(chosen)
            if isinstance(dist, CategoricalDistribution) or self._eta is None:
                for i in np.flatnonzero(mutate | missing):  # the few mutated cells
                    chosen[i] = _uniform(dist, self._rng)
            else:
                for i in np.flatnonzero(missing):
                    chosen[i] = _uniform(dist, self._rng)
                idx = np.flatnonzero(mutate & ~missing)
                if len(idx):
                    discrete = isinstance(dist, IntDistribution) or dist.step is not None
                    eta = self._eta_discrete if discrete else self._eta
                    chosen[idx] = _polynomial_mutation(dist, chosen[idx].astype(np.float64), eta, self._rng)
            columns.append(chosen.tolist())
        return [list(row) for row in zip(*columns)]

    def _generate(self, space: dict[str, BaseDistribution], parents: list[FrozenTrial], size: int) -> list[dict]:
        names = list(space)
        F = np.array([t.values for t in parents], dtype=np.float64) * self._sign
        F[np.isnan(F)] = np.inf
        constrained = any(t.constraints for t in parents)
        penalty = (np.array([sum(v for v in t.constraints.values() if v > 0) for t in parents]) if constrained
                   else np.zeros(len(parents)))
        values = {name: np.array([t.params.get(name) for t in parents], dtype=object) for name in names}

        rows = self._offspring(space, names, values, F, penalty, size)
        seen = self._seen
        out: list[list] = []
        for _ in range(self._max_tries):
            retry = 0
            for row in rows:
                k = tuple(row)
                if k in seen:
                    retry += 1
                else:
                    seen.add(k)
                    out.append(row)
            if not retry:
                break
            rows = self._offspring(space, names, values, F, penalty, retry)
        else:
            out.extend(rows)  # the space is (nearly) exhausted: accept repeats
        children = [dict(zip(names, row)) for row in out[:size]]
        children.reverse()  # pop() hands them out in order
        return children


def _polynomial_mutation(dist: BaseDistribution, x: np.ndarray, eta: float, rng: np.random.RandomState) -> np.ndarray:
    """Deb's polynomial mutation of the values ``x`` of one numerical distribution (vectorized; the same
    formula as ``optuna.samplers.nsgaii.PolynomialMutation``, in the space ``_SearchSpaceTransform`` uses)."""
    is_int = isinstance(dist, IntDistribution)
    step = dist.step if dist.step is not None else None
    if dist.log:
        lb, ub = (np.log(dist.low - 0.5), np.log(dist.high + 0.5)) if is_int else (np.log(dist.low), np.log(dist.high))
        t = np.log(x)
    else:
        half = (step or 0.0) / 2.0
        lb, ub = dist.low - half, dist.high + half
        t = x
    width = ub - lb
    if width <= 0:
        return x
    u = rng.rand(len(t))
    d1, d2 = (t - lb) / width, (ub - t) / width
    power = 1.0 / (eta + 1.0)
    low_side = 2.0 * u + (1.0 - 2.0 * u) * (1.0 - d1) ** (eta + 1.0)
    high_side = 2.0 * (1.0 - u) + 2.0 * (u - 0.5) * (1.0 - d2) ** (eta + 1.0)
    dq = np.where(u <= 0.5, low_side ** power - 1.0, 1.0 - high_side ** power)
    t = np.clip(t + dq * width, lb, ub)
    v = np.exp(t) if dist.log else t
    if step is not None:
        v = dist.low + np.round((v - dist.low) / step) * step
    if is_int:
        v = np.round(v)
    v = np.clip(v, dist.low, dist.high)
    return np.array([int(a) for a in v], dtype=object) if is_int else np.array([float(a) for a in v], dtype=object)


def _missing(values: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in values], dtype=bool)


def _draw_without(exclude: np.ndarray, n: int, rng: np.random.RandomState) -> np.ndarray:
    """One index per entry of ``exclude``, uniform over ``range(n)`` without ``exclude[i]``."""
    draw = rng.randint(n - 1, size=len(exclude))
    return np.where(draw >= exclude, draw + 1, draw)


def _uniform(dist: BaseDistribution, rng: np.random.RandomState) -> Any:
    """One value drawn uniformly from ``dist`` (the RandomSampler's distribution for each kind)."""
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[rng.randint(len(dist.choices))]
    low, high = float(dist.low), float(dist.high)
    if dist.log:
        value = float(np.exp(rng.uniform(np.log(low - 0.5 if isinstance(dist, IntDistribution) else low),
                                         np.log(high + 0.5 if isinstance(dist, IntDistribution) else high))))
        value = min(max(value, low), high)
    else:
        step = dist.step
        if step is not None:  # every grid point equally likely
            k = rng.randint(int(round((high - low) / step)) + 1)
            value = low + k * step
        else:
            value = rng.uniform(low, high)
    if isinstance(dist, IntDistribution):
        return int(min(max(round(value), dist.low), dist.high))
    return float(min(max(value, low), high))


class GenerationIndex:
    """Finished trials by NSGA-II generation, kept up to date by :class:`Searcher` as trials are told.

    ``BaseGASampler`` answers "which generation is this trial in" and "which trials form generation g" by
    scanning every trial of the study at each generation; this index gives the same answers at once.
    """

    def __init__(self):
        self._by_generation: dict[int, list[FrozenTrial]] = {}
        self._by_id: dict[int, FrozenTrial] = {}

    def add(self, finished: Iterable[FrozenTrial]) -> None:
        """Called after every tell (and on restore) with the finished trials."""
        key = BatchNSGAIISampler._get_generation_key()
        for t in finished:
            g = t.system_attrs.get(key)
            if g is not None and t.state == TrialState.COMPLETE:
                self._by_generation.setdefault(g, []).append(t)
                self._by_id[t._trial_id] = t

    def trials(self, trial_ids: Iterable[int]) -> list[FrozenTrial] | None:
        """The finished trials with these ids, in study order (None if one is unknown)."""
        try:
            return sorted((self._by_id[i] for i in set(trial_ids)), key=lambda t: t.number)
        except KeyError:
            return None

    def latest(self) -> tuple[int, int]:
        """(the latest generation with a finished trial, how many it has); (0, 0) before any."""
        if not self._by_generation:
            return 0, 0
        g = max(self._by_generation)
        return g, len(self._by_generation[g])

    def population(self, generation: int) -> list[FrozenTrial]:
        return list(self._by_generation.get(generation, []))


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
                 seen: set | None = None):
        self._children = VectorizedChildGeneration(directions=directions, population_size=population_size,
                                                   seed=seed + 1, seen=seen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            super().__init__(population_size=population_size, seed=seed, child_generation_strategy=self._children)
        self._space = {k: v for k, v in search_space.items() if not v.single()}
        self._generation: int | None = None
        self._parents: dict[int, list[FrozenTrial]] = {}
        self._uniform = np.random.RandomState((seed + 2) % (2**32))
        #: finished trials by generation, if the caller keeps them (valid until the next tell)
        self._generations = generations
        self._assigned: dict[int, int] = {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        """Called for the first generation and for mutated parameters: a uniform draw, as Optuna's
        RandomSampler makes it (log scale for log distributions, steps respected), without its per-call
        search-space transform."""
        return _uniform(param_distribution, self._uniform)

    def infer_relative_search_space(self, study, trial):
        """Called at every ask: the space is fixed for a run, so no scan of past trials."""
        return dict(self._space)

    def sample_relative(self, study, trial, search_space):
        """Called at every ask: children of the generation's parents; in the first generation, a new
        uniformly drawn design (Optuna would draw each parameter in ``sample_independent``)."""
        if search_space and self.get_trial_generation(study, trial) == 0:
            return self._children.random(search_space)
        return super().sample_relative(study, trial, search_space)

    def get_trial_generation(self, study, trial) -> int:
        """Called at every ask (twice: here and in NSGA-II's ``sample_relative``): Optuna's rule (see
        BaseGASampler), evaluated once until the next tell, and stored once per trial."""
        key = self._get_generation_key()
        generation = trial.system_attrs.get(key)
        if generation is None:
            generation = self._assigned.get(trial._trial_id)
        if generation is not None:
            return generation
        if self._generation is None and self._generations is None:
            generation = super().get_trial_generation(study, trial)  # stores it
        else:
            if self._generation is None:
                latest, count = self._generations.latest()  # Optuna's rule without the scan of every trial
                self._generation = latest if count < self._population_size else latest + 1
            generation = self._generation
            study._storage.set_trial_system_attr(trial._trial_id, key, generation)
        self._generation = generation
        self._assigned[trial._trial_id] = generation
        return generation

    def get_population(self, study, generation: int) -> list[FrozenTrial]:
        """Called once per generation (parent selection): the finished trials of a generation."""
        if self._generations is None:
            return super().get_population(study, generation)
        return self._generations.population(generation)

    def get_parent_population(self, study, generation: int) -> list[FrozenTrial]:
        """Called at every ask: the parents of a generation never change once chosen (Optuna caches their
        ids in the study; the index turns ids into trials without a scan of the study)."""
        if generation not in self._parents:
            parents = None
            if self._generations is not None and generation > 0:
                key = self._get_parent_cache_key_prefix() + str(generation)
                ids = study._storage.get_study_system_attrs(study._study_id).get(key)
                parents = self._generations.trials(ids) if ids is not None else None
            self._parents[generation] = parents if parents is not None else super().get_parent_population(study, generation)
        return self._parents[generation]

    def after_trial(self, study, trial, state, values) -> None:
        """Called by ``study.tell``: the next ask recomputes the generation."""
        self._generation = None
        self._generations = None  # the index is stale now
        super().after_trial(study, trial, state, values)


class BatchGridSampler(GridSampler):
    """``optuna.samplers.GridSampler`` that leaves stopping to the engine.

    Trial ``k`` gets grid point ``k`` of the seeded shuffle (Optuna's rule); the engine never asks more
    trials than the grid has, so the per-trial scan for an exhausted grid (``after_trial``) is skipped.
    """

    def after_trial(self, study, trial, state, values) -> None:
        """Called by ``study.tell``: nothing to do (the engine stops at the grid's size)."""


def make_sampler(settings: SearchSettings, space: Space, batch_index: int,
                 directions: Sequence[StudyDirection], generations: GenerationIndex | None = None,
                 seen: set | None = None) -> BaseSampler:
    """The sampler for one batch (called by :meth:`Searcher.ask` before every batch).

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
        return BatchGridSampler(space.grid(), seed=settings.seed)
    raise ValueError(f"unknown sampler {settings.sampler!r}")


# ----------------------------------------------------------------------------------------------------
# storage


class _InMemoryStorage(InMemoryStorage):
    """In-memory storage for a study driven in batches.

    The study never holds WAITING trials (the engine never enqueues): ``study.ask`` scans every trial for
    one, and a counter answers at once. Parameters and system attributes of a trial can be written in one
    step (:meth:`set_trial_params`, :meth:`set_trial_system_attrs`), as the per-item calls would.
    """

    def __init__(self):
        super().__init__()
        self._n_waiting = 0

    def create_new_trial(self, study_id, template_trial=None):
        if template_trial is not None and template_trial.state == TrialState.WAITING:
            self._n_waiting += 1
        return super().create_new_trial(study_id, template_trial)

    def get_all_trials(self, study_id, deepcopy=True, states=None):
        if states is not None and tuple(states) == (TrialState.WAITING,) and self._n_waiting == 0:
            return []
        return super().get_all_trials(study_id, deepcopy, states)

    def get_study_system_attrs(self, study_id):
        """A shallow copy: NSGA-II keeps every generation's parent ids here and reads them each generation;
        a deep copy would grow with the run (callers only read the values)."""
        with self._lock:
            self._check_study_id(study_id)
            return dict(self._studies[study_id].system_attrs)

    def set_trial_system_attrs(self, trial_id: int, attrs: Mapping[str, Any]) -> None:
        """Several system attributes of a running trial in one write (as ``set_trial_system_attr`` each)."""
        with self._lock:
            trial = self._get_trial(trial_id)
            self.check_trial_is_updatable(trial_id, trial.state)
            trial = copy.copy(trial)
            trial.system_attrs = {**trial.system_attrs, **attrs}
            self._set_trial(trial_id, trial)

    def set_trial_params(self, trial_id: int, params: Mapping[str, Any], distributions: Mapping[str, BaseDistribution]) -> None:
        """All parameters of a running trial at once: what ``set_trial_param`` does per parameter (the
        same checks, the same copy-on-write of the stored trial), with one copy instead of one per parameter."""
        with self._lock:
            trial = self._get_trial(trial_id)
            self.check_trial_is_updatable(trial_id, trial.state)
            known = self._studies[self._trial_id_to_study_id_and_number[trial_id][0]].param_distribution
            for name, dist in distributions.items():
                if name in known and known[name] is not dist:
                    optuna.distributions.check_distribution_compatibility(known[name], dist)
                known[name] = dist
            trial = copy.copy(trial)
            trial.params = {**trial.params, **params}
            trial.distributions = {**trial.distributions, **distributions}
            self._set_trial(trial_id, trial)


# ----------------------------------------------------------------------------------------------------
# the searcher


class Searcher:
    """An Optuna study over a :class:`~dse.space.Space`, driven in batches (see the module doc)."""

    def __init__(self, space: Space, settings: SearchSettings, directions: Sequence[str],
                 journal_path: str | Path | None = None):
        self.space = space
        self.settings = settings
        self.directions = [StudyDirection.MINIMIZE if d == "min" else StudyDirection.MAXIMIZE for d in directions]
        self.study = optuna.create_study(storage=_InMemoryStorage(), directions=self.directions,
                                         study_name=STUDY_NAME, sampler=RandomSampler(seed=settings.seed))
        self.journal = JournalMirror(journal_path, self.directions) if journal_path is not None else None
        self._grid_sampler: BaseSampler | None = None
        self._study_attrs_seen: dict[str, Any] = {}
        self._generations = GenerationIndex()
        #: every design asked in this run, as a tuple of parameter values (NSGA-II's duplicate elimination)
        self._seen: set[tuple] = set()

    @property
    def n_trials(self) -> int:
        """Trials asked so far (finished ones, between batches)."""
        return len(self.study._storage.get_all_trials(self.study._study_id, deepcopy=False))

    def ask(self, n: int, batch_index: int) -> tuple[list[optuna.Trial], list[dict[str, Any]]]:
        """Ask ``n`` trials with the batch's sampler; returns the trials and their parameters.

        Each trial is created by ``study.ask()`` (which runs the sampler's ``before_trial``) and gets its
        parameters as ``Trial.suggest_*`` would give them: from the sampler's ``sample_relative`` where
        it proposes a value inside the distribution, else from ``sample_independent``; single-valued
        distributions give their one value. They are then stored in one write per trial instead of one
        per parameter.
        """
        if self.settings.sampler == "grid":
            if self._grid_sampler is None:
                self._grid_sampler = make_sampler(self.settings, self.space, batch_index, self.directions)
            sampler = self._grid_sampler
        else:
            sampler = make_sampler(self.settings, self.space, batch_index, self.directions, self._generations, self._seen)
        study = self.study
        study.sampler = sampler
        storage = study._storage
        dists = self.space.distributions
        trials, params = [], []
        for _ in range(n):
            trial = study.ask()
            frozen = storage.get_trial(trial._trial_id)
            space = sampler.infer_relative_search_space(study, frozen)
            relative = sampler.sample_relative(study, frozen, space) if space else {}
            p: dict[str, Any] = {}
            for name, dist in dists.items():
                if dist.single():
                    value = optuna.distributions._get_single_value(dist)
                elif name in relative and name in space and dist._contains(dist.to_internal_repr(relative[name])):
                    value = relative[name]
                else:
                    value = sampler.sample_independent(study, storage.get_trial(trial._trial_id), name, dist)
                    if not dist._contains(dist.to_internal_repr(value)):
                        raise ValueError(f"sampler proposed {value!r} outside {name}'s distribution")
                p[name] = value
            storage.set_trial_params(trial._trial_id, p, dists)
            trial._cached_frozen_trial = storage.get_trial(trial._trial_id)
            trials.append(trial)
            params.append(p)
            self._seen.add(tuple(p[k] for k in dists))
        return trials, params

    def tell(self, trials: Sequence[optuna.Trial], values: np.ndarray, constraints: Mapping[str, np.ndarray]) -> None:
        """Tell every trial of a batch: constraint values first (<= 0 feasible), then objective values.

        ``values`` is (n, n_objectives) and may hold inf; NaN means the model gave no value and is told as
        the worst value of that direction.
        """
        values = np.asarray(values, dtype=np.float64).reshape(len(trials), -1)
        worst = np.array([np.inf if d == StudyDirection.MINIMIZE else -np.inf for d in self.directions])
        values = np.where(np.isnan(values), worst, values)
        names = list(constraints)
        cons = np.column_stack([np.asarray(constraints[k], dtype=np.float64) for k in names]) if names else np.zeros((len(trials), 0))
        cons = np.where(np.isnan(cons), np.inf, cons)
        cons = np.minimum(cons, 1e300)  # Optuna sums violations: keep them finite
        vals = values.tolist()
        cons_l = cons.tolist()
        storage = self.study._storage
        keys = [f"{_CONSTRAINTS_KEY}:{name}" for name in names]  # what Trial.set_constraint stores
        for i, trial in enumerate(trials):
            storage.set_trial_system_attrs(trial._trial_id, dict(zip(keys, cons_l[i])))
            _tell(self.study, trial, vals[i])
        self._generations.add(storage.get_trial(t._trial_id) for t in trials)

    def record(self, trials: Sequence[optuna.Trial]) -> dict[str, Any]:
        """JSON-able record of a told batch, by column: each trial's number, parameters (Optuna's internal
        representation), values and system attributes, plus the study system attributes new since the
        last record (NSGA-II parents). Stored with the batch's Parquet part, so that the part alone
        rebuilds its trials (:meth:`restore`)."""
        storage = self.study._storage
        frozen = [storage.get_trial(t._trial_id) for t in trials]
        attrs = storage.get_study_system_attrs(self.study._study_id)
        new_attrs = {k: v for k, v in attrs.items() if self._study_attrs_seen.get(k, _MISSING) != v}
        self._study_attrs_seen.update(new_attrs)
        dists = self.space.distributions
        keys = sorted({k for t in frozen for k in t.system_attrs})
        starts = [t.datetime_start for t in frozen if t.datetime_start]
        ends = [t.datetime_complete for t in frozen if t.datetime_complete]
        return {
            "number": [t.number for t in frozen],
            "params": {k: [dists[k].to_internal_repr(t.params[k]) for t in frozen] for k in dists},
            "values": [t.values for t in frozen],
            "system_attrs": {k: [t.system_attrs.get(k) for t in frozen] for k in keys},
            "study_system_attrs": new_attrs,
            "datetime_start": min(starts).isoformat() if starts else None,
            "datetime_complete": max(ends).isoformat() if ends else None,
        }

    def journal_append(self, trials: Sequence[optuna.Trial], record: Mapping[str, Any]) -> None:
        """Append a committed batch to the Optuna journal (after its Parquet part is written)."""
        if self.journal is None:
            return
        storage = self.study._storage
        self.journal.append([storage.get_trial(t._trial_id) for t in trials], record.get("study_system_attrs"))

    def restore(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Rebuild the study from the records of committed parts, in order (called once, on resume).

        Also makes the journal agree with them: it is rewritten when it holds other trials. Returns the
        number of trials restored.
        """
        trials: list[FrozenTrial] = []
        attrs: dict[str, Any] = {}
        dists = self.space.distributions
        for rec in records:
            attrs.update(rec.get("study_system_attrs") or {})
            start = _dt(rec.get("datetime_start")) or datetime.now()
            end = _dt(rec.get("datetime_complete")) or start
            sys_cols = rec["system_attrs"]
            for i, number in enumerate(rec["number"]):
                params = {k: dists[k].to_external_repr(v[i]) for k, v in rec["params"].items()}
                system = {k: v[i] for k, v in sys_cols.items() if v[i] is not None}
                trials.append(FrozenTrial(
                    number=number, state=TrialState.COMPLETE, value=None, values=rec["values"][i],
                    datetime_start=start, datetime_complete=end, params=params,
                    distributions={k: dists[k] for k in params}, user_attrs={}, system_attrs=system,
                    intermediate_values={}, trial_id=number,
                ))
        numbers = [t.number for t in trials]
        if numbers != list(range(len(trials))):
            raise RuntimeError("the committed parts do not hold trials 0..n-1 in order")
        for key, value in attrs.items():
            self.study._storage.set_study_system_attr(self.study._study_id, key, value)
        self.study.add_trials(trials)
        self._study_attrs_seen = dict(attrs)
        self._generations = GenerationIndex()
        self._generations.add(self.study._storage.get_all_trials(self.study._study_id, deepcopy=False))
        names = list(self.space.distributions)
        self._seen = {tuple(t.params[k] for k in names) for t in trials}
        if self.journal is not None:
            stored, stored_attrs = self.journal.load()
            same = len(stored) == len(trials) and all(
                a.number == b.number and a.params == b.params and a.values == b.values for a, b in zip(stored, trials))
            if not same or stored_attrs != attrs:
                self.journal.rewrite(trials, attrs)
        return len(trials)


_MISSING = object()

try:  # study.tell without the deep copy of the finished trial it returns (unused here)
    from optuna.study._tell import _tell_with_warning

    def _tell(study, trial, values) -> None:
        _tell_with_warning(study, trial, values, suppress_warning=True)
except ImportError:  # a future Optuna: the public call does the same
    def _tell(study, trial, values) -> None:
        study.tell(trial, values)


def _dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def silence_optuna() -> None:
    """Keep Optuna quiet (per-trial INFO lines, experimental warnings); called once per run."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_propagation()
    logging.getLogger("optuna").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

