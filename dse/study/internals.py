"""Every use of Optuna's private names in the engine, in this one module (tested on Optuna 5.0; the
project pins ``optuna>=5.0,<5.1``, and a new minor version is checked here first).

Optuna's public API drives the study where it can (``study.ask(fixed_distributions=...)``,
``Trial.set_constraint``, ``study.tell``, ``optuna.trial.create_trial``, ``study.add_trials``,
``study.get_trials(deepcopy=False)``, ``BaseGASampler.population_size``, ``JournalStorage``). What is left
here is what a study driven in whole batches needs and the public API does not give, each for a reason:

- :class:`BatchInMemoryStorage` subclasses ``InMemoryStorage`` and uses its internals (``_lock``,
  ``_studies``, ``_get_trial``, ``_set_trial``, ``_check_study_id``, ``_max_trial_id``,
  ``_trial_id_to_study_id_and_number``, ``_update_cache``): a batch of trials is created in one call and
  finished in one call, where the public path writes every parameter, attribute and state one call each;
  with NSGA-II's batches of 512 that is most of the engine's time between batches.
- :func:`storage`, :func:`study_id`, :func:`trial_id` (``study._storage``, ``study._study_id``,
  ``trial._trial_id``): the storage calls above, and NSGA-II's parent cache, which holds trial ids.
- :func:`forget_cached_trials` (``study._thread_local.cached_all_trials``): a batch created or finished
  in the storage directly must drop the study's cached trial list, as ``study.ask`` and ``study.tell`` do.
- :func:`constraint_key` (``_CONSTRAINTS_KEY``): the system attribute ``Trial.set_constraint`` writes,
  for constraints stored in the one call that finishes a batch.
- :func:`single_value` (``distributions._get_single_value``): the one value of a single-valued
  distribution, as ``Trial`` suggests it, for trials created without ``Trial``.
- :func:`generation_key`, :func:`parent_cache_key` (``BaseGASampler._get_generation_key``,
  ``_get_parent_cache_key_prefix``): the system attributes where Optuna's NSGA-II keeps each trial's
  generation and each generation's parents, which the batch sampler reads and writes as Optuna does.
- :func:`study_system_attrs`, :func:`set_trial_system_attr`: the study's system attributes without a
  deep copy (NSGA-II's parent lists grow with the run), and a trial's generation, stored as
  ``BaseGASampler.get_trial_generation`` stores it.
- :func:`fast_non_domination_rank`, :func:`crowding_distance_sort`: NSGA-II's survival, Optuna's own
  functions (``_fast_non_domination_rank`` of ``optuna.study._multi_objective``, ``_crowding_distance_sort``
  of ``optuna.samplers.nsgaii._elite_population_selection_strategy``), so that the batch sampler selects
  exactly as ``NSGAIISampler`` does.
- :func:`restrict_grid` (``GridSampler._all_grids``, ``_n_min_trials``): a grid that walks only some points
  of its cartesian product (one per distinct design, dse.space.Space.grid_points) in Optuna's seeded
  order, so that trial ``k`` gets the ``k``-th of them as ``GridSampler`` gives trial ``k`` its ``k``-th point.
- :data:`JournalOperation` (``optuna.storages.journal._storage``): the op codes of the journal's records,
  which the engine writes in the format ``JournalStorage`` reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, _get_single_value
from optuna.samplers.nsgaii._elite_population_selection_strategy import _crowding_distance_sort
from optuna.storages import InMemoryStorage
from optuna.storages.journal._storage import JournalOperation
from optuna.study import Study
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.study._multi_objective import _fast_non_domination_rank
from optuna.trial import FrozenTrial, TrialState

__all__ = ["BatchInMemoryStorage", "copy_trial", "storage", "study_id", "trial_id", "forget_cached_trials",
           "constraint_key", "single_value", "generation_key", "parent_cache_key", "study_system_attrs",
           "set_trial_system_attr", "fast_non_domination_rank", "crowding_distance_sort", "JournalOperation",
           "restrict_grid"]

#: NSGA-II's non-dominated sort with a constraint penalty (Deb et al. 2002, Sec. III-A and IV-A)
fast_non_domination_rank = _fast_non_domination_rank
#: NSGA-II's crowding-distance order of one front, in place (Deb et al. 2002, Sec. III-B)
crowding_distance_sort = _crowding_distance_sort


def storage(study: Study) -> BatchInMemoryStorage:
    """The study's storage (the engine creates every live study on :class:`BatchInMemoryStorage`)."""
    return study._storage


def study_id(study: Study) -> int:
    return study._study_id


def trial_id(trial: FrozenTrial | optuna.Trial) -> int:
    return trial._trial_id


