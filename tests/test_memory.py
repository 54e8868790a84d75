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
    # bf16 with bf16 gradients as Megatron-Bridge benchmarks (grad_reduce_in_fp32 False): 2 + 2 + 16, the
    # optimizer keeping an fp32 copy of its gradient shard, i.e. 4 + 16/d with the distributed optimizer
    ("megatron-core", 0, 2, 2, 16), ("megatron-core", 1, 2, 2, 16 / 64),
    ("megatron-core", 2, 2, 2 / 64, 16 / 64), ("megatron-core", 3, 2 / 64, 2 / 64, 16 / 64),
    # FSDP reducing in fp32 (Composer DEFAULT mixed precision)
    # (FSDP's shard is the fp32 master copy: no 16-bit shard); NeMo 24.x's Apex distributed Adam with a bf16
    # gradient buffer: 4 + 12/d
    ("pytorch-fsdp", 3, 0, 4 / 64, 12 / 64), ("pytorch-fsdp", 2, 2, 4 / 64, 12 / 64),
    ("megatron-core-2024", 1, 2, 2, 12 / 64)])
def test_zero_stages(stack, zero, weights, grads, optimizer):
    """Rajbhandari et al. Sec. 5 sharding by stage over dp = 512 / 8 = 64, with the bytes per parameter of
    the Megatron-Core distributed optimizer docs by gradient precision. (The model counted 2 + 2 + 12 for
    every stack before: fp32 gradients of bf16 models and the fp16 path's fp32 gradient copy were missing.)"""
    row = dict(BASE, n_gpus=512, global_batch=512, tp=8, zero_stage=zero, stack=stack)
    out = objectives.evaluate(row)
    params = out["params_per_gpu"][0]
    assert params == pytest.approx((L * (12 * H * H + 2 * H) + V * H) / 8, rel=1e-12)
    # ZeRO-3 also holds two un-sharded units (the computing and the prefetched layer; a layer's
    # 12h^2 + 2h parameters exceed the V x h embedding here), weights in 2 bytes, gradients in their own
    units = 2 * (12 * H * H + 2 * H) / 8 if zero == 3 else 0.0
    assert out["mem_weights_gb"][0] * 1e9 == pytest.approx(weights * params + 2 * units, rel=1e-12)
    assert out["mem_grads_gb"][0] * 1e9 == pytest.approx(grads * params + grads * 64 * units, rel=1e-12)
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


@pytest.mark.parametrize("recompute, per_sbh", [("selective", 27), ("none", 29)])
def test_fp8_keeps_quantized_gemm_inputs(recompute, per_sbh):
    """fp8 with Transformer Engine (tp 8, sequence parallel, flash attention, GPT-3 shape: q = kv = h,
    f = 4h, GELU, dropout): of the 34 sbh per layer, the GEMM inputs TE saves in fp8 take 1 byte instead of
    2: the two norm outputs (QKV and FC1 inputs, 4h -> 2h), the context (input to O, 2h -> 1h) and the GELU
    output (FC2 input, 8h -> 4h): 34 - 2 - 1 - 4 = 27 sbh/t. The norm inputs (4h), Q, K, V (6h), the GELU
    input (8h) and the dropout masks (2h) stay as they were. Without recompute the attention keeps its own
    bf16 output for its backward as well, +2 sbh/t (in bf16 that is the same tensor as O's input)."""
    t = 8
    row = dict(BASE, tp=t, sequence_parallel=1, recompute=recompute, stack="megatron-core", precision="fp8")
    out = objectives.evaluate(row)
    per_layer = (out["mem_activations_gb"][0] * 1e9 - 4.0 * S * B * V / t) / L
    assert per_layer == pytest.approx(per_sbh * S * B * H / t, rel=1e-12)


@pytest.mark.parametrize("tp, ep, routed_per_h", [(1, 8, 8), (2, 4, 6)])
def test_moe_layers_keep_the_routed_copies(tp, ep, routed_per_h):
    """An MoE layer of the GPT-3 shape with 8 experts, top-2, bf16, selective recompute, on 8 GPUs. Besides
    the interior (Q, K, V, context 8h; per active expert GELU in and out 2 x 8h) and the replicated part
    (norm inputs 4h, attention input 2h, the router's bf16 input 2h, dropout masks 2h), it keeps per token
    the k = 2 dispatched copies (experts' FC1 input, 2 bytes x h, all-gathered over the etp ranks) and
    the k expert outputs for the probability-weighted combine (2 bytes x h):

        tp 1, ep 8 (etp 1):        2 * (2 + 2) h             = 8h per token
        tp 2 (sp), ep 4 (etp 2):   2 * (2 * 2 + 2) h / 2     = 6h per token of the full sequence
    """
    row = dict(BASE, tp=tp, ep=ep, sequence_parallel=int(tp > 1), recompute="selective", moe_experts=8, moe_topk=2,
               global_batch=8 // tp, stack="megatron-core")
    out = objectives.evaluate(row)
    per_layer = (out["mem_activations_gb"][0] * 1e9 - 4.0 * S * B * V / tp) / L
    interior = (8 + 2 * 16) * S * B * H / tp
    replicated = 10 * S * B * H / tp
    assert per_layer == pytest.approx(interior + replicated + routed_per_h * S * B * H, rel=1e-12)


def test_expert_states_shard_over_the_expert_data_parallel_group():
    """Mixtral-8x7B (32 layers, 8 experts of 3 x 4096 x 14336) on 64 GPUs, tp 2, ep 8, ZeRO-1: dp = 32,
    and ep 8 divides dp, so expert tensor parallelism etp = tp = 2; a GPU holds 32 x 8 x 3 x 4096 x 14336 /
    (etp x ep) expert parameters, and their optimizer states shard over the expert data-parallel group of
    dp x tp / (ep x etp) = 32 x 2 / 16 = 4 ranks (the dense ones over dp = 32), 16 bytes each (Megatron-Core
    with bf16 gradients: fp32 master weights, both moments and the fp32 copy of the gradient shard)."""
    out = objectives.evaluate(dict(model="mixtral-8x7b", gpu="h100-sxm", n_gpus=64, global_batch=64, tp=2, pp=1, ep=8,
                                   micro_batch=1, recompute="selective", zero_stage=1))
    expert = 32 * 8 * 3 * 4096 * 14336 / 16
    assert out["params_expert_per_gpu"][0] == pytest.approx(expert, rel=1e-12)
    dense = out["params_per_gpu"][0] - expert
    assert out["mem_optimizer_gb"][0] * 1e9 == pytest.approx(16 * (dense / 32 + expert / 4), rel=1e-12)
    assert out["mem_grads_gb"][0] * 1e9 == pytest.approx(2 * out["params_per_gpu"][0], rel=1e-12)  # bf16, unsharded
