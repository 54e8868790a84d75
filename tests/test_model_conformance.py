"""Conformance suite every model module must pass (like Optuna's shared sampler tests).

For each module in objectives.MODELS: it reads only the columns it declares, returns exactly the columns
it declares, never writes to its inputs, and a batch gives the same numbers as the rows one at a time.
"""

import itertools

import conformance
import numpy as np
import pytest

import objectives
from objectives.calibration import Calibration
from objectives.pipeline import MODELS, prepare
from objectives.training.steptime import StepTime


def _design_table():
    rows = []
    grid = itertools.product(
        ["gpt3-175b", "llama3-70b", "mixtral-8x7b", "llama3-8b"],
        ["a100-sxm-80gb", "h100-sxm", "gb200"],
        [(8, 1, 1, 1, 1), (4, 4, 1, 2, 1), (8, 8, 2, 4, 2), (2, 3, 1, 1, 4)],  # tp, pp, cp, vp, micro_batch
        ["none", "selective", "full"],
        [0, 1, 3],
    )
    for model, gpu, (tp, pp, cp, vp, mb), rc, zero in grid:
        rows.append(dict(model=model, gpu=gpu, n_gpus=512, global_batch=1024, tp=tp, pp=pp, cp=cp, vp=vp,
                         micro_batch=mb, recompute=rc, zero_stage=zero, ep=8 if model == "mixtral-8x7b" else 1,
                         precision="fp8" if gpu != "a100-sxm-80gb" and zero == 1 else "bf16", train_tokens=1e12))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


@pytest.fixture(scope="module")
def stages():
    """The work table as each module sees it: inputs prepared plus every earlier module's outputs."""
    _, cols = prepare(_design_table())
    return conformance.stages(MODELS, cols, Calibration.load())


@pytest.mark.parametrize("index", range(len(MODELS)), ids=[type(m).__name__ for m in MODELS])
def test_module_conforms(stages, index):
    model, work = stages[index]
    conformance.check_conforms(model, work, Calibration.load(), every=7, rtol=1e-12)


def test_every_metric_is_documented_with_a_unit():
    for name, doc in objectives.METRICS.items():
        assert ";" in doc, name
    for model in MODELS:
        assert model.__doc__ or type(model).__module__, model
        assert type(model).compute is not objectives.base.Model.compute


def test_models_cover_the_design_contract():
    required = {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflop_s_per_gpu", "mfu", "hbm_used_gb",
                "con_memory", "feasible", "time_compute_s", "time_tp_comm_s", "time_pp_bubble_s",
                "time_dp_comm_exposed_s", "time_to_train_days"}
    assert required <= set(objectives.METRICS)


def test_breakdown_sums_to_step_time(stages):
    model, work = next((m, w) for m, w in stages if isinstance(m, StepTime))
    out = model(work, Calibration.load())
    parts = [k for k in objectives.METRICS if k.startswith("time_") and k.endswith("_s") and not k.endswith("_mb_s")
             and k not in ("time_to_train_days", "time_to_train_ideal_days", "time_dp_comm_s", "time_layer_fwd_s", "time_layer_bwd_s",
                           "time_attn_fwd_s", "time_logits_s", "time_qkv_gemm_s", "time_fc1_gemm_s")]
    total = sum(out[k] if k in out else work[k] for k in parts)
    np.testing.assert_allclose(total, out["step_time_s"], rtol=1e-12)
    assert set(parts) == {"time_compute_s", "time_tp_comm_s", "time_cp_comm_s", "time_ep_comm_s", "time_pp_comm_s",
                          "time_pp_bubble_s", "time_dp_comm_exposed_s", "time_optimizer_s"}
