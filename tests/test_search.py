"""Batched ask/tell on Optuna: generations, constraints, reproducibility, restore and the journal."""

from __future__ import annotations

import copy

import numpy as np
import optuna
import pytest
from conftest import TOY_SPACE, toy_score
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from dse.space import Space
from dse.spec import parse_spec
from dse.study import STUDY_NAME, JournalMirror, Searcher
from dse.study.samplers import GENERATION_KEY


def make(vocab, tmp_path=None, **search):
    raw = copy.deepcopy(TOY_SPACE)
    raw["search"].update(search)
    spec = parse_spec(raw, source="toy.yaml", vocab=vocab)
    space = Space(spec)
    searcher = Searcher(space, spec.search, spec.directions)
    if tmp_path is not None:  # the run's journal, as the sweep keeps it beside the searcher
        searcher.journal = JournalMirror(tmp_path / "study.journal", searcher.directions, space.distributions)
    return spec, space, searcher


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
    gens = [t.system_attrs[GENERATION_KEY] for t in s.study.trials]
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

    from dse.study.samplers.variation import _polynomial_mutation

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
            a.journal.append(records[-1])
    expected = step(a, space, 20, 3)[1]

    (tmp_path / "b").mkdir()
    import shutil

    shutil.copy(tmp_path / "a" / "study.journal", tmp_path / "b" / "study.journal")
    _, space_b, b = make(vocab, tmp_path / "b", batch_size=20)
    assert b.restore(records) == 60
    b.journal.agree(records, b.study.get_trials(deepcopy=False))
    assert [t.values for t in b.study.trials] == [t.values for t in a.study.trials[:60]]
    assert step(b, space_b, 20, 3)[1] == expected  # the resumed search proposes what the first would have

    loaded = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(JournalFileBackend(str(tmp_path / "b" / "study.journal"))))
    assert len(loaded.trials) == 60  # rewritten from the records: nothing lost
    assert [t.params for t in loaded.trials] == [t.params for t in a.study.trials[:60]]


def test_journal_is_an_optuna_study(vocab, tmp_path):
    spec, space, s = make(vocab, tmp_path, batch_size=10)
    for b in range(2):
        trials, _, _ = step(s, space, 10, b)
        s.journal.append(s.record(trials))
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "study.journal")))
    loaded = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    assert len(loaded.trials) == 20
    assert [t.params for t in loaded.trials] == [t.params for t in s.study.trials]
    assert [t.values for t in loaded.trials] == [t.values for t in s.study.trials]
    assert [t.constraints for t in loaded.trials] == [t.constraints for t in s.study.trials]
    assert loaded.directions == s.study.directions
    assert len(loaded.best_trials) > 0


@pytest.mark.parametrize("sampler", ["nsga2", "tpe"])
def test_journal_lines_from_a_record_are_what_optuna_writes(vocab, tmp_path, sampler):
    """The journal records built from a batch's record (one encoder call per column) are, field for field,
    the records Optuna's own JournalStorage writes for the same finished trials and study attributes."""
    import json

    from dse.study import journal_lines

    spec, space, s = make(vocab, tmp_path, batch_size=12, sampler=sampler)
    s.journal.append(s.record(step(s, space, 12, 0)[0]))
    trials, _ = s.ask(12, 1)
    values = np.column_stack([np.linspace(1, 2, 12), np.linspace(3, 4, 12)])
    values[0, 0], values[1, 1] = np.inf, np.nan  # told as the worst value: Infinity in the JSON
    s.tell(trials, values, {"model": np.linspace(-1, 1, 12)})
    record = s.record(trials)
    target = s.journal.target()
    ours = [json.loads(line) for line in journal_lines(record, target.worker_id, target.study_id,
                                                       target.distributions_json)]

    class Capture:  # the logs an Optuna JournalStorage writes, as appended
        logs: list = []

        def read_logs(self, log_number_from):
            return iter(self.logs[log_number_from:])

        def append_logs(self, logs):
            self.logs.extend(json.loads(json.dumps(log)) for log in logs)

    optuna_journal = JournalStorage(Capture())
    study_id = optuna_journal.create_new_study(s.study.directions, STUDY_NAME)
    first = len(Capture.logs)
    for key, value in record["study_system_attrs"].items():
        optuna_journal.set_study_system_attr(study_id, key, value)
    for t in trials:
        optuna_journal.create_new_trial(study_id, template_trial=s.study._storage.get_trial(t._trial_id))
    theirs = Capture.logs[first:]
    assert len(ours) == len(theirs) == len(record["study_system_attrs"]) + 12
    for a, b in zip(ours, theirs):
        a.pop("worker_id"), b.pop("worker_id")
        assert a == b
    if sampler == "tpe":  # asked one by one: each trial keeps its own start
        assert len({line["datetime_start"] for line in ours}) == 12
    # a system attribute that is not a number, set on one trial only: encoded trial by trial, the same way
    record["system_attrs"]["note"] = [None] * 11 + ["text"]
    mixed = [json.loads(line) for line in journal_lines(record, "w", study_id, target.distributions_json)]
    assert [line["system_attrs"].get("note") for line in mixed[-12:]] == [None] * 11 + ["text"]
    assert [{k: v for k, v in line["system_attrs"].items() if k != "note"} for line in mixed[-12:]] == \
        [line["system_attrs"] for line in ours[-12:]]


def test_a_batch_appended_again_is_in_the_journal_once(vocab, tmp_path):
    """The writer appends after the offset it was given: a retried append (a restarted writer, or the
    driver after losing it) replaces the first one instead of repeating its trials."""
    spec, space, s = make(vocab, tmp_path, batch_size=10)
    s.journal.append(s.record(step(s, space, 10, 0)[0]))
    record = s.record(step(s, space, 10, 1)[0])
    target = s.journal.target()
    size = target.append(record)
    with open(tmp_path / "study.journal", "ab") as f:
        f.write(b'{"op_code":4,"torn')  # a first try cut short
    assert target.append(record) == size
    s.journal.appended(size)
    loaded = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(JournalFileBackend(str(tmp_path / "study.journal"))))
    assert [t.number for t in loaded.trials] == list(range(20))
    assert [t.params for t in loaded.trials] == [t.params for t in s.study.trials]

def test_a_batch_told_twice_is_refused_whole(vocab):
    """The batch is finished in one storage call, checked first: telling finished trials again raises and
    changes nothing."""
    spec, space, s = make(vocab, batch_size=8)
    trials, _, _ = step(s, space, 8, 0)
    before = [t.values for t in s.study.trials]
    with pytest.raises(ValueError, match="cannot tell trial 0: it is COMPLETE"):
        s.tell(trials, np.ones((8, 2)), {"model": np.zeros(8)})
    assert [t.values for t in s.study.trials] == before
    assert s.study._storage._studies[s.study._study_id].best_trial_id == trials[0]._trial_id  # Optuna's cache
