"""Expert tensor parallelism in the serving model (objectives/serving/experts.py): a DeepSeek-R1 instance on 8
B200 (tp 8), its experts at ep 4 x etp 2 against ep 8 x etp 1, each figure derived by hand from the
architecture (DeepSeek-V3 config.json: hidden 7168, moe_intermediate_size 2048, 256 routed experts, top-8, 58
MoE layers of 61) and the serving calibration's factors; the layout checks; a blank etp unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving.balance import IMBALANCE_MAX
from objectives.serving.experts import expert_tp, expert_weight_bytes_per_gpu
from objectives.serving.prepare import prepare_serving
from objectives.serving.step import step_design
from objectives.table import InputError
from objectives.training.transformer import TransformerMath

H, FF, E, TOPK, MOE_LAYERS = 7168, 2048, 256, 8, 58
EXPERT_PARAMS = E * 3 * H * FF  # gate, up and down of every routed expert of a layer: 11,274,289,152


def _design(ep, etp, **extra):
    table = dict(model=["deepseek-r1"], gpu=["b200"], n_gpus=[8], tp=[8], attn_dp=[1], ep=[ep], etp=[etp],
                 precision=["fp8"], kv_precision=["fp8"], input_len=[1000], output_len=[1000], concurrency=[64])
    table.update({k: [v] for k, v in extra.items()})
    _, c = prepare_serving(table)
    c.update(TransformerMath.parameters(c))
    return c


def test_the_hand_derived_architecture():
    c = _design(8, 1)
    assert (c["d_model"][0], c["d_ff"][0], c["moe_experts"][0], c["moe_topk"][0]) == (H, FF, E, TOPK)
    assert c["params_expert_layer"][0] == EXPERT_PARAMS == 11_274_289_152


@pytest.mark.parametrize("ep,etp", [(4, 2), (8, 1)])
def test_expert_weight_bytes_per_gpu(ep, etp):
    """58 layers x 11.27e9 expert parameters at 1 byte (fp8) over ep x etp = 8 GPUs: 81.74 GB a GPU either way
    (an expert group of 4 ranks holds 64 experts, each split in two; 8 ranks hold 32 whole experts)."""
    c = _design(ep, etp)
    hand = 1.0 * MOE_LAYERS * EXPERT_PARAMS / (ep * etp)
    assert hand == pytest.approx(81_738_596_352, rel=1e-12)
    assert expert_weight_bytes_per_gpu(c, 1.0, MOE_LAYERS)[0] == pytest.approx(hand, rel=1e-12)
    cal = ServingCalibration.load()
    d = step_design(c, cal)
    bw = c["gpu_hbm_tbyte_s"][0] * 1e12 * cal.hbm_eff
    assert d["expert_mem"][0] * bw == pytest.approx(hand, rel=1e-12)  # what a step reads where every expert is touched


def _expert_gemm_s(ep, etp, tokens):
    """The decode step's routed-expert GEMM time with ``tokens`` decoding requests on the stage, by hand:
    the slower of the touched experts' weights through HBM and their FLOPs (objectives/serving/step.py)."""
    c = _design(ep, etp)
    cal = ServingCalibration.load()
    bw = c["gpu_hbm_tbyte_s"][0] * 1e12 * cal.hbm_eff
    touched = 1.0 - (1.0 - TOPK / E) ** tokens  # share of the experts some token picks
    mem = MOE_LAYERS * EXPERT_PARAMS / 8 / bw * touched
    rate16 = c["gpu_bf16_tflop_s"][0] * 1e12 * c["gpu_gemm_eff_bf16"][0] * cal.gemm_eff_scale[0]
    rate8 = max(c["gpu_fp8_tflop_s"][0] * 1e12 * c["gpu_gemm_eff_fp8"][0] * cal.gemm_eff_scale[1], rate16)
    width = min(H, FF / etp)  # each expert GEMM's narrow dimension: d_ff / etp
    fill = width / (width + cal.base.gemm_n_half)
    flop_per_token = 2.0 * MOE_LAYERS * TOPK * EXPERT_PARAMS / E / 8 / cal.expert_gemm_scale / fill / rate8
    per_gpu = E / ep  # experts an expert-parallel rank holds
    largest = {4: 1.02938, 8: 1.42360}[ep]  # the expected largest of ep standard normals (Harter 1961)
    imbalance = min(1.0 + cal.expert_load_cv * largest / math.sqrt(per_gpu), IMBALANCE_MAX)
    rows_half = cal.gemm_rows_half * E / TOPK
    return max(mem, flop_per_token * (imbalance * tokens + rows_half)), (mem, imbalance, fill)


def _model_expert_gemm_s(ep, etp, tokens):
    d = step_design(_design(ep, etp), ServingCalibration.load())
    touched = -np.expm1(tokens * d["log_miss"][0])
    return max(d["expert_mem"][0] * touched, d["expert_flop"][0] * (d["imbalance"][0] * tokens + d["expert_half"][0]))


