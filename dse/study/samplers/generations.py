"""NSGA-II's bookkeeping of a run: finished trials by generation, their constraint penalties, and survival.

:class:`GenerationIndex` is kept up to date by :class:`dse.study.Searcher` as trials are told and answers
what ``BaseGASampler`` answers by scanning every trial of the study; :class:`EliteSelection` is NSGA-II's
survival as Optuna computes it, reading each trial's penalty once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.study.internals import crowding_distance_sort, fast_non_domination_rank, trial_id

__all__ = ["penalty_of", "penalties", "GenerationIndex", "EliteSelection"]


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


class EliteSelection:
    """NSGA-II survival (Deb et al. 2002, Sec. III): Optuna's elite population selection, reading each
    trial's constraints once.

    Called once per generation with the previous generation and its parents. The selection is Optuna's:
    non-dominated ranks under constrained domination (:func:`fast_non_domination_rank` with the sum of
    positive violations as penalty), whole fronts while they fit, then the last front by crowding
    distance. Optuna's own strategy parses every trial's constraints from its system attributes three
    times (and checks them for NaN one trial at a time); here each trial's penalty is read once, when it
    is told (:class:`GenerationIndex`).
    """

    def __init__(self, population_size: int, index: GenerationIndex | None = None) -> None:
        self.population_size = population_size
        self._index = index

    def __call__(self, study: Study, population: list[FrozenTrial]) -> list[FrozenTrial]:
        if not population:
            return []
        penalty = penalties(population, self._index)
        F = np.array([t.values for t in population], dtype=np.float64)
        F *= np.array([-1.0 if d == StudyDirection.MAXIMIZE else 1.0 for d in study.directions])
        ranks = fast_non_domination_rank(F, penalty=penalty)
        elite: list[FrozenTrial] = []
        for rank in range(int(ranks.max()) + 1):
            individuals = [population[i] for i in np.flatnonzero(ranks == rank)]
            if len(elite) + len(individuals) < self.population_size:
                elite.extend(individuals)
            else:
                crowding_distance_sort(individuals)
                elite.extend(individuals[: self.population_size - len(elite)])
                break
        return elite


class GenerationIndex:
    """Finished trials by NSGA-II generation (``key``: the trial system attribute holding it), kept up to
    date by :class:`dse.study.Searcher` as trials are told.

    ``BaseGASampler`` answers "which generation is this trial in" and "which trials form generation g" by
    scanning every trial of the study at each generation; this index gives the same answers at once.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self._by_generation: dict[int, list[FrozenTrial]] = {}
        self._by_id: dict[int, FrozenTrial] = {}
        self._penalty: dict[int, float | None] = {}

    def add(self, finished: Sequence[FrozenTrial], penalty: np.ndarray | None = None) -> None:
        """Called after every tell (and on restore) with the finished trials and, from a tell, their
        penalties (:func:`penalty_of`, computed for the whole batch at once; None: no constraints told)."""
        key = self.key
        each = penalty.tolist() if penalty is not None else [None] * len(finished)
        for t, p in zip(finished, each):
            g = t.system_attrs.get(key)
            if g is not None and t.state == TrialState.COMPLETE:
                self._by_generation.setdefault(g, []).append(t)
                self._by_id[trial_id(t)] = t
                self._penalty[trial_id(t)] = p if penalty is not None else penalty_of(t)

    def penalties(self, trials: Iterable[FrozenTrial]) -> list[float | None] | None:
        """Each trial's :func:`penalty_of`, computed once when it was added (None if one is unknown)."""
        try:
            return [self._penalty[trial_id(t)] for t in trials]
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
        """The finished trials of a generation, in the order they were told."""
        return list(self._by_generation.get(generation, []))
