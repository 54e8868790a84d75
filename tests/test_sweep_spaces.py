"""The shipped spaces with the real model, and `dse sweep` on the command line.

Every ``spaces/*.yaml`` validates and runs a few trials; the small space's exhaustive front (narrowed to
stay quick) equals a brute-force Pareto computation; a bad space is one line on stderr and exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dse.cli import main
from dse.space import Space
from dse.spec import load_spec, parse_spec
from dse.store import RunStore, read_metadata
from dse.sweep import run

ROOT = Path(__file__).resolve().parent.parent
SPACES = sorted((ROOT / "spaces").glob("*.yaml"))  # (a space's price files live in spaces/quotes/)

pytest.importorskip("objectives")


def test_the_four_spaces_and_the_default_ship():
    names = {p.stem for p in SPACES}
    assert {"default", "gpt3-175b", "llama3.1-405b", "mixtral-8x7b", "small"} <= names


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_shipped_space_validates_and_runs(path, tmp_path):
    spec = load_spec(path)
    assert spec.description and spec.objectives
    spec = spec.with_search(trials=12, batch_size=6)
    result = run(spec, run_dir=tmp_path / "run", use_ray=False)
    assert result.status == "complete" and result.n_trials == 12
    frame = RunStore(result.run_dir).read_trials()
    assert frame["trial"].tolist() == list(range(12))
    for o in spec.objectives:
        assert o.metric in frame
    serving = "input_len" in frame.columns
    mapping = {"tp", "pp", "ep", "attn_dp", "concurrency"} if serving else {"tp", "pp", "dp", "micro_batch"}
    assert mapping | {"feasible", "admissible"} <= set(frame.columns)
    meta = read_metadata(RunStore(result.run_dir).part_path(0))
    assert meta["space_hash"] == spec.space_hash
    assert all(o.metric in meta["units"] for o in spec.objectives)


def brute_front(frame: pd.DataFrame, objectives: dict[str, str], design: list[str]) -> set:
    ok = frame[frame["admissible"]].drop_duplicates(subset=design)
    F = ok[list(objectives)].to_numpy(dtype=np.float64) * np.array([1 if d == "min" else -1 for d in objectives.values()])
    keep = [not np.any(np.all(F <= f, axis=1) & np.any(F < f, axis=1)) for f in F]
    return set(map(tuple, ok.loc[keep, design].itertuples(index=False)))


def test_small_space_exhaustive_front_equals_brute_force(tmp_path):
    raw = yaml.safe_load((ROOT / "spaces" / "small.yaml").read_text())
    raw["cluster"].update(gpu=["h100-sxm", "b200"], n_gpus={"min": 64, "max": 512, "scale": "pow2"},
                          gpu_hbm_tbyte_s={"min": 3.0, "max": 8.0, "step": 2.5}, nic_gbyte_s=[25, 50])
    spec = parse_spec(raw, source="spaces/small.yaml (narrowed)")
    space = Space(spec)
    assert space.grid_size() == 2 * 4 * 2 * 3 * 2
    result = run(spec.with_search(trials=10_000, batch_size=32), run_dir=tmp_path / "grid", use_ray=False)
    frame = RunStore(result.run_dir).read_trials()
    assert len(frame) == space.grid_size()  # every design once
    objectives = {o.metric: o.direction for o in spec.objectives}
    front = pd.read_parquet(RunStore(result.run_dir).pareto)
    got = set(map(tuple, front[space.design_columns].itertuples(index=False)))
    assert got == brute_front(frame, objectives, space.design_columns)
    assert len(got) >= 2


BAD = [
    ("colour: red\n", "bad.yaml: colour: unknown key; valid: name, description, workload"),
    ("search: {sampler: nsga3}\n", "bad.yaml: search.sampler: 'nsga3' is not a sampler; valid: nsga2, tpe, random, grid"),
    ("cluster: {gpu: [h100-sxm, tpu-v9]}\n", "bad.yaml: cluster.gpu[1]: unknown gpu 'tpu-v9'; valid: "),
    ("cluster: {n_gpus: {min: 4096, max: 1024}}\n", "bad.yaml: cluster.n_gpus: empty range: min 4096 is above max 1024"),
    ("cluster: {n_gpus: lots}\n", "bad.yaml: cluster.n_gpus: must be a number, not 'lots'"),
    ("objectives: [{metric: happiness, direction: max}]\n", "bad.yaml: objectives[0].metric: 'happiness' is not a metric column; valid: "),
    ("constraints: ['power <= 30']\n", "bad.yaml: constraints[0]: unknown column 'power'; did you mean 'power_mw'"),
    ("workload: {model: gpt5}\n", "bad.yaml: workload.model: unknown model 'gpt5'; did you mean 'gpt3-175b'? valid: "),
    ("cluster: {n_heads: 0}\n", "bad.yaml: cluster.n_heads: the model rejects this space: "),
    ("cluster: {network: [ib-ndr-400, nvl72-ib-xdr-800]}\n",
     "bad.yaml: cluster.network[1]: network 'nvl72-ib-xdr-800' was removed: a 72-GPU NVLink domain belongs to the "
     "GPU's system, not to the scale-out network; use gpu: gb200 or gb300 with network: ib-xdr-800, or keep the "
     "GPU and set scaleup_size: 72 as a what-if"),
    # a column renamed for its unit, wherever a space names it: the file, the key and the new name
    ("cluster: {nic_gbps: [25, 50]}\n", "bad.yaml: cluster.nic_gbps: 'nic_gbps' was renamed 'nic_gbyte_s' (GB/s)"),
    ("workload: {gpu_hbm_tbps: 8}\n", "bad.yaml: workload.gpu_hbm_tbps: 'gpu_hbm_tbps' was renamed 'gpu_hbm_tbyte_s' (TB/s)"),
    ("objectives: [{metric: model_tflops_per_gpu, direction: max}]\n",
     "bad.yaml: objectives[0].metric: 'model_tflops_per_gpu' was renamed 'model_tflop_s_per_gpu' (TFLOP/s per GPU)"),
    ("constraints: ['storage_write_gbps >= 40']\n",
     "bad.yaml: constraints[0]: 'storage_write_gbps' was renamed 'storage_write_gbyte_s' (GB/s)"),
]


@pytest.mark.parametrize("patch, expected", BAD, ids=[b[0].split(":")[0] for b in BAD])
def test_bad_space_is_one_line_and_exit_2(patch, expected, tmp_path, capsys, monkeypatch):
    raw = yaml.safe_load((ROOT / "spaces" / "gpt3-175b.yaml").read_text())
    change = yaml.safe_load(patch)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "bad.yaml", "--no-ray"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse sweep: error: ")
    assert expected in err
    assert not (tmp_path / "results").exists()  # nothing ran


def test_cli_usage_errors(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: no such space file" in capsys.readouterr().err
    assert main(["sweep"]) == 2
    assert "give a space file, or --resume RUN_DIR" in capsys.readouterr().err
    assert main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert main(["sweep", str(ROOT / "spaces" / "small.yaml"), "--workers", "0"]) == 2
    assert "--workers: must be at least 1" in capsys.readouterr().err


def test_cli_sweep_prints_the_front_and_resumes(tmp_path):
    raw = yaml.safe_load((ROOT / "spaces" / "gpt3-175b.yaml").read_text())
    raw["search"].update(trials=16, batch_size=8)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    cmd = [sys.executable, "-m", "dse.cli", "sweep", "s.yaml", "--no-ray", "--out", "run"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Pareto front:" in out.stdout and "time_to_train_days (min)" in out.stdout
    assert "results: run/" in out.stdout
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "dse.cli", "sweep", "--resume", "run", "--trials", "24", "--no-ray", "--quiet"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert RunStore(tmp_path / "run").read_trials()["trial"].tolist() == list(range(24))
    bad = subprocess.run([sys.executable, "-m", "dse.cli", "sweep", "missing.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip() == "dse sweep: error: missing.yaml: no such space file"


def test_a_table_naming_the_removed_network_is_one_line_and_exit_2(tmp_path, capsys):
    table = tmp_path / "designs.csv"
    table.write_text("model,gpu,n_gpus,global_batch,network\n"
                     "llama3-70b,b200,1024,1024,ib-xdr-800\n"
                     "llama3-70b,h200-sxm,1152,1152,nvl72-ib-xdr-800\n")
    assert main(["evaluate", str(table), "-o", str(tmp_path / "out.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "network 'nvl72-ib-xdr-800' was removed" in err and "gpu: gb200 or gb300" in err
    assert not (tmp_path / "out.parquet").exists()


def test_the_405b_space_names_real_systems_in_whole_racks():
    """GPU counts are whole NVL72 racks and whole 8-GPU servers; the fabric never sets the NVLink domain."""
    spec = load_spec(ROOT / "spaces" / "llama3.1-405b.yaml")
    dims = {d.name: d for d in spec.dimensions}
    assert set(dims["gpu"].values) == {"b200", "gb200", "gb300"}
    assert all(n % 72 == 0 and n % 8 == 0 for n in dims["n_gpus"].values)
    assert "scaleup_size" not in dims
    assert set(dims["network"].values) == {"ib-ndr-400", "ib-xdr-800"}
