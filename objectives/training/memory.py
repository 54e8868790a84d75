"""Memory per GPU: model states by ZeRO stage, activations by recompute policy, and the fit in HBM.

Model states (Rajbhandari et al., SC'20, Sec. 3.1 and 5; Megatron-Core distributed optimizer docs, the
table of bytes per parameter): 16-bit weights (2 bytes; fp8 or fp4 where the stack keeps them so,
objectives.training.quantization.param_bytes), gradients, and the fp32 master weights and Adam moments (12), in the
stack's precision (calibration.TRAITS ``grad_bytes``, ``optimizer_bytes``): where
gradients are accumulated and reduced in fp32 (Megatron-Core for bf16 models, FSDP with an fp32
``reduce_dtype``) they take 4 bytes, 6 + 12/d per parameter under the distributed optimizer; 16-bit
gradients take 2, and Megatron's fp16 optimizer adds an fp32 copy of them, 16 bytes: 4 + 16/d.
Stage 1 (Megatron's distributed optimizer) shards the optimizer states, stage 2 also the gradients,
stage 3 also the weights, over the data-parallel group: dp x cp ranks for dense parameters, the expert
data-parallel group of dp x cp x tp / (ep x etp) ranks for expert parameters (Megatron-Core MoE parallel
folding).
Stage 3 holds two units (layers, or an embedding table where larger) un-sharded, weights and gradients:
the one computing and the one prefetched (Megatron-FSDP docs, double buffering); PyTorch FSDP's shard
is the fp32 master copy itself, cast to 16 bits as it is gathered, so it keeps no 16-bit shard.

Activations per layer and micro-batch (Korthikanti et al., MLSys'23, Sec. 4, Eq. 1-2 and Table 2) are
34·s·b·h + 5·a·s²·b bytes without parallelism; with tensor parallelism t the 24·sbh of the attention and
MLP interiors and the 5·a·s²·b scores divide by t, and with sequence parallelism the remaining 10·sbh
(norms, inputs, dropout masks) do too. Written per term so that GQA, SwiGLU and d_ff != 4h follow, with
``g`` the bytes of a saved GEMM input (2 in bf16; 1 in fp8 and 0.5 in fp4, where Transformer Engine's
Linear, LayerNormLinear and GroupedLinear save the quantized copy of their input for the weight-gradient
GEMM and drop the 16-bit one: transformer_engine/pytorch/module/linear.py, layernorm_mlp.py):

    attention interior: 2·q (Q) + 4·kv (K, V), kept in 16 bits (the attention core runs in bf16), and
                        g·q (context, input to O); in fp8 without recompute the attention also keeps its
                        bf16 output (2·q) for its backward, which in bf16 is the same tensor
    MLP interior:       per active expert, 2·f·(1 for GELU; 2 for SwiGLU gate and up) bf16 activation
                        input, and g·f its output (input to the down projection)
    replicated:         4·h two norm inputs (bf16, for the norms' backward), g·h each for the two norm
                        outputs (inputs to QKV and FC1; an MoE router keeps its bf16 input: 2·h), two
                        dropout masks 2·h (none for models trained without dropout, ``dropout`` = 0)
    routed copies:      per MoE layer, the k dispatched copies of each token (input to the experts' first
                        GEMM, g·k·h, all-gathered over the etp expert-tensor-parallel ranks) and the k
                        expert outputs kept for the router-probability weighted combine (2·k·h), per
                        token of the sequence-parallel shard (Megatron-Core moe/token_dispatcher.py and
                        moe_utils.unpermute with probs)
    scores:             5·a·s per token (softmax 2, dropout mask 1, dropout output 2), dropped by
                        selective recompute (Sec. 4.2.2), and never stored by fused (flash) attention,
                        which recomputes them in its backward (Dao et al. 2022)

In bf16 these reduce to the paper's 34·sbh (4·q + 4·kv + 2·f·(2 + swiglu) + 10·h). With MLA (objectives/
transformer.py; Megatron-Core multi_latent_attention.py, unabsorbed) the attention keeps per-head Q and K of
qk_nope + qk_rope and V and the context of v_head_dim, and each latent's norm input and its up projection's
input on the sequence shard; selective recompute re-runs the up projections (``mla_up_proj``) and keeps
no Q, K, V. An MoE layer's FFN interior counts its top-k and shared experts; its shared experts and router
are dense parameters (split over tp, sharded over dp x cp), its routed experts expert parameters.
Windowed attention changes no activation: flash attention stores no scores, and unfused attention masks a
full s x s.

Models mixing layer kinds are costed on the busiest stage (objectives/training/layout.py): its MoE layers'
parameters and its dense layers', and the mean of its layers' activations per layer in flight.
Full recompute keeps only each layer's 2·s·b·h input (divided by t with sequence parallelism) plus one
layer's activations, without stored scores, while it is recomputed. A pipeline stage holds L/p layers for min(p, m) micro-batches
in flight under 1F1B, and L·(1 + (p-1)/(p·v)) layer-micro-batches under the interleaved schedule
(Korthikanti Sec. 4.2.3). Context parallelism divides s by cp (Megatron-Core context parallelism).
The output layer's fp32 logits, 4·s·b·V/t bytes, sit on the last stage.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, lookup
from objectives.calibration import trait
from objectives.training.quantization import param_bytes

__all__ = ["Memory", "GEMM_INPUT_BYTES"]

#: the weights' bytes are the precision's where the stack keeps them in it (objectives.training.quantization.param_bytes),
#: the gradients' and optimizer states' the stack's (calibration.TRAITS grad_bytes, optimizer_bytes)
#: bytes of a GEMM input saved for the backward, by precision (bf16, fp8, fp4): Transformer Engine keeps
#: the quantized copy (the scales of fp4 blocks, 1 byte per 16 values, are left out)
GEMM_INPUT_BYTES = (2.0, 1.0, 0.5)
_ATTN_KERNEL = trait("attention_kernel")
_GRAD_BYTES = trait("grad_bytes")
_OPTIMIZER_BYTES = trait("optimizer_bytes")
_FP32_SHARDS = trait("fp32_shards")
_LOW_PARAMS = trait("low_precision_params")
GIB_PER_GB = 2.0**30 / 1e9


class Memory(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "ffn_kind", "vocab_size",
        "seq_len", "moe_experts", "moe_topk", "params_attn_layer", "params_attn_replicated_layer", "params_ffn_layer",
        "params_expert_layer", "params_ffn_dense_layer", "params_embedding", "attn_qk_dim", "attn_v_dim",
        "q_lora_rank", "kv_lora_rank", "moe_shared_experts", "dense_d_ff", "layers_per_stage", "moe_layers_per_stage",
        "etp", "tp", "pp", "cp", "ep", "vp", "dp",
        "micro_batch", "n_microbatches", "recompute", "sequence_parallel", "zero_stage", "gpu_hbm_gb", "stack",
        "dropout", "precision", "fp8_recipe", "gpu_fp4_tflop_s",
    )
    provides = {
        "params_per_gpu": "count; parameters held by the busiest GPU before ZeRO sharding",
        "params_expert_per_gpu": "count; of which expert parameters (sharded over the expert data-parallel group)",
        "mem_weights_gb": "GB; weights per GPU as held, 16-bit or the fp8 / fp4 copy a stack keeps (ZeRO-3: the shard plus "
                          "two gathered units)",
        "mem_grads_gb": "GB; gradients per GPU (ZeRO-3: the shard plus two un-sharded units)",
        "mem_optimizer_gb": "GB; fp32 master weights and Adam moments (and fp32 gradient copies) per GPU",
        "mem_activations_gb": "GB; activations in flight on the first pipeline stage plus logits",
        "hbm_used_gb": "GB; peak HBM per GPU",
        "hbm_usable_gb": "GB; HBM a training process can use (1e9 bytes)",
        "con_memory": "GB; hbm_used_gb - hbm_usable_gb (<= 0 fits)",
    }

    def compute(self, c, cal):
        t, p, v, cp = c["tp"], c["pp"], c["vp"], c["cp"]
        h, layers = c["d_model"], c["layers_per_stage"]
        moe = c["moe_experts"] > 0
        m = c["moe_layers_per_stage"]  # MoE layers of the busiest stage; its other layers are dense
        # --- model states (Rajbhandari et al. Sec. 5) ---
        # dense parameters split over tp: attention (MLA's down projections replicated on every tp rank),
        # norms, an MoE layer's shared experts and router, a dense layer's FFN; routed experts over ep x etp
        repl = c["params_attn_replicated_layer"]
        attn_split = c["params_attn_layer"] - repl + 2.0 * h + np.where(c["kv_lora_rank"] > 0, c["q_lora_rank"] + c["kv_lora_rank"], 0.0)
        expert_layer = c["params_expert_layer"]
        moe_dense_part = c["params_ffn_layer"] - expert_layer  # shared experts and router (Megatron-Core: not expert-parallel)
        dense_ffn = c["params_ffn_dense_layer"]
        embed_stage = np.where(p > 1, c["vocab_size"] * h, c["params_embedding"])  # first/last stage holds one
        dense = (layers * attn_split + m * moe_dense_part + (layers - m) * dense_ffn + embed_stage) / t + layers * repl
        expert = m * expert_layer / (c["etp"] * c["ep"])
        shard_dense = c["dp"] * cp
        shard_expert = shard_dense * t / (c["ep"] * c["etp"])
        whole = dense + expert  # per GPU before sharding
        sharded = dense / shard_dense + expert / shard_expert
        z = c["zero_stage"]

        def state_bytes(per_param, from_stage):
            return per_param * np.where(z >= from_stage, sharded, whole)

        grad_bytes = lookup(_GRAD_BYTES, c["stack"])
        # 16-bit weights, or fp8 / fp4 ones where the stack keeps them so (objectives.training.quantization.param_bytes);
        # FSDP's ZeRO-3 shard is the fp32 master copy (in the optimizer's bytes), gathered cast to 16 bits
        w_bytes = param_bytes(c["precision"], c["fp8_recipe"], lookup(_LOW_PARAMS, c["stack"]), c["gpu_fp4_tflop_s"])
        weights = state_bytes(w_bytes, 3) * ((z < 3) | (lookup(_FP32_SHARDS, c["stack"]) == 0))
        grads = state_bytes(grad_bytes, 2)
        optimizer = state_bytes(lookup(_OPTIMIZER_BYTES, c["stack"]), 1)
        # ZeRO-3 / FSDP un-shards two units at a time, the one computing and the one prefetched, weights and
        # gradients each (Megatron-FSDP docs: double buffers sized for the largest unit, a layer or an
        # embedding table)
        layer_moe = np.where(m > 0, attn_split / t + repl + moe_dense_part / t + expert_layer / (c["etp"] * c["ep"]), 0.0)
        layer_dense = np.where(m < layers, attn_split / t + repl + dense_ffn / t, 0.0)
        unit = np.maximum(np.maximum(layer_moe, layer_dense), c["vocab_size"] * h / t)
        weights = weights + np.where(z >= 3, 2.0 * w_bytes * unit, 0.0)
        grads = grads + np.where(z >= 3, 2.0 * grad_bytes * unit, 0.0)

        # --- activations (Korthikanti et al. Sec. 4) ---
        s_loc = c["seq_len"] / cp
        sb = s_loc * c["micro_batch"]
        q = c["n_heads"] * c["attn_qk_dim"]  # queries; keys n_kv_heads wide (MLA: n_kv_heads = n_heads)
        k = c["n_kv_heads"] * c["attn_qk_dim"]
        vals = c["n_kv_heads"] * c["attn_v_dim"]
        ctx = c["n_heads"] * c["attn_v_dim"]  # the attention's output, input to O
        rc = c["recompute"]
        g = lookup(GEMM_INPUT_BYTES, c["precision"])  # bytes of a saved GEMM input
        context = g * ctx + np.where((rc == 0) & (g < 2.0), 2.0 * ctx, 0.0)  # + the attention's own bf16 output
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        # MLA: each latent's norm input (bf16) and its up projection's saved input, on the sequence shard
        # (Megatron-Core: the down projections run on it, the up projections gather it again)
        latents = np.where(c["kv_lora_rank"] > 0, (2.0 + g) * (c["q_lora_rank"] + c["kv_lora_rank"]), 0.0)
        # selective recompute of an MLA layer re-runs its up projections (Megatron-Core recompute_modules
        # mla_up_proj): its per-head queries, keys and values are not kept, the latents are
        qkv = np.where((c["kv_lora_rank"] > 0) & (rc == 1), 0.0, 2.0 * q + 2.0 * k + 2.0 * vals)
        attn_interior = sb * (qkv + context) / t + sb * latents / sp_split
        f_unit = 2.0 * (1.0 + c["ffn_kind"]) + g  # per FFN width: bf16 activation input, saved FC2 input
        active = np.where(moe, c["moe_topk"] + c["moe_shared_experts"], 1.0)
        dense_width = np.where(moe & (c["dense_d_ff"] > 0), c["dense_d_ff"], c["d_ff"])
        mlp_moe = sb * c["d_ff"] * f_unit * active / t
        mlp_dense = sb * dense_width * f_unit / t
        dropout = 2.0 * c["dropout"]
        replicated_dense = sb * (4.0 + g + g + dropout) * h / sp_split  # norms, QKV and FC1 inputs, dropout masks
        # an MoE layer's router keeps its bf16 input; k dispatched copies (experts' FC1 input, over etp ranks)
        # and k outputs for the weighted combine (Megatron-Core moe/token_dispatcher.py, moe_utils.unpermute)
        replicated_moe = sb * (4.0 + g + 2.0 + dropout) * h / sp_split \
            + sb * c["moe_topk"] * h * (g * c["etp"] + 2.0) / sp_split
        stored_moe = attn_interior + mlp_moe + replicated_moe
        stored_dense = attn_interior + mlp_dense + replicated_dense
        # a layer's activations for its backward, scores aside: the busiest stage's mean layer
        stored = np.where(moe, (m * stored_moe + (layers - m) * stored_dense) / np.maximum(layers, 1.0), stored_dense)
        layer = stored
        stores_scores = (rc == 0) & (lookup(_ATTN_KERNEL, c["stack"]) == 0)
        if stores_scores.any():  # unfused attention without recompute keeps the s x s scores (windowed layers too: masked, not skipped)
            scores = 5.0 * c["n_heads"] * s_loc * c["seq_len"] * c["micro_batch"] / t
            layer = layer + np.where(stores_scores, scores, 0.0)
        largest = np.where(moe & (m > 0), np.maximum(stored_moe, np.where(m < layers, stored_dense, 0.0)), stored_dense)
        layers_in_flight = np.minimum(
            layers * p * np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0),
            layers * c["n_microbatches"],
        )
        # full recompute keeps each layer's input, plus one layer re-materialized at a time (``stored``)
        kept = np.where(rc == 2, 2.0 * sb * h / sp_split * layers_in_flight + largest, layer * layers_in_flight)
        logits = 4.0 * sb * c["vocab_size"] / t
        activations = kept + logits

        used = (weights + grads + optimizer + activations) / 1e9
        # HBM sizes are sold in binary units (an "80 GB" H100 holds 80 GiB = 85.9e9 bytes)
        usable = c["gpu_hbm_gb"] * GIB_PER_GB * cal.hbm_usable_frac - cal.hbm_reserved_gb
        return {
            "params_per_gpu": whole,
            "params_expert_per_gpu": expert,
            "mem_weights_gb": weights / 1e9,
            "mem_grads_gb": grads / 1e9,
            "mem_optimizer_gb": optimizer / 1e9,
            "mem_activations_gb": activations / 1e9,
            "hbm_used_gb": used,
            "hbm_usable_gb": usable,
            "con_memory": used - usable,
        }
