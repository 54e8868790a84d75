"""Crash debris in a run directory: a torn (truncated) part is detected on resume, set aside under a hidden
name that no reader picks up, and its batch runs again, so the finished run equals an uninterrupted one; a
torn run.json is one line and exit 2 (tests/test_hostile_input.py)."""

from __future__ import annotations

import copy

import pandas as pd
from conftest import TOY_SPACE, toy_score

from dse.spec import parse_spec
from dse.store import RunStore
from dse.sweep import run

COLS = ["trial", "gpu", "n_gpus", "knob", "time_s", "cost_usd"]


def _spec(vocab, trials):
    raw = copy.deepcopy(TOY_SPACE)
    raw["search"].update(trials=trials, batch_size=32)
    return parse_spec(raw, source="toy.yaml", vocab=vocab)


def test_torn_part_is_never_read_and_its_batches_run_again(vocab, tmp_path, capsys):
    straight = run(_spec(vocab, 192), evaluate_fn=toy_score, run_dir=tmp_path / "straight", use_ray=False)
    crashed = run(_spec(vocab, 192), evaluate_fn=toy_score, run_dir=tmp_path / "crashed", use_ray=False, trials=160)
    store = RunStore(crashed.run_dir)
    assert len(store.parts()) == 5
    part = store.part_path(3)
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # what a crash without atomic rename leaves
    assert store.torn_parts() == [part]

    resumed = run(evaluate_fn=toy_score, resume=crashed.run_dir, use_ray=False, vocab=vocab, trials=192)
    assert "part-00003.parquet is torn" in capsys.readouterr().err
    assert resumed.status == "complete" and resumed.n_trials == 192
    assert store.torn_parts() == [] and (store.trials_dir / ".part-00003.parquet.torn").exists()
    a, b = straight.run_dir, resumed.run_dir
    pd.testing.assert_frame_equal(RunStore(a).read_trials()[COLS], RunStore(b).read_trials()[COLS])
    assert RunStore(b).read_trials()["trial"].tolist() == list(range(192))  # none lost, none twice
    pd.testing.assert_frame_equal(pd.read_parquet(a / "pareto.parquet")[COLS[1:]],
                                  pd.read_parquet(b / "pareto.parquet")[COLS[1:]])
    assert len(pd.read_parquet(b / "trials")) == 192  # the hidden torn file is not read as data


def test_atomic_writes_leave_no_partial_file_under_a_real_name(tmp_path):
    store = RunStore.create(tmp_path / "run")
    tmp = store.trials_dir / ".part-00000.parquet.tmp"
    tmp.write_bytes(b"PAR1 half a file")  # a kill between write and rename
    assert store.parts() == [] and store.read_trials().empty
