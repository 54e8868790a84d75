"""The writer process: calls run in a child of the driver, in order; a lost child costs no part."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

from dse.sweep.background import BackgroundError, BackgroundProcess


def test_calls_run_in_a_child_in_order_and_return_their_results():
    writer = BackgroundProcess(preload="")
    try:
        pid = writer.call(os.getpid)
        block = np.arange(120_000, dtype=np.float64)  # a part's worth of columns, through the pipe
        total = writer.call(np.sum, block)
        echo = writer.call(str.upper, "done")
        assert echo() == "DONE"  # waited for out of order: the earlier results are kept for their callers
        assert pid() == writer.pid != os.getpid()
        assert total() == block.sum()
    finally:
        writer.close()
    assert writer._proc.returncode == 0  # it finished and exited when told


def test_a_failed_call_fails_every_later_one_unrun():
    """The calls are a sequence (a run's parts, in order): after one fails, none runs, so the caller can
    take over from the first failure without a later part written ahead of an earlier one."""
    writer = BackgroundProcess(preload="")
    try:
        first = writer.call(int, "7")
        bad = writer.call(int, "not a number")
        later = writer.call(os.getpid)
        assert first() == 7
        with pytest.raises(BackgroundError, match="ValueError: invalid literal"):
            bad()
        with pytest.raises(BackgroundError, match="not run: an earlier call failed"):
            later()
    finally:
        writer.close()


def test_calls_sent_before_the_driver_is_gone_still_run(tmp_path):
    """A batch handed to the writer is written even if the driver dies right after (its pipe closed)."""
    writer = BackgroundProcess(preload="")
    target = tmp_path / "written"
    writer.call(time.sleep, 0.5)
    writer.call(target.write_text, "finished batch")
    writer._send.close()  # what the driver's death does to the pipe
    writer._proc.wait(timeout=30)
    assert target.read_text() == "finished batch"
    writer.close()


def test_a_killed_child_fails_its_calls_and_every_later_one():
    writer = BackgroundProcess(preload="")
    try:
        assert writer.call(os.getpid)() == writer.pid
        os.kill(writer.pid, signal.SIGKILL)
        writer._proc.wait()
        with pytest.raises(BackgroundError, match="gone"):
            writer.call(os.getpid)()
        with pytest.raises(BackgroundError, match="gone"):
            writer.call(os.getpid)()  # at once: the caller does the work itself from now on
    finally:
        writer.close()


def test_a_run_whose_writer_is_killed_loses_no_part(ray_session, vocab, tmp_path, monkeypatch):
    """The writer process killed after the first batch: the driver writes the later parts and journal
    records itself; the run is the same as one that never lost its writer."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from test_sweep import DESIGN, OBJ, parts_frame, toy_score, toy_spec

    import dse.sweep.writer
    from dse.store import RunStore
    from dse.study import STUDY_NAME
    from dse.sweep import run

    made: list[BackgroundProcess] = []

    class Recorded(BackgroundProcess):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    def kill_after_first(index, times):
        if index == 0:
            os.kill(made[0].pid, signal.SIGKILL)
            made[0]._proc.wait()

    monkeypatch.setattr(dse.sweep.writer, "BackgroundProcess", Recorded)
    spec = toy_spec(vocab, trials=256, batch_size=64)
    result = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "r", use_ray=True, workers=1,
                 on_batch=kill_after_first)
    straight = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "s", use_ray=False)
    assert len(made) == 1 and made[0]._proc.returncode == -signal.SIGKILL
    assert result.status == "complete" and len(RunStore(result.run_dir).parts()) == 4
    pd.testing.assert_frame_equal(parts_frame(straight.run_dir)[["trial"] + DESIGN + OBJ],
                                  parts_frame(result.run_dir)[["trial"] + DESIGN + OBJ])
    loaded = optuna.load_study(study_name=STUDY_NAME,
                               storage=JournalStorage(JournalFileBackend(str(result.run_dir / "study.journal"))))
    assert [t.number for t in loaded.trials] == list(range(256))
