"""Seeded sweeps give the trials and the front they gave when they were recorded.

``tests/data/pinned_sweeps.json`` holds, for each run below, every trial (its number, the values of the
space's searched columns, its objective values and whether it is admissible) and the front
(``pareto.parquet``: the same columns, in its order). The runs were recorded from the engine as it stood
before its packages were laid out by data flow (issue 13), so this test proves that the layout changed no
trial and no front. The runs:

- ``small-nsga2``: ``spaces/small.yaml`` with NSGA-II, 384 designs in batches of 64, seed 0, on the real
  model (``objectives.search_mapping`` of each design), in process (the path of ``--no-ray``);
- ``toy-tpe``, ``toy-random``, ``toy-grid``, ``toy-nsga2``: the toy space of ``conftest.py`` with each
  sampler on the toy model (the per-trial ask of Optuna's samplers, the exhaustive grid, and NSGA-II's
  whole-generation ask, independent of the physics).

Design columns are compared by position, in the order of the space's ``cluster`` section (a column renamed
for its unit is the same column); parameters exactly, objective values to 1e-12 relative (the model's
arithmetic is deterministic; the tolerance only absorbs a last-bit difference of a vectorized ``exp`` on
another CPU). A deliberate change of the model's physics changes ``small-nsga2``: record it again with
``python tests/test_pinned_sweeps.py`` (and say why in the commit).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "pinned_sweeps.json"
#: the Optuna journal (``study.journal``) of :data:`JOURNAL_RUN`, as the engine wrote it with Optuna 5.0.0
JOURNAL = DATA.with_name("pinned-toy-nsga2.journal")
JOURNAL_RUN = ("toy", {"sampler": "nsga2", "trials": 48, "batch_size": 16, "seed": 3})
SMALL = ROOT / "spaces" / "small.yaml"

#: name -> (space: "small" or the toy space, search settings)
RUNS = {
    "small-nsga2": ("small", {"sampler": "nsga2", "trials": 384, "batch_size": 64, "seed": 0}),
    "toy-tpe": ("toy", {"sampler": "tpe", "trials": 96, "batch_size": 32, "seed": 3}),
    "toy-random": ("toy", {"sampler": "random", "trials": 128, "batch_size": 64, "seed": 3}),
    "toy-grid": ("toy", {"sampler": "grid", "trials": 10_000, "batch_size": 50, "seed": 3}),
    "toy-nsga2": ("toy", {"sampler": "nsga2", "trials": 320, "batch_size": 64, "seed": 3}),
}


def _plain(value):
    """A cell as JSON: numpy scalars as Python numbers, text as text."""
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)
    return value


def sweep(name: str, run_dir: Path) -> dict:
    """Run one of :data:`RUNS` into ``run_dir``; returns its trials and front as plain data."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import TOY_SPACE, toy_score, toy_vocabulary

    from dse.space import Space
    from dse.spec import load_spec, parse_spec
    from dse.store import RunStore
    from dse.sweep import run

    where, search = RUNS[name] if name in RUNS else JOURNAL_RUN
    if where == "small":
        spec = load_spec(SMALL).with_search(**search)
        score = None
    else:
        raw = copy.deepcopy(TOY_SPACE)
        raw["search"].update(search)
        spec = parse_spec(raw, source="toy.yaml", vocab=toy_vocabulary())
        score = toy_score
    result = run(spec, evaluate_fn=score, run_dir=run_dir, use_ray=False, report=False)
    design = Space(spec).design_columns
    objectives = [o.metric for o in spec.objectives]
    store = RunStore(result.run_dir)
    trials = store.read_trials()
    front = result.front

    def rows(frame, extra):
        return [[_plain(v) for v in row] for row in frame[design + objectives + extra].itertuples(index=False)]

    return {
        "design_columns": design,
        "objectives": objectives,
        "trials": rows(trials, ["admissible"]),
        "numbers": [int(t) for t in trials["trial"]],
        "front": rows(front, []),
    }


