"""NSGA-II for whole generations: Optuna's NSGA-II selection, children made in one vectorized step.

:class:`BatchNSGAIISampler` computes the generation and its parents once per batch and makes all children
of a generation at once (:class:`VectorizedChildGeneration`: binary tournaments under constrained
domination, uniform crossover, polynomial mutation for numbers, duplicate elimination).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import NSGAIISampler
from optuna.samplers.nsgaii._elite_population_selection_strategy import (
    NSGAIIElitePopulationSelectionStrategy,
    _crowding_distance_sort,
)
from optuna.study._multi_objective import _fast_non_domination_rank
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState


__all__ = ["BatchNSGAIISampler", "VectorizedChildGeneration", "EliteSelection", "GenerationIndex", "sample_uniform"]


def penalty_of(trial: FrozenTrial) -> float | None:
    """The constraint penalty of a finished trial: the sum of its positive constraint values (Optuna's
    constrained domination, Deb et al. 2002 Sec. IV-A); None when it has no constraints."""
    constraints = trial.constraints
    if not constraints:
        return None
    values = np.array(list(constraints.values()), dtype=np.float64)
    if np.isnan(values).any():
        raise ValueError("NaN is not acceptable as constraint value.")
    return float(np.maximum(values, 0.0).sum())


def penalties(trials: Sequence[FrozenTrial], index: GenerationIndex | None = None) -> np.ndarray | None:
    """The penalty of each trial (:func:`penalty_of`, read from ``index`` when it holds them all), or None
    when no trial has constraints (Optuna: unconstrained domination). Called once per generation."""
    known = index.penalties(trials) if index is not None else None
    each = known if known is not None else [penalty_of(t) for t in trials]
    if all(p is None for p in each):
        return None
    if any(p is None for p in each):
        raise ValueError("every trial of a generation needs the same constraints")
    return np.array(each, dtype=np.float64)


class EliteSelection(NSGAIIElitePopulationSelectionStrategy):
    """NSGA-II survival (Deb et al. 2002, Sec. III): Optuna's elite population selection, reading each
    trial's constraints once.

    Called once per generation with the previous generation and its parents. The selection is Optuna's:
    non-dominated ranks under constrained domination (``_fast_non_domination_rank`` with the sum of
    positive violations as penalty), whole fronts while they fit, then the last front by crowding
    distance. Optuna's own strategy parses every trial's constraints from its system attributes three
    times (and checks them for NaN one trial at a time); here each trial's penalty is read once, when it
    is told (:class:`GenerationIndex`).
    """

    def __init__(self, population_size: int, index: GenerationIndex | None = None):
        super().__init__(population_size=population_size)
        self._index = index

    def __call__(self, study, population: list[FrozenTrial]) -> list[FrozenTrial]:
        if not population:
            return []
        penalty = penalties(population, self._index)
        F = np.array([t.values for t in population], dtype=np.float64)
        F *= np.array([-1.0 if d == StudyDirection.MAXIMIZE else 1.0 for d in study.directions])
        ranks = _fast_non_domination_rank(F, penalty=penalty)
        elite: list[FrozenTrial] = []
        for rank in range(int(ranks.max()) + 1):
            individuals = [population[i] for i in np.flatnonzero(ranks == rank)]
            if len(elite) + len(individuals) < self._population_size:
                elite.extend(individuals)
            else:
                _crowding_distance_sort(individuals)
                elite.extend(individuals[: self._population_size - len(elite)])
                break
        return elite


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
                 seen: set | None = None, max_tries: int = 20, eta: float | None = 20.0, eta_discrete: float = 3.0,
                 index: GenerationIndex | None = None):
        self._index = index
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
            child = {name: sample_uniform(dist, self._rng) for name, dist in search_space.items()}
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
            if isinstance(dist, CategoricalDistribution):  # the few mutated cells: a uniform choice each
                cells = np.flatnonzero(mutate | missing)  # (the draws sample_uniform makes, in one call)
                chosen[cells] = _as_objects(dist.choices)[self._rng.randint(len(dist.choices), size=len(cells))]
            elif self._eta is None:
                for i in np.flatnonzero(mutate | missing):
                    chosen[i] = sample_uniform(dist, self._rng)
            else:
                for i in np.flatnonzero(missing):
                    chosen[i] = sample_uniform(dist, self._rng)
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
        penalty = penalties(parents, self._index)
        penalty = np.zeros(len(parents)) if penalty is None else penalty
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
    """Which cells of an object column hold None (a parameter a parent lacks)."""
    return np.equal(values, None)


def _as_objects(choices: Sequence[Any]) -> np.ndarray:
    """A categorical distribution's choices as a 1-D object array (to index with many draws at once)."""
    out = np.empty(len(choices), dtype=object)
    out[:] = list(choices)
    return out


