"""The outer search: an Optuna study asked and told in whole batches.

:class:`Searcher` owns the study. Each batch, the sweep calls, in this order:

1. :meth:`Searcher.ask` -- a fresh sampler for the batch (seeded from the run's seed and the batch
   index, so seeded runs and resumed runs propose the same designs). NSGA-II makes a whole generation in
   one call (``population_size`` = batch size; its trials are created in one storage call); the other
   samplers are asked once per design, by ``study.ask(fixed_distributions=...)``.
2. :meth:`Searcher.tell` -- after the batch was scored: every trial's constraint values (<= 0 feasible;
   an infeasible design is told, never failed) and its objective values. NSGA-II's batch is finished in
   one storage call, constraints stored as ``Trial.set_constraint`` stores them, and its sampler's
   ``after_batch`` runs once; any other sampler's trials are told one by one with
   ``Trial.set_constraint`` and ``study.tell``.
3. :meth:`Searcher.record` -- the batch's finished trials as plain JSON, by column
   (:mod:`dse.study.records`), which the sweep stores with the batch's Parquet part (the commit point) and
   appends to the run's Optuna journal (:mod:`dse.study.journal`).

On ``--resume``, :meth:`Searcher.restore` rebuilds the study from the records of the committed parts.

Optuna's samplers do per-trial work that grows with the study; :mod:`dse.study.samplers` keeps their
algorithms and makes a batch cheap. The live study runs on in-memory storage
(:class:`dse.study.internals.BatchInMemoryStorage`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from dse.space import Space
from dse.spec import SearchSettings
from dse.study.internals import (
    BatchInMemoryStorage,
    constraint_key,
    forget_cached_trials,
    single_value,
    storage,
    study_id,
    study_system_attrs,
    trial_id,
)
from dse.study.records import STUDY_NAME, batch_record, study_attrs_of, trials_from_records
from dse.study.samplers import GENERATION_KEY, GenerationIndex, make_sampler

__all__ = ["Searcher", "silence_optuna"]

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: a trial as :meth:`Searcher.ask` returns it: running, then told
AskedTrial = FrozenTrial | optuna.Trial


class Searcher:
    """An Optuna study over a :class:`~dse.space.Space`, driven in batches (see the module doc)."""

    def __init__(self, space: Space, settings: SearchSettings, directions: Sequence[str]) -> None:
        self.space = space
        self.settings = settings
        self.directions = [StudyDirection.MINIMIZE if d == "min" else StudyDirection.MAXIMIZE for d in directions]
        self.study = optuna.create_study(storage=BatchInMemoryStorage(), directions=self.directions,
                                         study_name=STUDY_NAME, sampler=RandomSampler(seed=settings.seed))
        self._grid_sampler: BaseSampler | None = None
        self._study_attrs_seen: dict[str, Any] = {}
        self._generations = GenerationIndex(GENERATION_KEY)
        dists = space.distributions
        #: the value of each single-valued distribution; the others vary
        self._single = {k: single_value(d) for k, d in dists.items() if d.single()}
        self._varying = [k for k in dists if k not in self._single]
        #: every design asked in this run, as a tuple of its varying parameters' values (NSGA-II's
        #: duplicate elimination compares children with these)
        self._seen: set[tuple] = set()

    @property
    def n_trials(self) -> int:
        """Trials asked so far (finished ones, between batches)."""
        return len(self.study.get_trials(deepcopy=False))

    def ask(self, n: int, batch_index: int) -> tuple[list[AskedTrial], list[dict[str, Any]]]:
        """Ask ``n`` trials with the batch's sampler; returns the running trials and their parameters.

        A sampler that makes a whole batch at once (``sample_batch``: NSGA-II, a generation) is asked
        once and its trials are created in one storage call. Any other sampler is asked one trial at a
        time, ``study.ask(fixed_distributions=...)``: its ``before_trial``, then each parameter from
        ``sample_relative`` where it proposes a value inside the distribution, else from
        ``sample_independent``; single-valued distributions give their one value.
        """
        if self.settings.sampler == "grid":
            if self._grid_sampler is None:
                self._grid_sampler = make_sampler(self.settings, self.space, batch_index, self.directions)
            sampler = self._grid_sampler
        else:
            sampler = make_sampler(self.settings, self.space, batch_index, self.directions, self._generations, self._seen)
        study = self.study
        study.sampler = sampler
        forget_cached_trials(study)  # as study.ask does: the study is about to grow
        batch = getattr(sampler, "sample_batch", None)
        made = batch(study, n) if batch is not None else None
        if made is not None:
            designs, attrs = made
            params = [{**self._single, **d} for d in designs]
            trials = storage(study).create_running_trials(study_id(study), params, self.space.distributions, attrs)
            # (the batch sampler added its designs to the seen set as it made them)
            return trials, params
        asked = [study.ask(fixed_distributions=self.space.distributions) for _ in range(n)]
        params = [trial.params for trial in asked]
        self._seen.update(tuple(p[k] for k in self._varying) for p in params)
        return asked, params

    def tell(self, trials: Sequence[AskedTrial], values: np.ndarray, constraints: Mapping[str, np.ndarray]) -> None:
        """Tell every trial of a batch its constraint values (<= 0 feasible) and objective values.

        ``values`` is (n, n_objectives) and may hold inf; NaN means the model gave no value and is told as
        the worst value of that direction (a NaN constraint as violated).
        """
        values = np.asarray(values, dtype=np.float64).reshape(len(trials), -1)
        if values.shape[1] != len(self.directions):
            raise ValueError(f"{values.shape[1]} objective values per trial; the study has {len(self.directions)}")
        worst = np.array([np.inf if d == StudyDirection.MINIMIZE else -np.inf for d in self.directions])
        values = np.where(np.isnan(values), worst, values)
        names = list(constraints)
        cons = np.column_stack([np.asarray(constraints[k], dtype=np.float64) for k in names]) if names else np.zeros((len(trials), 0))
        cons = np.where(np.isnan(cons), np.inf, cons)
        cons = np.minimum(cons, 1e300)  # Optuna sums violations: keep them finite
        vals = values.tolist()
        cons_l = cons.tolist()
        study = self.study
        forget_cached_trials(study)  # as study.tell does
        after_batch = getattr(study.sampler, "after_batch", None)  # a batch sampler's after_trial, once per batch
        if after_batch is not None:  # the whole batch in one storage call, at one completion time
            keys = [constraint_key(name) for name in names]
            finished = storage(study).complete_trials([trial_id(t) for t in trials], vals,
                                                      [dict(zip(keys, c)) for c in cons_l], datetime.now())
            after_batch(study)
        else:
            finished = []
            for trial, v, c in zip(trials, vals, cons_l):
                for name, value in zip(names, c):
                    trial.set_constraint(name, value)
                finished.append(study.tell(trial, v))
        # each trial's NSGA-II penalty, as penalty_of reads it back from the stored constraints
        self._generations.add(finished, np.maximum(cons, 0.0).sum(axis=1) if names else None)

    def record(self, trials: Sequence[AskedTrial]) -> dict[str, Any]:
        """The record of a told batch (:func:`dse.study.records.batch_record`), with the study system
        attributes new since the last record. Stored with the batch's Parquet part, so that the part
        alone rebuilds its trials (:meth:`restore`)."""
        frozen = [storage(self.study).get_trial(trial_id(t)) for t in trials]
        attrs = study_system_attrs(self.study)
        new_attrs = {k: v for k, v in attrs.items() if self._study_attrs_seen.get(k, _MISSING) != v}
        self._study_attrs_seen.update(new_attrs)
        return batch_record(frozen, new_attrs, self.space.distributions)

    def restore(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Rebuild the study from the records of committed parts, in order (called once, on resume).
        Returns the number of trials restored."""
        trials = trials_from_records(records, self.space.distributions)
        if [t.number for t in trials] != list(range(len(trials))):
            raise RuntimeError("the committed parts do not hold trials 0..n-1 in order")
        attrs = study_attrs_of(records)
        for key, value in attrs.items():
            storage(self.study).set_study_system_attr(study_id(self.study), key, value)
        self.study.add_trials(trials)
        self._study_attrs_seen = dict(attrs)
        self._generations = GenerationIndex(GENERATION_KEY)
        self._generations.add(self.study.get_trials(deepcopy=False))
        self._seen = {tuple(t.params[k] for k in self._varying) for t in trials}
        return len(trials)


_MISSING = object()


def silence_optuna() -> None:
    """Keep Optuna quiet (per-trial INFO lines, experimental warnings); called once per run."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_propagation()
    logging.getLogger("optuna").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
