"""Batched ask/tell on Optuna: generations, constraints, reproducibility, restore and the journal."""

from __future__ import annotations

import copy

import numpy as np
import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import TOY_SPACE, toy_score
from dse.samplers import BatchNSGAIISampler
from dse.search import Searcher
from dse.store import STUDY_NAME
from dse.space import Space
from dse.spec import parse_spec


def make(vocab, tmp_path=None, **search):
    raw = copy.deepcopy(TOY_SPACE)
    raw["search"].update(search)
    spec = parse_spec(raw, source="toy.yaml", vocab=vocab)
    space = Space(spec)
    journal = tmp_path / "study.journal" if tmp_path is not None else None
    return spec, space, Searcher(space, spec.search, spec.directions, journal_path=journal)


def step(searcher: Searcher, space: Space, n: int, index: int):
    trials, params = searcher.ask(n, index)
    out = toy_score(space.table(params))
    values = np.column_stack([out["time_s"], out["cost_usd"]])
    searcher.tell(trials, values, {"model": out["con_memory"], "power": out["power_mw"] - 10})
    return trials, [dict(p) for p in params], out


def test_each_batch_is_one_nsga2_generation(vocab):
    spec, space, s = make(vocab, batch_size=16)
    for b in range(3):
        step(s, space, 16, b)
    key = BatchNSGAIISampler._get_generation_key()
    gens = [t.system_attrs[key] for t in s.study.trials]
    assert gens == [0] * 16 + [1] * 16 + [2] * 16
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in s.study.trials)


def test_infeasible_designs_are_told_with_violations(vocab):
    spec, space, s = make(vocab, batch_size=32)
    _, _, out = step(s, space, 32, 0)
    for t, con in zip(s.study.trials, out["con_memory"]):
        assert t.values is not None and len(t.values) == 2
        assert t.constraints["model"] == pytest.approx(con)
    assert any(t.constraints["model"] > 0 for t in s.study.trials)


def test_nan_and_inf_values_are_told_as_worst(vocab):
    spec, space, s = make(vocab, batch_size=4)
    trials, _ = s.ask(4, 0)
    s.tell(trials, np.array([[np.nan, 1.0], [np.inf, 2.0], [1.0, 1.0], [2.0, 2.0]]), {"model": np.array([1.0, np.nan, 0, 0])})
    assert [t.values[0] for t in s.study.trials[:2]] == [np.inf, np.inf]
    assert s.study.trials[1].constraints["model"] > 0


@pytest.mark.parametrize("sampler", ["nsga2", "tpe", "random"])
def test_seeded_runs_propose_the_same_designs(vocab, sampler):
    runs = []
    for _ in range(2):
        spec, space, s = make(vocab, batch_size=12, sampler=sampler, seed=5)
        runs.append([p for b in range(3) for p in step(s, space, 12, b)[1]])
    assert runs[0] == runs[1]
    spec, space, s = make(vocab, batch_size=12, sampler=sampler, seed=6)
    other = [p for b in range(3) for p in step(s, space, 12, b)[1]]
    assert other != runs[0]


def test_grid_sampler_visits_every_point_once(vocab):
    spec, space, s = make(vocab, sampler="grid", batch_size=50)
    seen = []
    for b in range(5):
        n = min(50, space.grid_size() - len(seen))
        seen += [tuple(p.values()) for p in step(s, space, n, b)[1]]
    assert len(seen) == space.grid_size() == 210
    assert len(set(seen)) == 210


def test_children_inherit_are_new_and_stay_in_bounds(vocab):
    spec, space, s = make(vocab, batch_size=40)
    step(s, space, 40, 0)
    parents = [(t.params["gpu"], t.params["log2(n_gpus)"], t.params["knob"]) for t in s.study.trials]
    _, params, _ = step(s, space, 40, 1)
    children = [(p["gpu"], p["log2(n_gpus)"], p["knob"]) for p in params]
    assert not set(children) & set(parents) and len(set(children)) == 40  # duplicates are eliminated
    inherited = sum(c[j] in {p[j] for p in parents} for c in children for j in range(3))
    assert inherited > 0.8 * 3 * 40  # most values come from parents; mutation moves the rest
    for g, k, x in children:
        assert g in ("g1", "g2", "g3") and 3 <= k <= 12 and 1.0 <= x <= 4.0 and (x * 2) == int(x * 2)