def _draw_without(exclude: np.ndarray, n: int, rng: np.random.RandomState) -> np.ndarray:
    """One index per entry of ``exclude``, uniform over ``range(n)`` without ``exclude[i]``."""
    draw = rng.randint(n - 1, size=len(exclude))
    return np.where(draw >= exclude, draw + 1, draw)


def sample_uniform(dist: BaseDistribution, rng: np.random.RandomState) -> Any:
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
        self._penalty: dict[int, float | None] = {}

    def add(self, finished: Sequence[FrozenTrial], penalty: np.ndarray | None = None) -> None:
        """Called after every tell (and on restore) with the finished trials and, from a tell, their
        penalties (:func:`penalty_of`, computed for the whole batch at once; None: no constraints told)."""
        key = BatchNSGAIISampler._get_generation_key()
        each = penalty.tolist() if penalty is not None else [None] * len(finished)
        for t, p in zip(finished, each):
            g = t.system_attrs.get(key)
            if g is not None and t.state == TrialState.COMPLETE:
                self._by_generation.setdefault(g, []).append(t)
                self._by_id[t._trial_id] = t
                self._penalty[t._trial_id] = p if penalty is not None else penalty_of(t)

    def penalties(self, trials: Iterable[FrozenTrial]) -> list[float | None] | None:
        """Each trial's :func:`penalty_of`, computed once when it was added (None if one is unknown)."""
        try:
            return [self._penalty[t._trial_id] for t in trials]
        except KeyError:
            return None

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

    def sample_batch(self, study, n: int) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        """Called once per batch by :meth:`dse.search.Searcher.ask`, instead of ``n`` per-trial asks: the
        varying parameters of ``n`` new designs and the system attributes every one of their trials gets
        (its generation). The same designs, in the same order, as ``n`` calls of :meth:`sample_relative`
        would make. None (ask trial by trial) when the caller keeps no :class:`GenerationIndex`."""
        if self._generations is None:
            return None
        latest, count = self._generations.latest()  # Optuna's rule (BaseGASampler.get_trial_generation)
        generation = latest if count < self._population_size else latest + 1
        self._generation = generation
        parents = self.get_parent_population(study, generation) if self._space else []
        if parents:
            designs = self._children._generate(self._space, parents, n)[::-1]
        else:
            designs = [self._children.random(self._space) for _ in range(n)]
        return designs, {self._get_generation_key(): generation}

    def sample_independent(self, study, trial, param_name, param_distribution):
        """Called for the first generation and for mutated parameters: a uniform draw, as Optuna's
        RandomSampler makes it (log scale for log distributions, steps respected), without its per-call
        search-space transform."""
        return sample_uniform(param_distribution, self._uniform)

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
        """Called once per generation: the parents of a generation never change once chosen (Optuna caches
        their ids in the study; the index turns ids into trials without a scan of the study)."""
        if generation not in self._parents:
            parents = None
            if self._generations is not None and generation > 0:
                key = self._get_parent_cache_key_prefix() + str(generation)
                ids = study._storage.get_study_system_attrs(study._study_id).get(key)
                parents = self._generations.trials(ids) if ids is not None else None
            if parents is None:
                parents = super().get_parent_population(study, generation)
            # in study order, as Optuna returns them from its cache: the first selection (elite order) and
            # a lookup after a resume then give the same children
            self._parents[generation] = sorted(parents, key=lambda t: t.number)
        return self._parents[generation]

    def after_batch(self, study) -> None:
        """Called once per told batch by :meth:`dse.search.Searcher.tell`, in place of ``after_trial`` per
        trial: NSGA-II's after-trial strategy only runs a ``constraints_func``, which this sampler never
        has (the model's constraints are told as system attributes), so only the generation is reset."""
        self._generation = None
        self._generations = None  # the index is stale now

    def after_trial(self, study, trial, state, values) -> None:
        """Called by ``study.tell``: the next ask recomputes the generation."""
        self.after_batch(study)
        super().after_trial(study, trial, state, values)
