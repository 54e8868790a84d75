"""The engine end to end on the toy model: parts, front, Ray, the exhaustive grid, stops and resumes."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_SPACE, toy_score, toy_vocabulary

from dse.spec import parse_spec
from dse.store import RunStore, read_metadata
from dse.store.pareto import to_minimization
from dse.sweep import run

DESIGN = ["gpu", "n_gpus", "knob"]
OBJ = ["time_s", "cost_usd"]


def toy_spec(vocab, **search):
    raw = copy.deepcopy(TOY_SPACE)
    raw["search"].update(search)
    return parse_spec(raw, source="toy.yaml", vocab=vocab)


def parts_frame(run_dir) -> pd.DataFrame:
    return RunStore(run_dir).read_trials()


class Crash(Exception):
    pass


class CrashingScore:
    """toy_score that fails on its ``at``-th call (a crash mid-run) and counts the rows it scored."""

    def __init__(self, at: int | None, exc=Crash):
        self.at, self.calls, self.rows, self.exc = at, 0, 0, exc

    def __call__(self, table):
        self.calls += 1
        if self.at is not None and self.calls == self.at:
            raise self.exc("boom")
        out = toy_score(table)
        self.rows += len(out["time_s"])
        return out


def test_sweep_writes_parts_front_and_run_json(vocab, tmp_path):
    spec = toy_spec(vocab, trials=200, batch_size=64)
    result = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "run", use_ray=False)
    assert result.status == "complete" and result.n_trials == 200
    store = RunStore(result.run_dir)
    assert [p.name for p in store.parts()] == [f"part-{i:05d}.parquet" for i in range(4)]  # 64+64+64+8
    frame = parts_frame(result.run_dir)
    assert frame["trial"].tolist() == list(range(200))
    assert frame["batch"].tolist() == [0] * 64 + [1] * 64 + [2] * 64 + [3] * 8
    for col in ["gpu", "n_gpus", "knob", "time_s", "cost_usd", "feasible", "violation", "meets_constraints", "admissible"]:
        assert col in frame
    assert (frame["admissible"] == (frame["feasible"] & (frame["power_mw"] <= 10))).all()

    front = pd.read_parquet(store.pareto)
    assert len(front) == len(result.front) > 0
    assert front["admissible"].all()
    F = to_minimization(front[OBJ].to_numpy(), ["min", "min"])
    assert (np.diff(F[:, 0]) >= 0).all()  # sorted by the first objective
    meta = read_metadata(store.pareto)
    assert meta["space_hash"] == spec.space_hash and meta["sampler"] == "nsga2" and meta["seed"] == 3

    info = json.loads(store.run_json.read_text())
    assert info["status"] == "complete" and info["trials_done"] == 200 and info["batches_done"] == 4
    assert info["spec"]["search"]["trials"] == 200 and info["space_hash"] == spec.space_hash
    assert "optuna" in info["versions"] and "score" in info["timings"]
    assert info["spec_text"].startswith("name: toy")


def test_ray_actors_give_the_same_run(vocab, tmp_path, ray_session):
    spec = toy_spec(vocab, trials=192, batch_size=64)
    local = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "local", use_ray=False)
    remote = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "ray", use_ray=True, workers=2, chunks_per_worker=2)
    assert remote.status == "complete"
    a, b = parts_frame(local.run_dir), parts_frame(remote.run_dir)
    pd.testing.assert_frame_equal(a[DESIGN + OBJ], b[DESIGN + OBJ])
    assert ray_session.is_initialized()  # a Ray the engine did not start is left running


def test_a_killed_actor_is_restarted_and_loses_nothing(vocab, tmp_path, ray_session):
    from conftest import DyingScore

    spec = toy_spec(vocab, trials=256, batch_size=64)
    marker = tmp_path / "died"
    result = run(spec, evaluate_fn=DyingScore(str(marker)), run_dir=tmp_path / "r", use_ray=True, workers=2)
    assert marker.exists()  # an actor did die
    assert result.status == "complete"
    straight = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "s", use_ray=False)
    pd.testing.assert_frame_equal(parts_frame(straight.run_dir)[["trial"] + DESIGN + OBJ],
                                  parts_frame(result.run_dir)[["trial"] + DESIGN + OBJ])


def test_parts_are_written_by_a_writer_beside_the_driver():
    from dse.sweep.writer import open_writer

    writer = open_writer(in_process=False)  # a run on Ray
    try:  # another process, on the driver's node (so the same files)
        assert writer.call(os.getpid)() != os.getpid()
    finally:
        writer.close()
    assert open_writer(in_process=True).call(os.getpid)() == os.getpid()


def test_a_lost_writer_costs_no_part(vocab, tmp_path, monkeypatch):
    """A writer that fails for good (its restarts spent): the driver writes the part itself."""
    import dse.sweep.loop
    from dse.sweep.writer import InlineWriter

    class LostWriter(InlineWriter):
        def call(self, fn, *args):
            def wait():
                raise RuntimeError("the writer process died")
            return wait

    monkeypatch.setattr(dse.sweep.loop, "open_writer", lambda in_process: LostWriter())
    spec = toy_spec(vocab, trials=192, batch_size=64)
    result = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "r", use_ray=False)
    monkeypatch.undo()
    straight = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "s", use_ray=False)
    assert result.status == "complete" and len(RunStore(result.run_dir).parts()) == 3
    pd.testing.assert_frame_equal(parts_frame(straight.run_dir)[["trial"] + DESIGN + OBJ],
                                  parts_frame(result.run_dir)[["trial"] + DESIGN + OBJ])


def brute_front(frame: pd.DataFrame) -> set:
    ok = frame[frame["admissible"]]
    F = ok[OBJ].to_numpy()
    keep = [not np.any(np.all(F <= f, axis=1) & np.any(F < f, axis=1)) for f in F]
    return set(map(tuple, ok.loc[keep, DESIGN].itertuples(index=False)))


def test_exhaustive_grid_front_equals_brute_force(vocab, tmp_path):
    spec = toy_spec(vocab, sampler="grid", trials=10_000, batch_size=50)
    result = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "grid", use_ray=False)
    assert result.n_trials == 210  # capped at the grid size
    frame = parts_frame(result.run_dir)
    assert len(set(map(tuple, frame[DESIGN].itertuples(index=False)))) == 210
    front = pd.read_parquet(RunStore(result.run_dir).pareto)
    assert set(map(tuple, front[DESIGN].itertuples(index=False))) == brute_front(frame)


def test_resume_after_a_crash_loses_and_repeats_nothing(vocab, tmp_path):
    spec = toy_spec(vocab, trials=320, batch_size=64)
    straight = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "straight", use_ray=False)

    crashing = CrashingScore(at=3)  # batches 0 and 1 commit, batch 2 dies while scoring
    with pytest.raises(Crash):
        run(spec, evaluate_fn=crashing, run_dir=tmp_path / "crashed", use_ray=False, cache_designs=False)
    info = json.loads((tmp_path / "crashed" / "run.json").read_text())
    assert info["status"] == "failed" and info["trials_done"] == 128

    counting = CrashingScore(at=None)
    resumed = run(evaluate_fn=counting, resume=tmp_path / "crashed", use_ray=False, vocab=vocab, cache_designs=False)
    assert resumed.status == "complete" and resumed.n_trials == 320
    assert counting.rows == 320 - 128  # no finished trial scored again
    a, b = parts_frame(straight.run_dir), parts_frame(resumed.run_dir)
    assert b["trial"].tolist() == list(range(320))  # none lost, none twice
    pd.testing.assert_frame_equal(a[["trial"] + DESIGN + OBJ], b[["trial"] + DESIGN + OBJ])
    assert json.loads((tmp_path / "crashed" / "run.json").read_text())["resumes"] == 1


def test_interrupt_stops_cleanly_and_resume_extends(vocab, tmp_path):
    spec = toy_spec(vocab, trials=192, batch_size=64)
    result = run(spec, evaluate_fn=CrashingScore(at=2, exc=lambda m: KeyboardInterrupt()), run_dir=tmp_path / "r", use_ray=False)
    assert result.status == "stopped" and result.n_trials == 64
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "stopped"
    assert (tmp_path / "r" / "pareto.parquet").exists()  # the front of what was done
    more = run(spec, evaluate_fn=toy_score, resume=tmp_path / "r", use_ray=False, trials=256)
    assert more.status == "complete" and parts_frame(more.run_dir)["trial"].tolist() == list(range(256))


SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from conftest import TOY_SPACE, toy_score, toy_vocabulary
    from dse.spec import parse_spec
    from dse.sweep import run

    def slow(table):
        time.sleep(0.15)
        return toy_score(table)

    raw = dict(TOY_SPACE, search=dict(TOY_SPACE["search"], trials=640, batch_size=32))
    spec = parse_spec(raw, source="toy.yaml", vocab=toy_vocabulary())
    run(spec, evaluate_fn=slow, run_dir={run_dir!r}, use_ray=False)
    """
)


