"""A space that sweeps ``instance`` beside ``gpu`` and ``pricing`` (spaces/llama3.1-405b-clouds.yaml): a rented
design is its instance's GPU whatever the row's ``gpu`` says, an owned one has no pricing, so the sweep scores
each distinct design once and stores it once, and its front is the front of the whole cartesian product."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dse.problem import default_scorer
from dse.space import Space
from dse.spec import parse_spec
from dse.store import RunStore
from dse.store.pareto import front_table
from dse.sweep import run
from objectives import catalog

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["owned", "coreweave-hgx-h100", "coreweave-hgx-b200", "aws-p5.48xlarge"]
DESIGN = ["instance", "pricing", "gpu", "n_gpus"]


def _spec(**search):
    raw = yaml.safe_load((ROOT / "spaces" / "llama3.1-405b-clouds.yaml").read_text())
    raw["cluster"].update(instance=INSTANCES, pricing=["on_demand", "spot"], gpu=["h100-sxm", "b200"],
                          n_gpus=[4032, 8064])
    raw["search"].update(search)
    return parse_spec(raw, source="spaces/llama3.1-405b-clouds.yaml (narrowed)")


class Recorder:
    """The production scorer, keeping the design rows it was asked to score."""

    def __init__(self, space: Space) -> None:
        self.score, self.rows = default_scorer(space), []

    def __call__(self, table):
        n = len(table["instance"])
        self.rows.append(pd.DataFrame({c: np.broadcast_to(np.asarray(table[c], dtype=object), (n,)) for c in DESIGN}))
        return self.score(table)


def _keys(frame: pd.DataFrame) -> list[tuple]:
    """Each row's design, a blank pricing (None or NaN) as ''."""
    f = frame[DESIGN].astype(object).where(frame[DESIGN].notna(), "")
    return [(i, p, g, int(n)) for i, p, g, n in f.itertuples(index=False)]


def test_each_rented_design_is_scored_once_and_stored_once(tmp_path):
    """32 grid points, 16 designs: owned 2 GPUs x 2 sizes (no pricing), rented 3 instances x 2 pricings x 2
    sizes (the instance's GPU). Every one is scored once, with its canonical cells, and is one trial."""
    spec = _spec()
    space = Space(spec)
    assert space.grid_size() == 2 * 2 + 3 * 2 * 2 == 16
    recorder = Recorder(space)
    result = run(spec, evaluate_fn=recorder, run_dir=tmp_path / "grid", use_ray=False)
    assert result.status == "complete" and result.n_trials == 16 and result.n_scored == 16
    scored = pd.concat(recorder.rows, ignore_index=True)
    keys = _keys(scored)
    assert len(keys) == len(set(keys)) == 16  # no design scored twice
    gpus = {iid: e["gpu"] for iid, e in catalog.instances().items()}
    for instance, pricing, gpu, _ in keys:
        if instance == "owned":
            assert pricing == "" and gpu in ("h100-sxm", "b200")
        else:
            assert gpu == gpus[instance] and pricing in ("on_demand", "spot")
    assert {k[0] for k in keys} == set(INSTANCES)
    trials = RunStore(result.run_dir).read_trials()
    assert sorted(_keys(trials)) == sorted(keys)  # one trial per design, stored with the cells it was scored with


def test_the_front_is_the_whole_products_front(tmp_path):
    """Scoring all 32 points of the cartesian product (each rented design under both gpu values, each owned
    one under both pricings) gives the same front, point for point, as the sweep of the 16 designs."""
    spec = _spec()
    space = Space(spec)
    result = run(spec, run_dir=tmp_path / "grid", use_ray=False)
    grid = space.grid()
    params = [dict(zip(grid, c)) for c in pd.MultiIndex.from_product(list(grid.values()))]
    assert len(params) == 32
    full = pd.DataFrame({k: np.broadcast_to(np.asarray(v), (32,)) if np.ndim(v) else np.full(32, v, dtype=object)
                         for k, v in default_scorer(space)(space.table(params)).items()})
    objectives = {o.metric: o.direction for o in spec.objectives}
    full["admissible"] = full["feasible"].astype(bool) & (full["time_to_train_days"] <= 120)
    full["key"] = _keys(full)
    brute = front_table(full, objectives, feasible="admissible", dedupe=["key"])
    swept = pd.read_parquet(RunStore(result.run_dir).pareto)
    assert len(swept) >= 3 and sorted(_keys(swept)) == sorted(brute["key"])
    a = swept.assign(key=_keys(swept)).set_index("key").sort_index()
    b = brute.set_index("key").sort_index()
    for metric in objectives:
        np.testing.assert_allclose(a[metric].to_numpy(float), b[metric].to_numpy(float), rtol=1e-12)


def test_a_sampled_sweep_scores_each_distinct_design_once(tmp_path):
    """Random sampling proposes designs again under other gpu or pricing values: 64 trials over 16 designs
    score each distinct design once (the cache keys on the canonical cells) and tell every trial its result."""
    spec = _spec(sampler="random", trials=64, batch_size=32)
    result = run(spec, run_dir=tmp_path / "random", use_ray=False)
    trials = RunStore(result.run_dir).read_trials()
    assert result.n_trials == len(trials) == 64
    assert result.n_scored == len(set(_keys(trials))) <= 16
    same = trials.assign(key=_keys(trials)).groupby("key")["run_cost_usd"].nunique(dropna=False)
    assert (same == 1).all()  # every trial of one design was told the same result