def forget_cached_trials(study: Study) -> None:
    """Drop the study's cached list of trials (the study is about to change behind ``ask``/``tell``)."""
    study._thread_local.cached_all_trials = None


def constraint_key(name: str) -> str:
    """The system attribute under which ``Trial.set_constraint(name, value)`` stores a constraint."""
    return f"{_CONSTRAINTS_KEY}:{name}"


def single_value(dist: BaseDistribution) -> Any:
    """The one value of a single-valued distribution."""
    return _get_single_value(dist)


def generation_key(sampler_class: type) -> str:
    """The trial system attribute holding a trial's generation (a ``BaseGASampler`` subclass's own)."""
    return sampler_class._get_generation_key()


def parent_cache_key(sampler_class: type, generation: int) -> str:
    """The study system attribute holding the trial ids of a generation's parents."""
    return sampler_class._get_parent_cache_key_prefix() + str(generation)


def study_system_attrs(study: Study) -> dict[str, Any]:
    """The study's system attributes, a shallow copy (see :meth:`BatchInMemoryStorage.get_study_system_attrs`)."""
    return storage(study).get_study_system_attrs(study_id(study))


def set_trial_system_attr(study: Study, trial: FrozenTrial, key: str, value: Any) -> None:
    storage(study).set_trial_system_attr(trial_id(trial), key, value)


def copy_trial(trial: FrozenTrial) -> FrozenTrial:
    """``copy.copy(trial)`` (a shallow copy, as Optuna's storages make before changing a trial), without
    the generic copy protocol's cost, which is paid a few times per trial per batch."""
    out = FrozenTrial.__new__(FrozenTrial)
    out.__dict__.update(trial.__dict__)
    return out


class BatchInMemoryStorage(InMemoryStorage):
    """In-memory storage for a study driven in batches.

    The study never holds WAITING trials (the engine never enqueues): ``study.ask`` scans every trial for
    one, and a counter answers at once. A whole batch of running trials is created in one call
    (:meth:`create_running_trials`) and finished, constraints included, in one call
    (:meth:`complete_trials`).
    """

    def __init__(self) -> None:
        super().__init__()
        self._n_waiting = 0

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        if template_trial is not None and template_trial.state == TrialState.WAITING:
            self._n_waiting += 1
        return super().create_new_trial(study_id, template_trial)

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        if states is not None and tuple(states) == (TrialState.WAITING,) and self._n_waiting == 0:
            return []
        return super().get_all_trials(study_id, deepcopy, states)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        """A shallow copy: NSGA-II keeps every generation's parent ids here and reads them each generation;
        a deep copy would grow with the run (callers only read the values)."""
        with self._lock:
            self._check_study_id(study_id)
            return dict(self._studies[study_id].system_attrs)

    def create_running_trials(self, study_id: int, params: Sequence[Mapping[str, Any]],
                              distributions: Mapping[str, BaseDistribution],
                              system_attrs: Mapping[str, Any]) -> list[FrozenTrial]:
        """A batch of RUNNING trials with their parameters (external values) and the same system attributes:
        what ``create_new_trial`` then ``set_trial_param`` per parameter store, without a deep copy of a
        template per trial. Returns the stored trials (read their ``number`` and :func:`trial_id`)."""
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
            for tid, t, v, attrs in zip(trial_ids, current, values, system_attrs):
                trial = copy_trial(t)
                trial.system_attrs = {**t.system_attrs, **attrs}
                trial.state = TrialState.COMPLETE
                trial.values = v
                trial.datetime_complete = when
                self._set_trial(tid, trial)
                finished.append(trial)
            if finished:  # the best-trial cache, as _update_cache keeps it per finished trial
                sid = self._trial_id_to_study_id_and_number[trial_ids[0]][0]
                if len(self._studies[sid].directions) > 1:
                    if self._studies[sid].best_trial_id is None:
                        self._studies[sid].best_trial_id = trial_ids[0]
                else:
                    for tid in trial_ids:
                        self._update_cache(tid, sid)
            return finished



def restrict_grid(sampler: optuna.samplers.GridSampler, names: Sequence[str], keep: set[tuple]) -> None:
    """Make ``sampler`` walk only the points of its grid in ``keep`` (tuples of values in the order of
    ``names``), in its seeded shuffle's order: trial ``k`` gets the ``k``-th kept point."""
    order = sorted(names)  # GridSampler's order of a point's values
    at = [order.index(n) for n in names]
    sampler._all_grids = [g for g in sampler._all_grids if tuple(g[i] for i in at) in keep]
    sampler._n_min_trials = len(sampler._all_grids)