def test_resume_after_kill_9(vocab, tmp_path):
    run_dir = tmp_path / "killed"
    tests = str(Path(__file__).parent)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(tests=tests, run_dir=str(run_dir))])
    deadline = time.time() + 60
    while time.time() < deadline and len(list((run_dir / "trials").glob("part-*.parquet"))) < 4:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = len(RunStore(run_dir).parts())
    assert 4 <= committed < 20

    counting = CrashingScore(at=None)
    resumed = run(evaluate_fn=counting, resume=run_dir, use_ray=False, vocab=vocab, cache_designs=False)
    assert counting.rows == 640 - 32 * committed
    frame = parts_frame(resumed.run_dir)
    assert frame["trial"].tolist() == list(range(640))

    raw = dict(TOY_SPACE, search=dict(TOY_SPACE["search"], trials=640, batch_size=32))
    straight = run(parse_spec(raw, source="toy.yaml", vocab=toy_vocabulary()), evaluate_fn=toy_score,
                   run_dir=tmp_path / "straight", use_ray=False)
    pd.testing.assert_frame_equal(parts_frame(straight.run_dir)[DESIGN + OBJ], frame[DESIGN + OBJ])


def test_repeated_designs_are_scored_once(vocab, tmp_path):
    spec = toy_spec(vocab, trials=640, batch_size=64)
    counting = CrashingScore(at=None)
    result = run(spec, evaluate_fn=counting, run_dir=tmp_path / "cached", use_ray=False)
    frame = parts_frame(result.run_dir)
    distinct = len(set(map(tuple, frame[DESIGN].itertuples(index=False))))
    assert counting.rows == result.n_scored == distinct < 640  # NSGA-II proposes designs again
    uncached = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "uncached", use_ray=False, cache_designs=False)
    pd.testing.assert_frame_equal(frame, parts_frame(uncached.run_dir))  # same results either way

    counting = CrashingScore(at=None)  # resuming refills the cache from the parts
    more = run(spec, evaluate_fn=counting, resume=result.run_dir, use_ray=False, trials=704)
    new = parts_frame(more.run_dir).iloc[640:]
    fresh = set(map(tuple, new[DESIGN].itertuples(index=False))) - set(map(tuple, frame[DESIGN].itertuples(index=False)))
    assert counting.rows == len(fresh)


