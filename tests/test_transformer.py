"""Parameter and FLOP counts against hand derivations (Narayanan et al. SC'21 Eq. 3)."""

import numpy as np
import pytest

import objectives

# GPT-3 175B (Brown et al. 2020 Table 2.1): L=96, h=12288, 96 heads, d_ff=4h, V=50257, tied embeddings.
#   per layer: attention 4h^2 = 603,979,776; MLP 8h^2 = 1,207,959,552; two norms 2h = 24,576
#   -> 1,811,963,904 x 96 = 173,948,534,784; embedding V*h = 617,558,016; final norm 12,288
GPT3_PARAMS = 174_566_105_088
#   forward FLOPs per token at s=2048: per layer 2*12h^2 = 3,623,878,656 plus attention core
#   4*s*h = 100,663,296 -> 3,724,541,952 x 96 = 357,556,027,392; logits 2*V*h = 1,235,116,032
#   -> 358,791,143,424 forward; training = 3x = 1,076,373,430,272 (full s x s attention, Narayanan Eq. 3)
GPT3_TRAIN_FLOPS_PER_TOKEN_FULL_ATTN = 1_076_373_430_272
#   causal: half the attention core, 96 x 100,663,296 / 2 = 4,831,838,208 less -> 353,959,305,216 forward,
#   training 1,061,877,915,648
GPT3_TRAIN_FLOPS_PER_TOKEN = 1_061_877_915_648

# Llama-3 70B (Meta 2024): L=80, h=8192, 64 heads, 8 KV heads, d_head 128, d_ff 28672 SwiGLU, V=128256, untied.
#   attention h*128*(2*64 + 2*8) = 150,994,944; MLP 3*h*d_ff = 704,643,072; norms 16,384
#   -> 855,654,400 x 80 = 68,452,352,000; embeddings 2*V*h = 2,101,346,304; final norm 8,192
LLAMA3_70B_PARAMS = 70_553_706_496
#   forward per token at s=8192: 2*(150,994,944 + 704,643,072) = 1,711,276,032; core 4*s*64*128 =
#   268,435,456 -> 1,979,711,488 x 80 = 158,376,919,040; logits 2*V*h = 2,101,346,304
#   -> 160,478,265,344 forward; training 481,434,796,032 with the full s x s; causal: 80 x 268,435,456 / 2 =
#   10,737,418,240 less -> 149,740,847,104 forward, training 449,222,541,312
LLAMA3_70B_TRAIN_FLOPS_PER_TOKEN = 449_222_541_312


def _eval(model, seq_len, **extra):
    row = dict(model=model, gpu="h100-sxm", n_gpus=8, global_batch=8, seq_len=seq_len, tp=8, pp=1, micro_batch=1)
    row.update(extra)
    return objectives.evaluate(row)


def test_gpt3_175b_counts():
    out = _eval("gpt3-175b", 2048)
    assert out["n_params"][0] == GPT3_PARAMS
    assert out["model_flops_per_token"][0] == GPT3_TRAIN_FLOPS_PER_TOKEN
    assert out["model_flops_per_token_full_attn"][0] == GPT3_TRAIN_FLOPS_PER_TOKEN_FULL_ATTN


def test_gpt3_flops_match_narayanan_closed_form():
    """Eq. 3 of Narayanan et al.: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) model FLOPs per step (no recompute)."""
    l, h, s, V = 96, 12288, 2048, 50257
    per_token = 72 * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    assert _eval("gpt3-175b", s)["model_flops_per_token_full_attn"][0] == pytest.approx(per_token, rel=1e-12)


def test_llama3_70b_counts():
    out = _eval("llama3-70b", 8192)
    assert out["n_params"][0] == LLAMA3_70B_PARAMS
    assert out["model_flops_per_token"][0] == LLAMA3_70B_TRAIN_FLOPS_PER_TOKEN
    assert out["n_params_active"][0] == LLAMA3_70B_PARAMS


def test_mixtral_active_parameters():
    """Mixtral 8x7B: 46.7B total, 12.9B active (Jiang et al. 2024, Sec. 2)."""
    out = _eval("mixtral-8x7b", 4096, ep=1)
    assert out["n_params"][0] == pytest.approx(46.7e9, rel=0.01)
    assert out["n_params_active"][0] == pytest.approx(12.9e9, rel=0.01)
    # each MoE layer: 8 experts x 3 x 4096 x 14336 + router 4096 x 8
    assert out["params_ffn_layer"][0] == 8 * 3 * 4096 * 14336 + 4096 * 8
    assert out["params_ffn_active_layer"][0] == 2 * 3 * 4096 * 14336 + 4096 * 8


def test_gqa_and_ffn_kind_overrides():
    base = dict(n_layers=2, d_model=1024, n_heads=16, d_ff=4096, vocab_size=1000, seq_len=128)
    mha = objectives.evaluate(
        dict(base, gpu="h100-sxm", n_gpus=1, global_batch=1, tp=1, pp=1, micro_batch=1, ffn_kind="gelu", n_kv_heads=16))
    gqa = objectives.evaluate(
        dict(base, gpu="h100-sxm", n_gpus=1, global_batch=1, tp=1, pp=1, micro_batch=1, ffn_kind="swiglu", n_kv_heads=4))
    assert mha["params_attn_layer"][0] == 4 * 1024 * 1024
    assert gqa["params_attn_layer"][0] == 2 * 1024 * 1024 + 2 * 1024 * 256
    assert mha["params_ffn_layer"][0] == 2 * 1024 * 4096
    assert gqa["params_ffn_layer"][0] == 3 * 1024 * 4096
    assert np.all(gqa["n_params"] > 0)
