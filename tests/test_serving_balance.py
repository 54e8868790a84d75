"""An expert load balancer in the serving model (objectives/serving/balance.py): the busiest expert-parallel
GPU's load against TensorRT-LLM tech blog 4's Table 1 (DeepSeek-R1, 32 GB200), the redundant copies' weight
bytes by hand from the architecture (DeepSeek-V3 config.json: hidden 7168, moe_intermediate_size 2048, 256
routed experts, 58 MoE layers), the layout rules and their reasons, the input errors, and the interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving.balance import EPLB_SLOT_CV, HOT_EXPERT_RATIO, IMBALANCE_MAX, expected_max_normal, expert_imbalance
from objectives.serving.memory import BYTES_PER_VALUE
from objectives.serving.prepare import prepare_serving
from objectives.serving.step import step_design
from objectives.table import InputError
from objectives.training.transformer import TransformerMath

H, FF, E, MOE_LAYERS = 7168, 2048, 256, 58
EXPERT_PARAMS = E * 3 * H * FF  # one layer's routed experts: 11,274,289,152


def _cols(ep, eplb, redundant, cv=1.28):
    c = {k: np.array([float(v)]) for k, v in dict(ep=ep, moe_experts=E, eplb=eplb, redundant_experts=redundant).items()}
    return expert_imbalance(c, cv)[0]


def test_expected_largest_of_n_normals():
    """Closed forms at n = 2 and 3 (1 / sqrt(pi), 3 / (2 sqrt(pi))) and Harter's table (Biometrika 48, 1961:
    1.02938 at 4, 1.16296 at 5, 1.53875 at 10); none among 1."""
    m = expected_max_normal(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 10.0]))
    assert m[0] == pytest.approx(0.0, abs=1e-9)
    assert m[1] == pytest.approx(1.0 / math.sqrt(math.pi), abs=1e-6)
    assert m[2] == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-6)
    assert m[3:] == pytest.approx([1.02938, 1.16296, 1.53875], abs=2e-5)


def test_table1_without_a_balancer():
    """EP 32, 8 experts a rank: the measured per-expert cv 1.28 (Table 1's 164.1 / 128) gives 1 + 1.28 x 2.0697 /
    sqrt(8) = 1.937, under the measured 2.564 (a heavier tail than independent normal experts); the fitted cv's
    box end 2.14 reproduces it, and no layout goes past the measured cap."""
    assert _cols(32, 0, 0) == pytest.approx(1.0 + 1.28 * 2.06967 / math.sqrt(8), rel=1e-5)
    assert _cols(32, 0, 0) == pytest.approx(1.937, abs=5e-4)
    assert 1.0 + 2.14 * 2.06967 / math.sqrt(8) == pytest.approx(2.564, abs=5e-3)
    assert _cols(32, 0, 0, cv=2.14) == IMBALANCE_MAX  # 2.566 by the form, the measured cap 2.55
    assert _cols(72, 0, 0, cv=2.14) == IMBALANCE_MAX


def test_table1_with_a_balancer():
    """Table 1's balanced rows: 9 slots a rank at EP 32 (288 slots) measured 1 + 0.109, which EPLB_SLOT_CV is
    derived from; 8 slots a rank at EP 36 (the same 288) measured 1 + 0.115, which it then predicts to 2%."""
    assert EPLB_SLOT_CV == pytest.approx(0.109 * 3 / 2.06967, abs=5e-4)
    assert _cols(32, 1, 32) - 1.0 == pytest.approx(0.109, rel=0.01)
    assert _cols(36, 1, 32) - 1.0 == pytest.approx(0.115, rel=0.03)


def test_the_hottest_expert_binds_without_copies():
    """A balancer without copies cannot split the hottest expert (11.95 mean experts' load, Table 1 by expert
    slot): at EP 32 a GPU's mean is 8 experts', so the busiest carries 11.95 / 8 = 1.494; one copy halves it,
    and the spread then binds. At EP 8 (32 experts a GPU) the spread binds alone."""
    assert _cols(32, 1, 0) == pytest.approx(HOT_EXPERT_RATIO * 32 / E, rel=1e-12)
    assert _cols(32, 1, 0) == pytest.approx(1.494, abs=5e-4)
    assert _cols(8, 1, 0) == pytest.approx(1.0 + EPLB_SLOT_CV * 1.42360 / math.sqrt(32), rel=1e-5)
    assert _cols(1, 1, 0) == 1.0  # one expert-parallel rank: nothing to balance
    assert _cols(32, 1, 0, cv=0.0) == 1.0  # never worse than the default placement


def _design(**extra):
    table = dict(model=["deepseek-r1"], gpu=["gb200"], n_gpus=[32], tp=[1], attn_dp=[32], ep=[32], precision=["fp4"],
                 kv_precision=["fp8"], input_len=[1000], output_len=[1000], concurrency=[2048], moe_all_to_all=[1])
    table.update({k: [v] for k, v in extra.items()})
    return table


def test_redundant_copies_weight_bytes_by_hand():
    """32 copies at EP 32: one more expert a GPU in each of 58 layers, 3 x 7168 x 2048 weights at NVFP4's 0.5625
    bytes (4 bits and an 8-bit scale a block of 16): 1.437 GB a GPU more, and a step that reads every slot reads
    them too."""
    base = evaluate_serving(_design(eplb=1))
    more = evaluate_serving(_design(eplb=1, redundant_experts=32))
    hand = BYTES_PER_VALUE[2] * MOE_LAYERS * (EXPERT_PARAMS / E) * 32 / 32 / 1e9
    assert hand == pytest.approx(1.4368, abs=1e-4)
    assert more["weights_gb"][0] - base["weights_gb"][0] == pytest.approx(hand, rel=1e-9)
    cal = ServingCalibration.load()
    design = {}
    for r in (0, 32):
        _, c = prepare_serving(_design(eplb=1, redundant_experts=r))
        c.update(TransformerMath.parameters(c))
        design[r] = step_design(c, cal)
    assert design[32]["expert_mem"][0] / design[0]["expert_mem"][0] == pytest.approx(288 / 256, rel=1e-12)
    assert design[32]["expert_half"][0] / design[0]["expert_half"][0] == pytest.approx(288 / 256, rel=1e-12)
    assert design[0]["imbalance"][0] == pytest.approx(1.494, abs=5e-4)
    assert design[32]["imbalance"][0] == pytest.approx(1.109, abs=5e-4)


def test_a_balancer_lifts_the_large_ep_decode():
    """DeepSeek-R1 on 32 GB200 (DEP 32, all-to-all, 2,048 requests): the busiest GPU's load falls from the cap to
    1.49 (placement) and 1.11 (32 copies), so tokens/s per GPU rise in that order; no validated run has a
    balancer, so the design is marked extrapolated (one unvalidated aspect more) and its interval is wider."""
    out = evaluate_serving({k: v * 3 for k, v in _design().items()} | {"eplb": [0, 1, 1], "redundant_experts": [0, 0, 32]})
    tokens = out["output_tokens_per_s_per_gpu"]
    assert tokens[0] < tokens[1] < tokens[2]
    assert bool(out["interval_extrapolated"][1]) and bool(out["interval_extrapolated"][2])
    width = (out["output_tokens_per_s_per_gpu_hi"] - out["output_tokens_per_s_per_gpu_lo"]) / tokens
    assert width[1] > width[0]
    assert bool(np.all(out["feasible"]))


def test_layout_rules_and_their_reasons():
    """EP 36 is a layout only with a balancer's 288 slots (tech blog 4's EP 36 run: 256 experts do not split over
    36 GPUs); copies without a balancer, or slots ep does not divide, are infeasible with their own reason."""
    ep36 = dict(n_gpus=36, attn_dp=36, ep=36, concurrency=2304)
    assert not evaluate_serving(_design(**ep36))["feasible"][0]
    assert evaluate_serving(_design(**ep36, eplb=1, redundant_experts=32))["con_layout"][0] == 0
    out = evaluate_serving(_design(redundant_experts=32))
    assert out["con_layout"][0] == 1
    assert out["infeasible_reason"][0] == ("layout: redundant_experts 32 need eplb 1 (without a load balancer "
                                           "nothing routes to the copies)")
    out = evaluate_serving(_design(eplb=1, redundant_experts=16))
    assert out["infeasible_reason"][0] == ("layout: ep 32 does not divide the balancer's moe_experts + "
                                           "redundant_experts = 272 expert slots")


@pytest.mark.parametrize("extra,column,text", [
    (dict(model="llama3.3-70b", attn_dp=1, ep=1, tp=8, n_gpus=8, eplb=1), "eplb", "needs an MoE model"),
    (dict(eplb=2), "eplb", "needs 0 or 1"),
    (dict(eplb=1, redundant_experts=-32), "redundant_experts", "non-negative whole number"),
    (dict(eplb=1, redundant_experts=2.5), "redundant_experts", "non-negative whole number"),
    (dict(eplb=1, redundant_experts=float("inf")), "redundant_experts", "whole number >= 0"),
])
def test_input_errors(extra, column, text):
    with pytest.raises(InputError) as err:
        prepare_serving(_design(**extra))
    assert err.value.column == column and text in str(err.value)
