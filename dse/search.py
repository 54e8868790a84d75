"""The outer search: an Optuna study asked and told in whole batches.

:class:`Searcher` owns the study. Each batch, :mod:`dse.sweep` calls, in this order:

1. :meth:`Searcher.ask` -- a fresh sampler for the batch (seeded from the run's seed and the batch
   index, so seeded runs and resumed runs propose the same designs). NSGA-II makes a whole generation in
   one call (``population_size`` = batch size; its trials are created in one storage call); the other
   samplers are asked once per design, as ``study.ask`` and ``Trial.suggest_*`` ask them.
2. :meth:`Searcher.tell` -- after the batch was scored: every trial's constraint values (stored as
   ``trial.set_constraint`` stores them, <= 0 feasible; an infeasible design is told, never failed) and
   its objective values, as ``study.tell`` does (the sampler's ``after_trial``, then the trial finished;
   a batch sampler's ``after_batch`` once instead).
3. :meth:`Searcher.record` -- the batch's finished trials as plain JSON, by column (stored with the
   batch's Parquet part, which is the commit point); the run's Optuna journal
   (``optuna.storages.JournalStorage`` file) is appended from it, with one write and fsync, where
   :meth:`Searcher.journal_target` says (the engine does it on the pool's writer, after the part).

On ``--resume``, :meth:`Searcher.restore` rebuilds the study from the records of the committed parts.

Optuna's samplers do per-trial work that grows with the study; :mod:`dse.samplers` keeps their
algorithms and makes a batch cheap. The live study runs on in-memory storage
(:class:`dse.study_storage.BatchInMemoryStorage`); the journal (:class:`dse.store.JournalMirror`) is
written from the batches' records.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import FrozenTrial, TrialState

from dse.samplers import GenerationIndex, make_sampler
from dse.space import Space
from dse.spec import SearchSettings
from dse.store import STUDY_NAME, JournalMirror, JournalTarget, internal_column
from dse.study_storage import BatchInMemoryStorage, copy_trial

__all__ = ["Searcher", "silence_optuna"]

optuna.logging.set_verbosity(optuna.logging.WARNING)




class Searcher:
    """An Optuna study over a :class:`~dse.space.Space`, driven in batches (see the module doc)."""

    def __init__(self, space: Space, settings: SearchSettings, directions: Sequence[str],
                 journal_path: str | Path | None = None):
        self.space = space
        self.settings = settings
        self.directions = [StudyDirection.MINIMIZE if d == "min" else StudyDirection.MAXIMIZE for d in directions]
        self.study = optuna.create_study(storage=BatchInMemoryStorage(), directions=self.directions,
                                         study_name=STUDY_NAME, sampler=RandomSampler(seed=settings.seed))
        self.journal = JournalMirror(journal_path, self.directions, space.distributions) if journal_path is not None else None
        self._grid_sampler: BaseSampler | None = None
        self._study_attrs_seen: dict[str, Any] = {}
        self._generations = GenerationIndex()
        dists = space.distributions
        #: the value of each single-valued distribution; the others vary
        self._single = {k: optuna.distributions._get_single_value(d) for k, d in dists.items() if d.single()}
        self._varying = [k for k in dists if k not in self._single]
        #: every design asked in this run, as a tuple of its varying parameters' values (NSGA-II's
        #: duplicate elimination compares children with these)
        self._seen: set[tuple] = set()

    @property
    def n_trials(self) -> int:
        """Trials asked so far (finished ones, between batches)."""
        return len(self.study._storage.get_all_trials(self.study._study_id, deepcopy=False))

    def ask(self, n: int, batch_index: int) -> tuple[list[FrozenTrial], list[dict[str, Any]]]:
        """Ask ``n`` trials with the batch's sampler; returns the running trials and their parameters.

        A sampler that makes a whole batch at once (``sample_batch``: NSGA-II, a generation) is asked
        once and its trials are created in one storage call. Any other sampler is asked as
        ``Trial.suggest_*`` would ask it, one trial at a time: ``study.ask()`` (which runs the sampler's
        ``before_trial``), then each parameter from ``sample_relative`` where it proposes a value inside
        the distribution, else from ``sample_independent``; single-valued distributions give their one
        value. Parameters are stored in one write per trial instead of one per parameter.
        """
        if self.settings.sampler == "grid":
            if self._grid_sampler is None:
                self._grid_sampler = make_sampler(self.settings, self.space, batch_index, self.directions)
            sampler = self._grid_sampler
        else:
            sampler = make_sampler(self.settings, self.space, batch_index, self.directions, self._generations, self._seen)
        study = self.study
        study.sampler = sampler
        study._thread_local.cached_all_trials = None  # as study.ask does: the study is about to grow
        batch = getattr(sampler, "sample_batch", None)
        made = batch(study, n) if batch is not None else None
        if made is not None:
            designs, attrs = made
            params = [{**self._single, **d} for d in designs]
            trials = study._storage.create_running_trials(study._study_id, params, self.space.distributions, attrs)
            # (the batch sampler added its designs to the seen set as it made them)
        else:
            trials, params = self._ask_one_by_one(sampler, n)
            self._seen.update(tuple(p[k] for k in self._varying) for p in params)
        return trials, params

    def _ask_one_by_one(self, sampler: BaseSampler, n: int) -> tuple[list[FrozenTrial], list[dict[str, Any]]]:
        study = self.study
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
                if name in self._single:
                    value = self._single[name]
                elif name in relative and name in space and dist._contains(dist.to_internal_repr(relative[name])):
                    value = relative[name]
                else:
                    value = sampler.sample_independent(study, storage.get_trial(trial._trial_id), name, dist)
                    if not dist._contains(dist.to_internal_repr(value)):
                        raise ValueError(f"sampler proposed {value!r} outside {name}'s distribution")
                p[name] = value
            storage.set_trial_params(trial._trial_id, p, dists)
            trials.append(storage.get_trial(trial._trial_id))
            params.append(p)
        return trials, params

    def tell(self, trials: Sequence[FrozenTrial], values: np.ndarray, constraints: Mapping[str, np.ndarray]) -> None:
        """Tell every trial of a batch: its constraint values (<= 0 feasible, stored as
        ``trial.set_constraint`` stores them) and objective values, as ``study.tell`` does (the sampler's
        ``after_trial``, then the trial finished), in one storage write per trial.

        ``values`` is (n, n_objectives) and may hold inf; NaN means the model gave no value and is told as
        the worst value of that direction.
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
        study._thread_local.cached_all_trials = None
        storage, sampler = study._storage, study.sampler
        keys = [f"{_CONSTRAINTS_KEY}:{name}" for name in names]  # what Trial.set_constraint stores
        finished = []
        now = datetime.now()  # the batch is told at once: one completion time
        after_batch = getattr(sampler, "after_batch", None)  # a batch sampler's after_trial is once per batch
        if after_batch is not None:  # the whole batch in one storage call
            finished = storage.complete_trials([t._trial_id for t in trials], vals,
                                               [dict(zip(keys, c)) for c in cons_l], now)
            after_batch(study)
        else:
            for i, trial in enumerate(trials):
                attrs = dict(zip(keys, cons_l[i]))
                current = storage.get_trial(trial._trial_id)
                if current.state != TrialState.RUNNING:
                    raise ValueError(f"cannot tell trial {current.number}: it is {current.state.name}")
                sampler.after_trial(study, _with_attrs(current, attrs), TrialState.COMPLETE, vals[i])
                finished.append(storage.complete_trial(trial._trial_id, vals[i], attrs, now))
        # each trial's NSGA-II penalty, as penalty_of reads it back from the stored constraints
        self._generations.add(finished, np.maximum(cons, 0.0).sum(axis=1) if names else None)

    def record(self, trials: Sequence[FrozenTrial]) -> dict[str, Any]:
        """JSON-able record of a told batch, by column: each trial's number, parameters (Optuna's internal
        representation), values and system attributes, plus the study system attributes new since the
        last record (NSGA-II parents) and the batch's start and end (each trial's start too, where they
        differ: trials asked one by one). Stored with the batch's Parquet part, so that the part alone
        rebuilds its trials (:meth:`restore`); the journal is appended from it (:meth:`journal_target`)."""
        storage = self.study._storage
        frozen = [storage.get_trial(t._trial_id) for t in trials]
        attrs = storage.get_study_system_attrs(self.study._study_id)
        new_attrs = {k: v for k, v in attrs.items() if self._study_attrs_seen.get(k, _MISSING) != v}
        self._study_attrs_seen.update(new_attrs)
        dists = self.space.distributions
        first = frozen[0].system_attrs if frozen else {}
        if all(t.system_attrs.keys() == first.keys() for t in frozen):  # a batch's trials share their keys
            keys = list(first)
        else:
            keys = sorted({k for t in frozen for k in t.system_attrs})
        starts = [t.datetime_start for t in frozen if t.datetime_start]
        ends = [t.datetime_complete for t in frozen if t.datetime_complete]
        out = {
            "number": [t.number for t in frozen],
            "params": {k: internal_column(d, [t.params[k] for t in frozen]) for k, d in dists.items()},
            "values": [t.values for t in frozen],
            "system_attrs": {k: [t.system_attrs.get(k) for t in frozen] for k in keys},
            "study_system_attrs": new_attrs,
            "datetime_start": min(starts).isoformat() if starts else None,
            "datetime_complete": max(ends).isoformat() if ends else None,
        }
        if len(starts) == len(frozen) and len(set(starts)) > 1:
            out["datetime_starts"] = [s.isoformat() for s in starts]
        return out

    def journal_target(self) -> JournalTarget | None:
        """Where the next committed batch goes in the run's journal (None: no journal); the batch's record
        is appended there after its Parquet part (:func:`dse.store.write_batch`), then
        :meth:`journal_appended` is called with the journal's new size."""
        return self.journal.target() if self.journal is not None else None

    def journal_appended(self, offset: int | None) -> None:
        """Called once per committed batch with the journal's size after it."""
        if self.journal is not None and offset is not None:
            self.journal.offset = offset

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
            each_start = [_dt(x) for x in rec["datetime_starts"]] if rec.get("datetime_starts") else None
            for i, number in enumerate(rec["number"]):
                params = {k: dists[k].to_external_repr(v[i]) for k, v in rec["params"].items()}
                system = {k: v[i] for k, v in sys_cols.items() if v[i] is not None}
                trials.append(FrozenTrial(
                    number=number, state=TrialState.COMPLETE, value=None, values=rec["values"][i],
                    datetime_start=each_start[i] if each_start else start, datetime_complete=end, params=params,
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
        self._seen = {tuple(t.params[k] for k in self._varying) for t in trials}
        if self.journal is not None:
            stored, stored_attrs = self.journal.load()
            same = len(stored) == len(trials) and all(
                a.number == b.number and a.params == b.params and a.values == b.values for a, b in zip(stored, trials))
            if not same or stored_attrs != attrs:
                self.journal.rewrite(records)
        return len(trials)


_MISSING = object()

def _with_attrs(trial: FrozenTrial, attrs: Mapping[str, Any]) -> FrozenTrial:
    """A copy of a running trial with system attributes added (what a sampler's ``after_trial`` sees)."""
    out = copy_trial(trial)
    out.system_attrs = {**trial.system_attrs, **attrs}
    return out


def _dt(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def silence_optuna() -> None:
    """Keep Optuna quiet (per-trial INFO lines, experimental warnings); called once per run."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_propagation()
    logging.getLogger("optuna").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

