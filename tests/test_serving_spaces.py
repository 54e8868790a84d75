"""The shipped serving spaces (spaces/serving-*.yaml) swept with the real model, their fronts audited for
designs no deployment could run: an instance its mapping does not make, tensor parallelism beyond the NVLink
domain, more requests in flight than the KV cache holds, a target the design misses, a throughput above
what its GPUs' GEMM rate can produce (2 FLOPs per active parameter per token, prompt and output)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.spec import load_spec
from dse.store import RunStore
from dse.sweep import run

ROOT = Path(__file__).resolve().parent.parent
SPACES = sorted([*(ROOT / "spaces").glob("serving-*.yaml"), ROOT / "spaces" / "roadmap-2027-serving.yaml"])
SHOWN = ["gpu", "n_gpus", "precision", "tp", "pp", "ep", "attn_dp", "concurrency", "max_concurrency", "tpot_s", "ttft_s",
         "output_tokens_per_s_per_gpu"]


def test_the_two_serving_spaces_ship():
    assert {p.stem for p in SPACES} >= {"serving-llama3.3-70b", "serving-deepseek-r1"}


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_serving_front_holds_physical_invariants(path, tmp_path):
    spec = load_spec(path)
    spec = spec.with_search(trials=min(spec.search.trials, 512), batch_size=min(spec.search.batch_size, 256))
    result = run(spec, run_dir=tmp_path / "run", use_ray=False)
    assert result.status == "complete"
    front = pd.read_parquet(RunStore(result.run_dir).pareto)
    assert len(front) >= 3
    f = {c: front[c].to_numpy() for c in front.columns}
    peak = np.choose(front["precision"].map({"bf16": 0, "fp8": 1, "fp4": 2}).to_numpy(),
                     [f["gpu_bf16_tflop_s"], f["gpu_fp8_tflop_s"], f["gpu_fp4_tflop_s"]]) * 1e12
    tokens_per_output = (f["input_len"] + f["output_len"]) / f["output_len"]
    ceiling = peak / (2.0 * f["n_params_active"] * tokens_per_output)
    broken = {
        "instance not made by its mapping": f["tp"] * f["attn_dp"] * f["pp"] != f["n_gpus"],
        "tp beyond the NVLink domain": f["tp"] > f["scaleup_size"],
        "more requests than the KV cache holds": f["concurrency"] > f["max_concurrency"],
        "infeasible on the front": ~f["feasible"].astype(bool),
        "above the GEMM ceiling": f["output_tokens_per_s_per_gpu"] > ceiling,
    }
    for c in spec.constraints:
        broken[f"breaks {c.text}"] = c.violation(front[c.column].to_numpy()) > 0
    failures = {k: front.loc[v, [c for c in SHOWN if c in front]].to_string(index=False) for k, v in broken.items() if v.any()}
    assert not failures, f"{path.name}: " + "\n".join(f"-- {k}:\n{t}" for k, t in failures.items())
