"""Engines run only on the vendors they support (issue 23): TensorRT-LLM (``trtllm``, ``trtllm-2024``) on NVIDIA
GPUs only, vLLM and SGLang on NVIDIA and AMD (objectives.serving.engines.ENGINE_VENDORS, with the engines'
docs). A space or a table that fixes such a pair is an input error, one line and exit 2; a space that sweeps
engines and GPUs keeps the pairs that run, the others infeasible designs with a reason (``con_engine_vendor``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_run import run_cli

from dse.errors import UserError
from dse.problem import check_engines
from dse.spec import parse_spec
from dse.store import RunStore
from objectives.serving import evaluate_serving
from objectives.serving.engines import ENGINE_VENDORS, ENGINES, VENDORS, engines_for, gpu_vendors

REPO = Path(__file__).resolve().parents[1]
MI300X = "engine trtllm does not run on mi300x (an AMD GPU); engines for mi300x: vllm, sglang"


def _space(gpu: str, engine: str | None, extra: str = "") -> str:
    """A small serving space (Llama 3 8B on one GPU, fp8) with the given ``gpu`` and ``engine`` lines."""
    return ("name: vendors\nworkload:\n  model: llama3-8b\n  input_len: 1000\n  output_len: 1000\n  kv_precision: fp8\n"
            + (f"  engine: {engine}\n" if engine and not engine.startswith("[") else "")
            + f"cluster:\n  gpu: {gpu}\n  n_gpus: 1\n  precision: fp8\n"
            + (f"  engine: {engine}\n" if engine and engine.startswith("[") else "") + extra
            + "objectives:\n  - {metric: usd_per_mtok_out, direction: min}\n"
              "  - {metric: tokens_per_s_per_user, direction: max}\n"
              "search: {sampler: grid, trials: 4, batch_size: 4, seed: 0}\n")


def _sweep(tmp_path, capsys, text: str):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    rc, out, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", tmp_path / "run")
    return path, rc, err


def test_every_catalog_gpu_has_a_vendor_the_engines_know():
    """gpus.yaml names each GPU after its maker: 'NVIDIA ...' or 'AMD Instinct ...'."""
    assert set(gpu_vendors().values()) <= set(VENDORS)
    assert gpu_vendors()["b200"] == "NVIDIA" and gpu_vendors()["mi300x"] == "AMD"
    assert tuple(ENGINE_VENDORS) == ENGINES
    assert engines_for("mi355x") == ("vllm", "sglang") and engines_for("h100-sxm") == ENGINES


def test_an_engine_on_a_gpu_it_does_not_support_is_infeasible_with_its_reason():
    """TensorRT-LLM (either) on an MI300X: con_engine_vendor 1 and the reason first; vLLM and SGLang on the
    MI300X, TensorRT-LLM on a B200, run (Llama 3 8B fp8 fits one GPU of either)."""
    pairs = [("mi300x", "trtllm"), ("mi300x", "trtllm-2024"), ("mi300x", "vllm"), ("mi300x", "sglang"), ("b200", "trtllm")]
    n = len(pairs)
    out = evaluate_serving({"model": ["llama3-8b"] * n, "gpu": [g for g, _ in pairs], "engine": [e for _, e in pairs],
                            "n_gpus": [1] * n, "tp": [1] * n, "precision": ["fp8"] * n, "kv_precision": ["fp8"] * n,
                            "input_len": [1000] * n, "output_len": [1000] * n, "concurrency": [64] * n})
    assert np.asarray(out["con_engine_vendor"]).tolist() == [1, 1, 0, 0, 0]
    assert np.asarray(out["feasible"]).tolist() == [False, False, True, True, True]
    assert list(out["infeasible_reason"][:2]) == [
        "engine: trtllm does not run on AMD GPUs; engines for them: vllm, sglang",
        "engine: trtllm-2024 does not run on AMD GPUs; engines for them: vllm, sglang"]


def test_a_space_pairing_trtllm_with_an_mi300x_is_one_line(tmp_path, capsys):
    path, rc, err = _sweep(tmp_path, capsys, _space("mi300x", "trtllm"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{path}: workload.engine: {MI300X}" in err, err
    assert not (tmp_path / "run").exists()


def test_the_command_line_says_it_in_one_line(tmp_path):
    """The same space through the installed command (a subprocess): exit 2, one line on stderr, no traceback."""
    path = tmp_path / "space.yaml"
    path.write_text(_space("mi300x", "trtllm"))
    done = subprocess.run([sys.executable, "-m", "dse.cli", "sweep", str(path), "--no-ray", "--quiet", "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert done.stderr.startswith("dse sweep: error: ") and MI300X in done.stderr


def test_the_default_engine_on_an_amd_gpu_says_it_is_the_default(tmp_path, capsys):
    _, rc, err = _sweep(tmp_path, capsys, _space("mi300x", None))
    assert rc == 2 and f"workload.engine: {MI300X} (the space gives no engine: trtllm is the default)" in err, err


def test_a_space_where_no_pair_runs_is_one_line(tmp_path, capsys):
    _, rc, err = _sweep(tmp_path, capsys, _space("[mi300x, mi325x]", "[trtllm, trtllm-2024]"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert ("cluster.engine: engines trtllm, trtllm-2024 run on none of its GPUs mi300x, mi325x (AMD): no design of "
            "this space can run; engines for those GPUs: vllm, sglang") in err, err


def test_a_swept_space_keeps_the_pairs_that_run(tmp_path, capsys):
    """gpu [b200, mi300x] x engine [trtllm, vllm], the grid's four designs: TensorRT-LLM on the MI300X is
    infeasible with its reason, the other three run (vLLM on the MI300X among them)."""
    _, rc, err = _sweep(tmp_path, capsys, _space("[b200, mi300x]", "[trtllm, vllm]"))
    assert rc == 0, err
    trials = RunStore(tmp_path / "run").read_trials()
    by_pair = {(g, e): row for (g, e), row in trials.set_index(["gpu", "engine"]).iterrows()}
    assert set(by_pair) == {("b200", "trtllm"), ("b200", "vllm"), ("mi300x", "trtllm"), ("mi300x", "vllm")}
    bad = by_pair[("mi300x", "trtllm")]
    assert not bad["feasible"] and bad["con_engine_vendor"] == 1
    assert bad["infeasible_reason"] == "engine: trtllm does not run on AMD GPUs; engines for them: vllm, sglang"
    for pair in (("b200", "trtllm"), ("b200", "vllm"), ("mi300x", "vllm")):
        assert by_pair[pair]["feasible"] and by_pair[pair]["con_engine_vendor"] == 0, pair


def test_rented_designs_run_on_their_instance_gpu():
    """A space renting a B200 instance beside owned MI300Xs, with TensorRT-LLM: the rented designs run, so the
    space is valid (its owned MI300X designs are infeasible); owned MI300Xs alone are not."""
    base = {"workload": {"model": "llama3-8b", "input_len": 1000, "output_len": 1000, "engine": "trtllm"},
            "objectives": ["usd_per_mtok_out"]}
    mixed = parse_spec({**base, "cluster": {"gpu": "mi300x", "n_gpus": 1, "instance": ["owned", "coreweave-hgx-b200"]}})
    check_engines(mixed)
    owned = parse_spec({**base, "cluster": {"gpu": "mi300x", "n_gpus": 1, "instance": "owned"}})
    with pytest.raises(UserError, match="engine trtllm does not run on mi300x"):
        check_engines(owned)


def test_dse_evaluate_names_the_row_engine_and_gpu(tmp_path, capsys):
    src = tmp_path / "serve.csv"
    src.write_text("model,gpu,n_gpus,tp,precision,kv_precision,engine,input_len,output_len\n"
                   "llama3-8b,b200,1,1,fp8,fp8,trtllm,1000,1000\n"
                   "llama3-8b,mi300x,1,1,fp8,fp8,trtllm,1000,1000\n")
    rc, _, err = run_cli(capsys, "evaluate", src, "-o", tmp_path / "out.parquet")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and not (tmp_path / "out.parquet").exists()
    assert f"{src}, row 2, column 'engine': {MI300X}" in err, err
    # vLLM on the MI300X is fine
    src.write_text(src.read_text().replace("mi300x,1,1,fp8,fp8,trtllm", "mi300x,1,1,fp8,fp8,vllm"))
    rc, out, err = run_cli(capsys, "evaluate", src, "-o", tmp_path / "out.parquet")
    assert rc == 0 and "2 serving designs, 2 feasible" in out, err
    assert pd.read_parquet(tmp_path / "out.parquet")["con_engine_vendor"].tolist() == [0, 0]