def _compare_rows(got: list, want: list, n_design: int, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} rows, recorded {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g[:n_design] == w[:n_design], f"{what} row {i}: design {g[:n_design]}, recorded {w[:n_design]}"
        g_num = np.array(g[n_design:], dtype=np.float64)
        w_num = np.array(w[n_design:], dtype=np.float64)
        np.testing.assert_allclose(g_num, w_num, rtol=1e-12, atol=0, err_msg=f"{what} row {i}")


@pytest.mark.parametrize("name", list(RUNS))
def test_a_seeded_sweep_gives_the_recorded_trials_and_front(name, tmp_path):
    recorded = json.loads(DATA.read_text())[name]
    got = sweep(name, tmp_path / "run")
    assert len(got["design_columns"]) == len(recorded["design_columns"])
    assert got["numbers"] == list(range(len(recorded["trials"])))
    n = len(recorded["design_columns"])
    _compare_rows(got["trials"], recorded["trials"], n, f"{name} trials")
    _compare_rows(got["front"], recorded["front"], n, f"{name} front")
    assert len(recorded["front"]) > 1 and len(recorded["trials"]) >= 96  # a pin that pins something


def _journal_lines(path: Path) -> list[dict]:
    """The journal's records, without what differs from run to run (the writer's id, the times)."""
    out = []
    for line in path.read_text().splitlines():
        log = json.loads(line)
        log.pop("worker_id", None)
        for key in ("datetime_start", "datetime_complete"):
            log.pop(key, None)
        out.append(log)
    return out


def test_the_recorded_journal_loads_with_optunas_storage_and_is_what_the_engine_writes(tmp_path):
    """The journal recorded with Optuna 5.0.0 opens with Optuna's own ``JournalStorage``, holds the
    trials a fresh seeded run holds (parameters, values, constraints, generations, NSGA-II's parents), and
    the engine writes the same records today, field for field (but the writer's id and the times)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    copy_of = tmp_path / "recorded.journal"
    shutil.copy(JOURNAL, copy_of)
    sweep("journal", tmp_path / "run")
    storages = [JournalStorage(JournalFileBackend(str(p))) for p in (copy_of, tmp_path / "run" / "study.journal")]
    recorded, fresh = (optuna.load_study(study_name="dse", storage=s) for s in storages)
    attrs = [s.get_study_system_attrs(s.get_study_id_from_name("dse")) for s in storages]
    assert len(recorded.trials) == len(fresh.trials) == 48
    assert recorded.directions == fresh.directions == [optuna.study.StudyDirection.MINIMIZE] * 2
    for a, b in zip(recorded.trials, fresh.trials):
        assert (a.number, a.state, a.params, a.system_attrs) == (b.number, b.state, b.params, b.system_attrs)
        assert _same((a.values, a.constraints), (b.values, b.constraints))
    assert attrs[0] == attrs[1] and len(attrs[0]) == 2  # NSGA-II's parents of generations 1 and 2
    assert any(c > 0 for t in recorded.trials for c in t.constraints.values())  # infeasible designs are told
    assert _same(_journal_lines(copy_of), _journal_lines(tmp_path / "run" / "study.journal"))


def _same(a, b, rel: float = 1e-12) -> bool:
    """Equal field for field, floats to within ``rel``: numpy's SIMD paths differ between CPUs (AVX-512 or
    AVX2) in the last bit of a sum, which is not a change of the engine's records."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=rel, abs_tol=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b))
    return a == b


def record() -> None:
    """Write tests/data/pinned_sweeps.json from the engine and model as they are now."""
    out = {}
    DATA.parent.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in RUNS:
            out[name] = sweep(name, Path(tmp) / name)
            print(f"{name}: {len(out[name]['trials'])} trials, front of {len(out[name]['front'])}")
        sweep("journal", Path(tmp) / "journal")
        shutil.copy(Path(tmp) / "journal" / "study.journal", JOURNAL)
    DATA.write_text(json.dumps(out, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    record()