@pytest.mark.parametrize("tokens", [8, 64, 2048])
def test_decode_expert_gemm_time_ep4_etp2_against_ep8_etp1(tokens):
    """The model's expert GEMM term equals the hand derivation at both layouts. ep 4 x etp 2 holds 64 experts a
    rank, so the busiest rank's load spread is narrower (1 + cv 1.029 / sqrt(64) against 1 + cv 1.424 /
    sqrt(32): 1.28 against 1.54 at the fitted cv of this writing), in GEMMs half as wide (1024 columns: a fill of
    1024 / (1024 + gemm_n_half), 0.78 against 0.88). With the fixed cost of every local expert's rows
    (gemm_rows_half) the FLOP term binds even at 8 tokens, so ep 4 x etp 2 is slower by about the fill's
    ratio there (16.4 ms against 14.7 ms a step, +12%) and by 5% at 2048 tokens, where its balance counts."""
    for ep, etp in ((4, 2), (8, 1)):
        hand, _ = _expert_gemm_s(ep, etp, tokens)
        assert _model_expert_gemm_s(ep, etp, tokens) == pytest.approx(hand, rel=1e-6)  # Harter's 5 digits
    (a, (mem_a, imb_a, fill_a)), (b, (mem_b, imb_b, fill_b)) = _expert_gemm_s(4, 2, tokens), _expert_gemm_s(8, 1, tokens)
    assert mem_a == mem_b  # the same bytes a GPU
    assert imb_a < imb_b and fill_a < fill_b
    assert 1.0 < a / b <= fill_b / fill_a + 1e-12  # slower than ep 8, by at most the fill's ratio


def test_all_to_all_over_ep_ranks_with_the_etp_gather():
    """Under attention DP with the all-to-all MoE path, ep 4 x etp 2 pays a gather and a reduce-scatter over the
    two slices of each expert beside its all-to-all over 4 ranks: more per token and per call than ep 8's
    all-to-all over all 8, each extra term positive; the gather/reduce-path rows (no all-to-all) are alike."""
    cal = ServingCalibration.load()
    a2a = {ep: step_design(_design(ep, 8 // ep, tp=1, attn_dp=8, moe_all_to_all=1), cal) for ep in (4, 8)}
    gather = {ep: step_design(_design(ep, 8 // ep, tp=1, attn_dp=8), cal) for ep in (4, 8)}
    assert a2a[4]["comm0"][0] - a2a[8]["comm0"][0] > MOE_LAYERS * 2 * cal.allreduce_latency_s * 0.999
    assert gather[4]["comm0"][0] == pytest.approx(gather[8]["comm0"][0], rel=1e-12)


def test_a_blank_etp_is_tp_x_attn_dp_over_ep_and_changes_nothing():
    for ep in (1, 2, 4, 8):
        given, blank = _design(ep, 8 // ep), _design(ep, np.nan)
        assert expert_tp(blank)[0] == 8 // ep
        cal = ServingCalibration.load()
        dg, db = step_design(given, cal), step_design(blank, cal)
        for k in ("expert_mem", "expert_flop", "imbalance", "comm0", "act_stage"):
            assert dg[k][0] == db[k][0], k


def test_layout_checks():
    out = evaluate_serving(dict(model=["deepseek-r1"] * 2, gpu=["b200"] * 2, n_gpus=[8, 8], tp=[8, 8], ep=[8, 4],
                                etp=[2, 2], precision=["fp8"] * 2, input_len=[1000] * 2, output_len=[1000] * 2,
                                concurrency=[64, 64]))
    assert list(out["con_layout"]) == [1.0, 0.0]  # 8 x 2 is not the stage's 8 GPUs; 4 x 2 is
    assert "etp x ep make tp x attn_dp" in out["infeasible_reason"][0]
    bad = [({"etp": [0]}, "needs a whole number >= 1"), ({"etp": [3]}, r"does not divide tp\*attn_dp = 8"),
           ({"etp": [1.5]}, "not a non-negative whole number")]
    for extra, words in bad:
        with pytest.raises(InputError, match=words):
            _design(8, extra["etp"][0])
    with pytest.raises(InputError, match="needs an MoE model"):
        prepare_serving(dict(model=["llama3.3-70b"], gpu=["b200"], n_gpus=[8], tp=[8], etp=[2], input_len=[1000],
                             output_len=[1000]))
    with pytest.raises(InputError, match="does not divide the experts' hidden size d_ff = 2044"):
        prepare_serving(dict(model=["deepseek-r1"], gpu=["b200"], n_gpus=[8], tp=[8], etp=[8], d_ff=[2044],
                             input_len=[1000], output_len=[1000]))
