"""NSGA-II's variation for a whole generation at once: tournaments, crossover, mutation, new designs only.

:class:`VectorizedChildGeneration` makes the children of a generation in numpy; :func:`sample_uniform` is
a uniform draw from one distribution, as Optuna's RandomSampler makes it (the first generation, mutated
categories, and :func:`uniform_params` for a few designs drawn before a run starts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial

from dse.study.samplers.generations import GenerationIndex, penalties

__all__ = ["VectorizedChildGeneration", "sample_uniform", "uniform_params"]


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
                 index: GenerationIndex | None = None) -> None:
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

    def __call__(self, study: Study, search_space: dict[str, BaseDistribution], parents: list[FrozenTrial]) -> dict[str, Any]:
        key = (id(parents), len(parents), tuple(search_space))  # the sampler caches one list per generation
        if key != self._key or not self._children:
            self._key = key
            self._children = self.generate(search_space, parents, self._size)
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

    def generate(self, space: dict[str, BaseDistribution], parents: list[FrozenTrial], size: int) -> list[dict]:
        """``size`` new children of ``parents`` (none seen before, unless the space is nearly exhausted), in
        reverse order: :meth:`__call__` hands them out with ``pop()``."""
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
        else:  # the space is (nearly) exhausted: accept the last draw's repeats, and record its new designs as
            # seen like every other asked design (a resumed run's seen set is every stored trial's design)
            seen.update(tuple(row) for row in rows)
            out.extend(rows)
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




def uniform_params(distributions: Mapping[str, BaseDistribution], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` designs drawn uniformly (:func:`sample_uniform`, one stream seeded with ``seed``)."""
    rng = np.random.RandomState(seed)
    return [{name: sample_uniform(d, rng) for name, d in distributions.items()} for _ in range(n)]
