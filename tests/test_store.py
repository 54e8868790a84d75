"""The run directory: atomic files, Parquet parts that read back with pandas and pyarrow, metadata."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from dse.errors import UserError
from dse.store import RunStore, read_metadata


def batch(start: int, n: int) -> dict:
    return {
        "trial": np.arange(start, start + n, dtype=np.int64),
        "gpu": np.array(["h100-sxm", "b200"] * (n // 2), dtype=object),
        "n_gpus": np.full(n, 1024, dtype=np.int64),
        "step_time_s": np.linspace(1, 2, n),
        "feasible": np.arange(n) % 3 != 0,
        "recompute": np.array(["selective"] * n),
    }


def test_create_names_a_fresh_directory(tmp_path):
    a = RunStore.create(results=tmp_path, name="space")
    b = RunStore.create(results=tmp_path, name="space")
    assert a.root != b.root and a.root.name.startswith("space-") and a.trials_dir.is_dir()
    a.write_run({"status": "running"})
    with pytest.raises(UserError, match="already holds a run"):
        RunStore.create(a.root)
    with pytest.raises(UserError, match="not a run directory"):
        RunStore.open(tmp_path / "nothing")


def test_parts_round_trip_with_metadata(tmp_path):
    store = RunStore.create(tmp_path / "run")
    meta = {"space_hash": "abc123", "seed": 7, "sampler": "nsga2", "versions": {"optuna": "5.0.0"},
            "units": {"step_time_s": "s; time of one step"}}
    store.write_part(0, batch(0, 4), {**meta, "batch": 0})
    store.write_part(1, batch(4, 4), {**meta, "batch": 1})
    assert [p.name for p in store.parts()] == ["part-00000.parquet", "part-00001.parquet"]
    assert not list(store.trials_dir.glob(".*"))  # no temporary files left behind

    frame = pd.read_parquet(store.trials_dir)  # pandas reads the folder as one table
    assert len(frame) == 8
    frame = store.read_trials()
    assert frame["trial"].tolist() == list(range(8))
    assert frame["feasible"].dtype == bool and frame["n_gpus"].dtype == np.int64
    table = ds.dataset(store.trials_dir, format="parquet").to_table()  # and pyarrow
    assert table.num_rows == 8 and table.schema.field("gpu").type in ("string", "large_string")

    got = read_metadata(store.part_path(1))
    assert got["space_hash"] == "abc123" and got["seed"] == 7 and got["sampler"] == "nsga2" and got["batch"] == 1
    assert got["units"]["step_time_s"].startswith("s;")
    raw = pq.read_schema(store.part_path(0)).metadata
    assert json.loads(raw[b"dse.versions"]) == {"optuna": "5.0.0"}


def test_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    store = RunStore.create(tmp_path / "run")
    store.write_run({"spec": {}, "status": "running", "n": 1})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        store.write_run({"spec": {}, "status": "running", "n": 2})
    with pytest.raises(OSError):
        store.write_part(0, batch(0, 2), {})
    monkeypatch.undo()
    assert store.read_run()["n"] == 1
    assert store.parts() == []  # the half-written part is a hidden temporary, not a part
    assert store.read_trials().empty


def test_pareto_file(tmp_path):
    store = RunStore.create(tmp_path / "run")
    front = pd.DataFrame({"pareto_rank": [1, 1], "front_index": [1, 2], "step_time_s": [1.0, 2.0]})
    store.write_pareto(front, {"space_hash": "abc"})
    back = pd.read_parquet(store.pareto)
    assert back.equals(front)
    assert read_metadata(store.pareto)["space_hash"] == "abc"


def test_a_batch_written_by_the_writer_reads_back_its_record_and_journal(tmp_path):
    """write_batch stores the batch's Optuna record as the part's metadata from its column texts
    (EncodedRecord), which decode to the record json.dumps would store; running it again (a retried writer)
    leaves the same part and the batch in the journal once."""
    from datetime import datetime

    from optuna.study import StudyDirection

    from dse.cluster import pack
    from dse.study import EncodedRecord, JournalMirror
    from dse.sweep.writer import write_batch

    record = {"number": [0, 1, 2], "params": {"tp": [0, 2, 1], "hbm": [3.25, 8.0, 1e-05]},
              "values": [[1.5, float("inf")], [2.0, 3.0], [0.1, 7.0]],
              "system_attrs": {"nsga2:generation": [0, 0, 0], "constraints:model": [-0.5, 0.0, 1e300]},
              "study_system_attrs": {"nsga2:parents:1": [0, 2]}, "datetime_start": datetime(2026, 1, 2, 3, 4, 5).isoformat(),
              "datetime_complete": datetime(2026, 1, 2, 3, 4, 6, 7).isoformat(), "note": np.float64(2.5)}
    assert json.loads(EncodedRecord(record).text) == json.loads(json.dumps(record, default=str))

    from optuna.distributions import CategoricalDistribution, FloatDistribution

    store = RunStore.create(tmp_path / "run")
    mirror = JournalMirror(store.journal, [StudyDirection.MINIMIZE] * 2,
                           {"tp": CategoricalDistribution([1, 2, 4]), "hbm": FloatDistribution(1e-5, 8.0)})
    target = mirror.target()
    args = (str(store.root), 0, pack(batch(0, 4)), {"seed": 3, "optuna": record}, target)
    _, size = write_batch(*args)
    assert write_batch(*args)[1] == size  # the same batch again: the same journal
    got = read_metadata(store.part_path(0))
    assert got["seed"] == 3 and got["optuna"] == json.loads(json.dumps(record, default=str))
    trials, attrs = mirror.load()
    assert [t.number for t in trials] == [0, 1, 2] and attrs == {"nsga2:parents:1": [0, 2]}
    assert [t.params["tp"] for t in trials] == [1, 4, 2] and trials[0].values == [1.5, float("inf")]
    assert [t.system_attrs["constraints:model"] for t in trials] == [-0.5, 0.0, 1e300]
