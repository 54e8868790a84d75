"""Memory per GPU against Korthikanti et al. (MLSys'23) and Rajbhandari et al. (ZeRO) by hand."""

import pytest

import objectives

# a GPT-3-shaped model: MHA, GELU, d_ff = 4h, so Korthikanti's 34sbh + 5as^2b applies as printed
S, B, H, A, L, V = 2048, 1, 12288, 96, 96, 51200
BASE = dict(n_layers=L, d_model=H, n_heads=A, d_ff=4 * H, ffn_kind="gelu", vocab_size=V, seq_len=S,
            gpu="h100-sxm", n_gpus=8, global_batch=8, pp=1, micro_batch=B, zero_stage=1, tied_embeddings=1,
            stack="megatron-2021", dropout=1)  # the paper's setting: unfused attention, dropout


def _activations_per_layer(t, sp, recompute):
    out = objectives.evaluate(dict(BASE, tp=t, sequence_parallel=sp, recompute=recompute))
    logits = 4.0 * S * B * V / t  # fp32 logits on the last stage
    # one stage, one micro-batch in flight: L layers
    return (out["mem_activations_gb"][0] * 1e9 - logits) / L


@pytest.mark.parametrize("t", [1, 2, 8])
def test_no_recompute_without_sequence_parallel(t):
    # Korthikanti Eq. 2: sbh (10 + 24/t + 5as/(ht))
    expected = S * B * H * (10 + 24 / t + 5 * A * S / (H * t))
    assert _activations_per_layer(t, 0, "none") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("t", [2, 8])
def test_no_recompute_with_sequence_parallel(t):
    # Korthikanti Eq. 4: sbh/t (34 + 5as/h)
    expected = S * B * H / t * (34 + 5 * A * S / H)
    assert _activations_per_layer(t, 1, "none") == pytest.approx(expected, rel=1e-12)


def test_selective_recompute_with_sequence_parallel():
    # Korthikanti Eq. 5: 34 sbh / t
    assert _activations_per_layer(8, 1, "selective") == pytest.approx(34 * S * B * H / 8, rel=1e-12)


def test_full_recompute_keeps_layer_inputs():
    # Korthikanti Sec. 4.2.1: 2sbh per layer (split over t with sequence parallelism), plus one layer's
    # activations (34sbh/t, scores not stored) while it is recomputed
    t = 8
    out = objectives.evaluate(dict(BASE, tp=t, sequence_parallel=1, recompute="full"))
    expected = L * 2 * S * B * H / t + 34 * S * B * H / t + 4.0 * S * B * V / t
    assert out["mem_activations_gb"][0] * 1e9 == pytest.approx(expected, rel=1e-12)


def test_interleaved_pipeline_in_flight():
    # first stage of the interleaved schedule holds L * (1 + (p-1)/(p v)) layer-micro-batches (Korthikanti 4.2.3)
    p, v, t = 4, 3, 8
    row = dict(BASE, n_gpus=32, global_batch=64, tp=t, pp=p, vp=v, sequence_parallel=1, recompute="selective")
    out = objectives.evaluate(row)
    per_layer = 34 * S * B * H / t
    expected = per_layer * L * (1 + (p - 1) / (p * v)) + 4.0 * S * B * V / t
    assert out["mem_activations_gb"][0] * 1e9 == pytest.approx(expected, rel=1e-12)


def test_1f1b_in_flight_capped_by_microbatches():
    # 1F1B keeps min(p, m) micro-batches of L/p layers on the first stage
    p, t = 8, 8
    row = dict(BASE, n_gpus=64, global_batch=4, tp=t, pp=p, sequence_parallel=1, recompute="selective")
    out = objectives.evaluate(row)  # m = 4 micro-batches < p
    per_layer = 34 * S * B * H / t
    assert out["mem_activations_gb"][0] * 1e9 == pytest.approx(per_layer * L / p * 4 + 4.0 * S * B * V / t, rel=1e-12)


@pytest.mark.parametrize("stack, zero, weights, grads, optimizer", [
    # fp16 gradients (Megatron-LM 2021): 2 + 2 + 16 bytes (the optimizer keeps fp32 copies of weights and
    # gradients and both moments), 4 + 16/d under the distributed optimizer (Megatron-Core dist_optimizer.md)
    ("megatron-2021", 0, 2, 2, 16), ("megatron-2021", 1, 2, 2, 16 / 64),
    ("megatron-2021", 2, 2, 2 / 64, 16 / 64), ("megatron-2021", 3, 2 / 64, 2 / 64, 16 / 64),
    # bf16 with fp32 gradients (Megatron-Core): 2 + 4 + 12, i.e. 6 + 12/d with the distributed optimizer
    ("megatron-core", 0, 2, 4, 12), ("megatron-core", 1, 2, 4, 12 / 64),
    ("megatron-core", 2, 2, 4 / 64, 12 / 64), ("megatron-core", 3, 2 / 64, 4 / 64, 12 / 64)])
def test_zero_stages(stack, zero, weights, grads, optimizer):
    """Rajbhandari et al. Sec. 5 sharding by stage over dp = 512 / 8 = 64, with the bytes per parameter of
    the Megatron-Core distributed optimizer docs by gradient precision. (The model counted 2 + 2 + 12 for
    every stack before: fp32 gradients of bf16 models and the fp16 path's fp32 gradient copy were missing.)"""
    row = dict(BASE, n_gpus=512, global_batch=512, tp=8, zero_stage=zero, stack=stack)
    out = objectives.evaluate(row)
    params = out["params_per_gpu"][0]
    assert params == pytest.approx((L * (12 * H * H + 2 * H) + V * H) / 8, rel=1e-12)
    assert out["mem_weights_gb"][0] * 1e9 == pytest.approx(weights * params, rel=1e-12)
    assert out["mem_grads_gb"][0] * 1e9 == pytest.approx(grads * params, rel=1e-12)
    assert out["mem_optimizer_gb"][0] * 1e9 == pytest.approx(optimizer * params, rel=1e-12)


def test_fused_attention_stores_no_scores():
    # with flash attention, no recompute keeps the same activations as selective recompute
    none = objectives.evaluate(dict(BASE, tp=8, sequence_parallel=1, recompute="none", stack="megatron-core"))
    selective = objectives.evaluate(dict(BASE, tp=8, sequence_parallel=1, recompute="selective", stack="megatron-core"))
    assert none["mem_activations_gb"][0] == selective["mem_activations_gb"][0]


def test_memory_constraint_marks_infeasible():
    # GPT-3 on a single H100 without parallelism cannot hold its 174.6B x 16 bytes of model states
    out = objectives.evaluate(dict(BASE, n_gpus=1, global_batch=1, tp=1))
    assert out["con_memory"][0] > 0 and not out["feasible"][0]
    fits = objectives.evaluate(dict(BASE, n_gpus=512, global_batch=512, tp=8, pp=8, recompute="full"))
    assert fits["con_memory"][0] <= 0
