"""Conformance of the serving modules (objectives.serving.SERVING_MODELS), as tests/test_model_conformance.py
checks the training ones: each reads only the columns it declares, returns exactly those it declares as
float or bool columns of the table's length, never writes to its inputs, and a batch gives the same numbers
as its rows one at a time."""

import itertools

import conformance
import numpy as np
import pytest

from objectives.serving import SERVING_MODELS, ServingCalibration
from objectives.serving.prepare import prepare_serving


def _table():
    rows = []
    grid = itertools.product(
        [("llama3-70b", 1, 1, 1), ("llama3-70b", 4, 1, 1), ("mixtral-8x7b", 2, 1, 1), ("qwen3-30b-a3b", 1, 4, 4),
         ("deepseek-v3", 1, 8, 8), ("gpt-oss-120b", 2, 1, 1), ("llama4-scout", 1, 1, 1)],  # model, tp, attn_dp, ep
        ["h100-sxm", "b200", "gb200"], [1, 2], [(128, 2048), (2000, 200)], ["trtllm", "vllm", "sglang", "trtllm-2024"],
        [("", "", ""), (64, "", ""), ("", 0.05, ""), ("", "", 3.0)],  # concurrency, tpot_slo_s, request_rate_per_s
        ["aggregated", "disaggregated"],
    )
    for (model, tp, adp, ep), gpu, pp, (isl, osl), engine, (conc, tpot, rate), serving in grid:
        rows.append(dict(model=model, gpu=gpu, n_gpus=tp * adp * pp, tp=tp, attn_dp=adp, ep=ep, pp=pp, input_len=isl,
                         output_len=osl, engine=engine, precision="fp8", kv_precision="fp8", concurrency=conc,
                         tpot_slo_s=tpot, request_rate_per_s=rate, cost_mode="cloud" if pp == 2 else "owned",
                         serving=serving, prefill_pp=1, prefill_n_gpus=tp * adp))
    table = {k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]}
    for k in ("concurrency", "tpot_slo_s", "request_rate_per_s"):
        table[k] = np.array([np.nan if v == "" else float(v) for v in table[k]])
    return table


@pytest.fixture(scope="module")
def stages():
    _, cols = prepare_serving(_table())
    return conformance.stages(SERVING_MODELS, {k: np.array(v) for k, v in cols.items()}, ServingCalibration.load())


@pytest.mark.parametrize("index", range(len(SERVING_MODELS)), ids=[type(m).__name__ for m in SERVING_MODELS])
def test_module_conforms(stages, index):
    model, work = stages[index]
    conformance.check_conforms(model, work, ServingCalibration.load(), every=37, rtol=1e-9)


def test_every_serving_row_is_a_number_or_infeasible(stages):
    model, work = next(stage for stage in stages if type(stage[0]).__name__ == "ServingEconomics")
    out = model(work, ServingCalibration.load())
    feasible = work["feasible"]
    assert feasible.any() and not feasible.all()
    assert np.isfinite(out["usd_per_mtok_out"][feasible]).all()
    model, work = stages[-1]  # the intervals, last: a finite band around every feasible figure
    out = model(work, ServingCalibration.load())
    for name in ("output_tokens_per_s_per_gpu", "usd_per_mtok_out", "tpot_s", "ttft_s"):
        lo, hi, value = out[f"{name}_lo"][feasible], out[f"{name}_hi"][feasible], work[name][feasible]
        assert np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < value).all() and (value < hi).all(), name
    assert np.isfinite(work["tpot_s"]).all() and (work["tpot_s"] > 0).all()
