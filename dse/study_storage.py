"""Optuna in-memory storage tuned for a study driven in whole batches."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import InMemoryStorage
from optuna.trial import FrozenTrial, TrialState

__all__ = ["BatchInMemoryStorage", "copy_trial"]


def copy_trial(trial: FrozenTrial) -> FrozenTrial:
    """``copy.copy(trial)`` (a shallow copy, as Optuna's storages make before changing a trial), without
    the generic copy protocol's cost (about 3 µs a trial, paid a few times per trial per batch)."""
    out = FrozenTrial.__new__(FrozenTrial)
    out.__dict__.update(trial.__dict__)
    return out


class BatchInMemoryStorage(InMemoryStorage):
    """In-memory storage for a study driven in batches.

    The study never holds WAITING trials (the engine never enqueues): ``study.ask`` scans every trial for
    one, and a counter answers at once. The parameters of a trial are written in one step
    (:meth:`set_trial_params`), as the per-parameter calls would, a whole batch of running trials is
    created in one call (:meth:`create_running_trials`) and finished, constraints included, in one call
    (:meth:`complete_trials`; :meth:`complete_trial` for one).
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


    def create_running_trials(self, study_id: int, params: Sequence[Mapping[str, Any]],
                              distributions: Mapping[str, BaseDistribution],
                              system_attrs: Mapping[str, Any]) -> list[FrozenTrial]:
        """A batch of RUNNING trials with their parameters (external values) and the same system attributes:
        what ``create_new_trial`` then ``set_trial_params`` per trial store, without a deep copy of a
        template per trial. Returns the stored trials (read their ``number`` and ``_trial_id``)."""
        now = datetime.now()
        dists = dict(distributions)
        with self._lock:
            self._check_study_id(study_id)
            study = self._studies[study_id]
            known = study.param_distribution
            for name, dist in dists.items():
                if name in known and known[name] is not dist:
                    optuna.distributions.check_distribution_compatibility(known[name], dist)
                known[name] = dist
            created = []
            for p in params:
                self._max_trial_id += 1
                trial = FrozenTrial(number=len(study.trials), state=TrialState.RUNNING, value=None,
                                    datetime_start=now, datetime_complete=None, params=dict(p),
                                    distributions=dists, user_attrs={}, system_attrs=dict(system_attrs),
                                    intermediate_values={}, trial_id=self._max_trial_id)
                self._trial_id_to_study_id_and_number[trial._trial_id] = (study_id, trial.number)
                study.trials.append(trial)
                created.append(trial)
            return created

    def complete_trial(self, trial_id: int, values: Sequence[float], system_attrs: Mapping[str, Any],
                       when: datetime | None = None) -> FrozenTrial:
        """Finish a running trial in one write: its system attributes (constraints), values and state
        COMPLETE, as ``set_trial_system_attr`` per key then ``set_trial_state_values`` would (completed at
        ``when``, default now). Returns the finished trial."""
        return self.complete_trials([trial_id], [values], [system_attrs], when)[0]

    def complete_trials(self, trial_ids: Sequence[int], values: Sequence[Sequence[float]],
                        system_attrs: Sequence[Mapping[str, Any]], when: datetime | None = None) -> list[FrozenTrial]:
        """Finish a batch of running trials in one call, at one time ``when`` (default now): each one's
        system attributes (constraints), values and state COMPLETE, as ``set_trial_system_attr`` per key then
        ``set_trial_state_values`` would. Checked first: a trial that is not RUNNING raises ValueError and
        none is finished. Returns the finished trials."""
        when = when or datetime.now()
        with self._lock:
            current = [self._get_trial(i) for i in trial_ids]
            for t in current:
                if t.state != TrialState.RUNNING:
                    raise ValueError(f"cannot tell trial {t.number}: it is {t.state.name}")
            finished = []
            for trial_id, t, v, attrs in zip(trial_ids, current, values, system_attrs):
                trial = copy_trial(t)
                trial.system_attrs = {**t.system_attrs, **attrs}
                trial.state = TrialState.COMPLETE
                trial.values = v
                trial.datetime_complete = when
                self._set_trial(trial_id, trial)
                finished.append(trial)
            if finished:  # the best-trial cache, as _update_cache keeps it per finished trial
                study_id = self._trial_id_to_study_id_and_number[trial_ids[0]][0]
                if len(self._studies[study_id].directions) > 1:
                    if self._studies[study_id].best_trial_id is None:
                        self._studies[study_id].best_trial_id = trial_ids[0]
                else:
                    for trial_id in trial_ids:
                        self._update_cache(trial_id, study_id)
            return finished
