"""A run directory knows its parts (issue 27): ``trials/_manifest.json`` records the run's space hash and
seed and every committed part's sha256, size and rows (dse.store.parts). On ``--resume`` and on ``dse
report`` a part of another run is refused in one line; on resume a damaged part is set aside and its batch
runs again, a part written but never recorded is an unfinished write, run again; the report says what a
missing part leaves out; a garbled journal is one line and exit 2. Real sweeps of spaces/small.yaml, run
through the command line in this process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from cli_run import run_cli

from dse.cli import main
from dse.report.data import load_run
from dse.store import RunStore, read_metadata

SMALL = Path(__file__).resolve().parents[1] / "spaces" / "small.yaml"
TRIALS, MORE = 600, 900  # small.yaml's batches are 256: parts of 256, 256, 88, then 256, 56 more
COLS = ["trial", "gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s", "nic_gbyte_s", "time_to_train_days", "run_cost_usd"]


def _sweep(out: Path, seed: int, trials: int = TRIALS) -> Path:
    rc = main(["sweep", str(SMALL), "--no-ray", "--quiet", "--trials", str(trials), "--seed", str(seed), "--out", str(out)])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs of small.yaml, seeds 0 and 7 (copied by each test before it changes anything)."""
    where = tmp_path_factory.mktemp("runs")
    return {seed: _sweep(where / f"seed{seed}", seed) for seed in (0, 7)}


def _copy(runs, tmp_path, seed: int = 0) -> Path:
    return Path(shutil.copytree(runs[seed], tmp_path / f"run{seed}"))


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_every_part_is_recorded_with_the_runs_identity(runs):
    store = RunStore(runs[0])
    manifest = json.loads((store.trials_dir / "_manifest.json").read_text())
    info = store.read_run()
    assert (manifest["space_hash"], manifest["seed"]) == (info["space_hash"], info["seed"]) == (manifest["space_hash"], 0)
    assert sorted(manifest["parts"]) == [p.name for p in store.parts()]
    assert [e["rows"] for e in manifest["parts"].values()] == [256, 256, 88]
    meta = read_metadata(store.part_path(1))
    assert (meta["space_hash"], meta["seed"]) == (info["space_hash"], 0)
    assert len(pd.read_parquet(store.trials_dir)) == TRIALS  # the manifest is not read as data


def test_a_part_of_another_seeds_run_is_refused(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    theirs = RunStore(runs[7]).read_run()
    ours = RunStore(run).read_run()
    assert theirs["space_hash"] != ours["space_hash"]
    shutil.copy(runs[7] / "trials" / "part-00001.parquet", run / "trials" / "part-00001.parquet")
    before = sorted(p.name for p in (run / "trials").iterdir())
    expect = (f"trials/part-00001.parquet belongs to another run (space {theirs['space_hash']}, seed 7; "
              f"this run: space {ours['space_hash']}, seed 0)")

    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet", "--trials", MORE)
    assert rc == 2 and expect in _one_line(err) and str(run) in err
    assert sorted(p.name for p in (run / "trials").iterdir()) == before  # nothing set aside, nothing run

    rc, _, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 2 and expect in _one_line(err)


def test_a_part_with_flipped_bytes_is_set_aside_and_its_batch_runs_again(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    part = run / "trials" / "part-00001.parquet"
    data = bytearray(part.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 16):
        data[i] ^= 0xFF
    part.write_bytes(bytes(data))

    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet", "--trials", MORE)
    assert rc == 0, err
    line = _one_line(err)
    assert line.startswith("dse sweep: trials/part-00001.parquet is corrupt") and "their batches run again" in line
    assert (run / "trials" / ".part-00001.parquet.corrupt").read_bytes() == bytes(data)
    assert (run / "trials" / ".part-00002.parquet.set-aside").exists()  # asked after it: run again too

    straight = _sweep(tmp_path / "straight", 0, MORE)
    a, b = RunStore(straight).read_trials()[COLS], RunStore(run).read_trials()[COLS]
    assert b["trial"].tolist() == list(range(MORE))
    pd.testing.assert_frame_equal(a, b)  # the batches run again gave the same designs and scores

    rc, _, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 0 and "dse report" not in err  # every part whole again, the redone ones recorded


def test_a_deleted_part_is_reported_with_the_designs_it_held(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    (run / "trials" / "part-00001.parquet").unlink()
    rc, out, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 0 and (run / "report.html").exists(), err
    assert _one_line(err) == f"dse report: {run}: 1 part missing (trials/part-00001.parquet): 256 designs not shown"
    assert len(load_run(run).trials) == TRIALS - 256  # the rest is reported

    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet")  # resume runs it again
    assert rc == 0 and "trials/part-00001.parquet is missing" in _one_line(err)
    assert (run / "trials" / ".part-00002.parquet.set-aside").exists()
    assert RunStore(run).read_trials()["trial"].tolist() == list(range(TRIALS))
    rc, _, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 0 and err == ""


def test_a_part_written_but_not_recorded_is_an_unfinished_write(runs, tmp_path, capsys):
    """A kill between a part and its manifest entry: the part is set aside, its batch runs again."""
    run = _copy(runs, tmp_path)
    manifest = run / "trials" / "_manifest.json"
    body = json.loads(manifest.read_text())
    del body["parts"]["part-00002.parquet"]
    manifest.write_text(json.dumps(body))
    rc, _, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 0 and err == ""  # a batch in flight is not a missing part
    assert len(load_run(run).trials) == 512

    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet")
    assert rc == 0 and "part-00002.parquet was written but not recorded" in _one_line(err)
    assert (run / "trials" / ".part-00002.parquet.unfinished").exists()
    assert RunStore(run).read_trials()["trial"].tolist() == list(range(TRIALS))
    assert "part-00002.parquet" in json.loads(manifest.read_text())["parts"]


def test_a_garbled_journal_is_one_line_and_exit_2(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    journal = run / "study.journal"
    data = bytearray(journal.read_bytes())
    at = data.index(b"\n", len(data) // 2) - 40  # inside a line in the middle
    data[at:at + 8] = b"\xff\x00garble"
    journal.write_bytes(bytes(data))
    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet", "--trials", MORE)
    assert rc == 2
    line = _one_line(err)
    assert f"{journal}: line " in line and "is not an Optuna journal record" in line

    journal.unlink()  # as the line says: moved away, it is rebuilt from the parts
    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet", "--trials", MORE)
    assert rc == 0 and err == ""
    assert RunStore(run).read_trials()["trial"].tolist() == list(range(MORE))


def test_a_damaged_manifest_is_one_line(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    (run / "trials" / "_manifest.json").write_text('{"parts": {"part-0')
    for argv in (["report", run, "--no-sensitivity"], ["sweep", "--resume", run, "--no-ray", "--quiet"]):
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 2 and "_manifest.json: is not a manifest of the run's parts" in _one_line(err)


def test_a_run_without_a_manifest_is_read_as_before(runs, tmp_path, capsys):
    run = _copy(runs, tmp_path)
    (run / "trials" / "_manifest.json").unlink()  # a run directory from before manifests
    rc, _, err = run_cli(capsys, "report", run, "--no-sensitivity")
    assert rc == 0 and err == ""
    rc, _, err = run_cli(capsys, "sweep", "--resume", run, "--no-ray", "--quiet", "--trials", MORE)
    assert rc == 0 and err == ""
    assert RunStore(run).read_trials()["trial"].tolist() == list(range(MORE))
    assert not (run / "trials" / "_manifest.json").exists()  # unchecked, as before