def test_resume_keeps_the_target_unless_extended(vocab, tmp_path):
    spec = toy_spec(vocab, trials=256, batch_size=64)
    first = run(spec, evaluate_fn=toy_score, run_dir=tmp_path / "r", use_ray=False, trials=128)
    assert first.n_trials == 128
    again = run(evaluate_fn=toy_score, resume=tmp_path / "r", use_ray=False, vocab=vocab)
    assert again.status == "complete" and again.n_trials == 128  # nothing left to do
    more = run(evaluate_fn=toy_score, resume=tmp_path / "r", use_ray=False, vocab=vocab, trials=192)
    assert more.n_trials == 192 and parts_frame(more.run_dir)["trial"].tolist() == list(range(192))
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["trials_target"] == 192 and info["resumes"] == 2 and info["status"] == "complete"


def test_score_cache_looks_up_scores_once_and_keeps_order():
    from dse.sweep import ScoreCache

    calls = []

    def score(t):
        calls.append(len(t["a"]))
        return {"a": np.asarray(t["a"]), "b": np.asarray(t["b"]), "y": np.asarray(t["a"], dtype=float) * 10,
                "g": np.array([f"x{v}" for v in t["a"]])}

    cache = ScoreCache(["a", "b"])
    out, n = cache.score({"a": np.array([1, 2, 1, 3]), "b": np.array(["p", "q", "p", "p"]), "c": 5}, score)
    assert n == 3 and calls == [3]
    assert out["y"].tolist() == [10, 20, 10, 30] and out["g"].tolist() == ["x1", "x2", "x1", "x3"]
    out, n = cache.score({"a": np.array([3.0, 4.0, 2.0, 4.0]), "b": np.array(["p", "p", "q", "p"]), "c": 5}, score)
    assert n == 1 and calls == [3, 1]  # 3.0 is 3; only (4, p) is new, once
    assert out["y"].tolist() == [30, 40, 20, 40]
    for i in range(300):  # growth past the first allocation keeps everything findable
        cache.score({"a": np.arange(10 * i + 100, 10 * i + 110), "b": np.array(["z"] * 10)}, score)
    out, n = cache.score({"a": np.array([1, 4, 105, 3099]), "b": np.array(["p", "p", "z", "z"])}, score)
    assert n == 0 and out["y"].tolist() == [10, 40, 1050, 30990]
    assert len(cache) == 4 + 3000


_FAULTS = """
import resource, sys
import numpy as np
sys.path.insert(0, {root!r})
from dse.cluster import keep_freed_memory
kept = keep_freed_memory() if {keep} else False
def step():  # eight 1 MiB temporaries alive at once, then all freed: a model module's pattern
    return sum(float(a.sum()) for a in [np.ones(1 << 17) for _ in range(8)])
for _ in range(3):
    step()  # warm: the heap grows to its peak
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_scoring_actors_keep_freed_memory_instead_of_faulting_it_back():
    """By default glibc trims the heap once more than twice its (adaptive) mmap threshold lies free at its
    top, so eight 1 MiB temporaries freed together go back to the kernel and fault in again, 256 pages
    each, every round (about 102,400 faults for 50 rounds); with keep_freed_memory the heap is reused."""
    root = str(Path(__file__).resolve().parent.parent)
    runs = {}
    for keep in (False, True):
        out = subprocess.run([sys.executable, "-c", _FAULTS.format(root=root, keep=keep)], capture_output=True,
                             text=True, check=True).stdout.split()
        runs[keep] = (out[0] == "True", int(out[1]))
    assert runs[True][0]  # mallopt accepted both settings
    assert runs[False][1] > 50 * 8 * 256 * 0.5  # the temporaries faulted in again, round after round
    assert runs[True][1] < 100
