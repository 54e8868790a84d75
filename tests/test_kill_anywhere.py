"""A seeded NSGA-II sweep killed (SIGKILL) at ten random batches and resumed gives the uninterrupted run's
trials, trial for trial (issue 27): the sampler of each batch is seeded from the run's seed and the batch's
index, and everything else it reads (the study, its NSGA-II generations and parents, the set of designs
already asked) is rebuilt from the committed parts. Also: a journal lock left by a killed run does not stop
the resume (it used to spin forever)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
#: the space: spaces/small.yaml searched by NSGA-II in 20 batches of 64, far enough into its 2,912 designs
#: that children repeat and duplicate elimination runs out of tries (where a resumed run used to diverge)
TRIALS, BATCH, SEED = 1280, 64, 11
KILLS = 10
DESIGN = ["gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s", "nic_gbyte_s"]


def _sweep(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dse.cli", "sweep", *args, "--no-ray", "--quiet"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _trials(run_dir: Path) -> pd.DataFrame:
    parts = sorted((run_dir / "trials").glob("part-*.parquet"))
    return pd.concat([pd.read_parquet(p) for p in parts]).sort_values("trial").reset_index(drop=True)


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    spec = yaml.safe_load((REPO / "spaces" / "small.yaml").read_text())
    spec["search"] = {"sampler": "nsga2", "trials": TRIALS, "batch_size": BATCH, "seed": SEED}
    path = tmp_path_factory.mktemp("space") / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def uninterrupted(space) -> pd.DataFrame:
    proc = _sweep(str(space), "--out", "full", cwd=space.parent)
    assert proc.wait(timeout=600) == 0, proc.stderr.read()
    return _trials(space.parent / "full")


def test_resumed_after_a_kill_at_any_batch_gives_the_same_trials(space, uninterrupted):
    assert len(uninterrupted) == TRIALS
    rng = random.Random(27)
    for k in sorted(rng.sample(range(1, TRIALS // BATCH - 1), KILLS)):
        run_dir = space.parent / f"killed-{k}"
        proc = _sweep(str(space), "--out", run_dir.name, cwd=space.parent)
        while proc.poll() is None and len(list((run_dir / "trials").glob("part-*.parquet"))) < k:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)  # wherever the run is: scoring, writing a part or the journal
        proc.wait()
        resumed = _sweep("--resume", run_dir.name, cwd=space.parent)
        assert resumed.wait(timeout=600) == 0, resumed.stderr.read()
        got = _trials(run_dir)
        assert len(got) == TRIALS, f"killed after {k} parts"
        same = (got[DESIGN].astype(str).to_numpy() == uninterrupted[DESIGN].astype(str).to_numpy()).all(axis=1)
        assert same.all(), f"killed after {k} parts: trial {int((~same).argmax())} differs"
        pd.testing.assert_series_equal(got["time_to_train_days"], uninterrupted["time_to_train_days"])


def test_a_journal_lock_left_by_a_killed_run_is_removed_on_resume(space, uninterrupted):
    """Optuna's journal lock is a symlink; one left with a relative target (as a run given a relative --out
    made it) used to make the resumed run's first append spin forever."""
    run_dir = space.parent / "locked"
    proc = _sweep(str(space), "--out", run_dir.name, "--trials", str(4 * BATCH), cwd=space.parent)
    assert proc.wait(timeout=600) == 0
    os.symlink(f"{run_dir.name}/study.journal", run_dir / "study.journal.lock")  # stale, relative
    resumed = _sweep("--resume", run_dir.name, "--trials", str(6 * BATCH), cwd=space.parent)
    assert resumed.wait(timeout=120) == 0
    assert "journal lock left by a killed run" in resumed.stderr.read()
    assert not os.path.lexists(run_dir / "study.journal.lock")
    got = _trials(run_dir)
    pd.testing.assert_frame_equal(got[DESIGN], uninterrupted[DESIGN].iloc[:6 * BATCH])