def test_polynomial_mutation_respects_kind_and_bounds():
    from optuna.distributions import FloatDistribution, IntDistribution

    from dse.samplers.nsga2 import _polynomial_mutation

    rng = np.random.RandomState(0)
    for dist, x in [(IntDistribution(3, 12), 12.0), (FloatDistribution(1.0, 4.0, step=0.5), 1.0),
                    (FloatDistribution(0.1, 10.0, log=True), 5.0), (IntDistribution(8, 1024, log=True), 8.0)]:
        out = _polynomial_mutation(dist, np.full(2000, x), 3.0, rng)
        vals = np.array(out, dtype=np.float64)
        assert vals.min() >= dist.low and vals.max() <= dist.high
        assert (vals != x).mean() > 0.2  # it moves
        if isinstance(dist, IntDistribution):
            assert all(isinstance(v, int) for v in out)
        if dist.step:
            assert np.allclose((vals - dist.low) / dist.step, np.round((vals - dist.low) / dist.step))


def test_restore_continues_exactly_and_repairs_the_journal(vocab, tmp_path):
    spec, space, a = make(vocab, tmp_path / "a", batch_size=20)
    (tmp_path / "a").mkdir(exist_ok=True)
    records = []
    for b in range(3):
        trials, _, _ = step(a, space, 20, b)
        records.append(a.record(trials))
        if b < 2:  # the journal misses the last batch, as after a crash between part and journal
            a.journal_append(trials, records[-1])
    expected = step(a, space, 20, 3)[1]

    (tmp_path / "b").mkdir()
    import shutil

    shutil.copy(tmp_path / "a" / "study.journal", tmp_path / "b" / "study.journal")
    _, space_b, b = make(vocab, tmp_path / "b", batch_size=20)
    assert b.restore(records) == 60
    assert [t.values for t in b.study.trials] == [t.values for t in a.study.trials[:60]]
    assert step(b, space_b, 20, 3)[1] == expected  # the resumed search proposes what the first would have

    loaded = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(JournalFileBackend(str(tmp_path / "b" / "study.journal"))))
    assert len(loaded.trials) == 60  # rewritten from the records: nothing lost
    assert [t.params for t in loaded.trials] == [t.params for t in a.study.trials[:60]]


def test_journal_is_an_optuna_study(vocab, tmp_path):
    spec, space, s = make(vocab, tmp_path, batch_size=10)
    for b in range(2):
        trials, _, _ = step(s, space, 10, b)
        s.journal_append(trials, s.record(trials))
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "study.journal")))
    loaded = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    assert len(loaded.trials) == 20
    assert [t.params for t in loaded.trials] == [t.params for t in s.study.trials]
    assert [t.values for t in loaded.trials] == [t.values for t in s.study.trials]
    assert [t.constraints for t in loaded.trials] == [t.constraints for t in s.study.trials]
    assert loaded.directions == s.study.directions
    assert len(loaded.best_trials) > 0


@pytest.mark.parametrize("sampler", ["nsga2", "tpe"])
def test_journal_batch_encoding_is_the_per_trial_encoding(vocab, tmp_path, sampler):
    import functools

    from dse.store import _iso

    spec, space, s = make(vocab, tmp_path, batch_size=12, sampler=sampler)
    step(s, space, 12, 0)
    trials, _ = s.ask(12, 1)
    values = np.column_stack([np.linspace(1, 2, 12), np.linspace(3, 4, 12)])
    values[0, 0], values[1, 1] = np.inf, np.nan  # told as the worst value: Infinity in the JSON
    s.tell(trials, values, {"model": np.linspace(-1, 1, 12)})
    s.journal_append(trials, s.record(trials))
    finished = [s.study._storage.get_trial(t._trial_id) for t in trials]
    iso = functools.lru_cache(maxsize=4)(_iso)
    per_trial = [s.journal._trial_line(t, iso) for t in finished]
    batch = s.journal._batch_lines(finished, iso)
    if sampler == "nsga2":  # numbers only: one encoder call for the batch, the same bytes
        assert batch == per_trial
    else:  # TPE trials carry no generation attribute but the same shape: encoded either way, identically
        assert batch is None or batch == per_trial
    mixed = finished[:2] + [copy.copy(finished[2])]
    mixed[2].system_attrs = {**mixed[2].system_attrs, "note": "text"}
    assert s.journal._batch_lines(mixed, iso) is None  # not numbers only: each trial on its own
