"""Memory per GPU: model states by ZeRO stage, activations by recompute policy, and the fit in HBM.

Model states (Rajbhandari et al., SC'20, Sec. 3.1 and 5, mixed-precision Adam, K = 12): 2 bytes of
16-bit weights, 2 of gradients and 12 of fp32 master weights, momentum and variance per parameter.
Stage 1 (Megatron's distributed optimizer) shards the 12, stage 2 also the gradients, stage 3 also the
weights, over the data-parallel group (dp x cp ranks in Megatron; dp x cp / ep for expert weights).

Activations per layer and micro-batch (Korthikanti et al., MLSys'23, Sec. 4, Eq. 1-2 and Table 2) are
34·s·b·h + 5·a·s²·b bytes without parallelism; with tensor parallelism t the 24·sbh of the attention and
MLP interiors and the 5·a·s²·b scores divide by t, and with sequence parallelism the remaining 10·sbh
(norms, inputs, dropout masks) do too. Written per term so that GQA, SwiGLU and d_ff != 4h follow:

    attention interior: 2·q (Q) + 4·kv (K, V) + 2·q (context, input to O) bytes per token
    MLP interior:       2·f·(2 for GELU in/out; 3 for SwiGLU gate, up, product) per active expert
    replicated:         10·h (two norm inputs 4h, two block inputs 4h, two dropout masks 2h; 8·h for
                        models trained without dropout, ``dropout`` = 0, as most current LLMs are)
    scores:             5·a·s per token (softmax 2, dropout mask 1, dropout output 2), dropped by
                        selective recompute (Sec. 4.2.2), and never stored by fused (flash) attention,
                        which recomputes them in its backward (Dao et al. 2022)

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

__all__ = ["Memory", "BYTES_PER_PARAM"]

#: bytes per parameter (weights, gradients, optimizer states) before sharding, Rajbhandari et al. Sec. 3.1
BYTES_PER_PARAM = {"weights": 2.0, "grads": 2.0, "optimizer": 12.0}
_ATTN_KERNEL = trait("attention_kernel")
GIB_PER_GB = 2.0**30 / 1e9


class Memory(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind", "vocab_size",
        "seq_len", "moe_experts", "moe_topk", "params_attn_layer", "params_ffn_layer",
        "params_ffn_active_layer", "params_embedding", "layers_per_stage", "etp", "tp", "pp", "cp", "ep", "vp", "dp",
        "micro_batch", "n_microbatches", "recompute", "sequence_parallel", "zero_stage", "gpu_hbm_gb", "stack",
        "dropout",
    )
    provides = {
        "params_per_gpu": "count; parameters held by the busiest GPU before ZeRO sharding",
        "mem_weights_gb": "GB; 16-bit weights per GPU",
        "mem_grads_gb": "GB; gradients per GPU",
        "mem_optimizer_gb": "GB; fp32 master weights and Adam moments per GPU",
        "mem_activations_gb": "GB; activations in flight on the first pipeline stage plus logits",
        "hbm_used_gb": "GB; peak HBM per GPU",
        "hbm_usable_gb": "GB; HBM a training process can use (1e9 bytes)",
        "con_memory": "GB; hbm_used_gb - hbm_usable_gb (<= 0 fits)",
    }

    def compute(self, c, cal):
        t, p, v, cp = c["tp"], c["pp"], c["vp"], c["cp"]
        h, layers = c["d_model"], c["layers_per_stage"]
        moe = c["moe_experts"] > 0
        # --- model states (Rajbhandari et al. Sec. 5) ---
        router = np.where(moe, h * c["moe_experts"], 0.0)
        expert_layer = np.where(moe, c["params_ffn_layer"] - router, 0.0)
        dense_layer = c["params_attn_layer"] + 2.0 * h + c["params_ffn_layer"] - expert_layer
        embed_stage = np.where(p > 1, c["vocab_size"] * h, c["params_embedding"])  # first/last stage holds one
        dense = (layers * dense_layer + embed_stage) / t
        expert = layers * expert_layer / (c["etp"] * c["ep"])
        shard_dense = c["dp"] * cp
        shard_expert = shard_dense * t / (c["ep"] * c["etp"])
        whole = dense + expert  # per GPU before sharding
        sharded = dense / shard_dense + expert / shard_expert
        z = c["zero_stage"]

        def state_bytes(per_param, from_stage):
            return per_param * np.where(z >= from_stage, sharded, whole)

        weights = state_bytes(BYTES_PER_PARAM["weights"], 3)
        grads = state_bytes(BYTES_PER_PARAM["grads"], 2)
        optimizer = state_bytes(BYTES_PER_PARAM["optimizer"], 1)

        # --- activations (Korthikanti et al. Sec. 4) ---
        s_loc = c["seq_len"] / cp
        sb = s_loc * c["micro_batch"]
        q = c["n_heads"] * c["d_head"]
        kv = c["n_kv_heads"] * c["d_head"]
        active = np.where(moe, c["moe_topk"], 1.0)
        mlp_interior = 2.0 * c["d_ff"] * (2.0 + c["ffn_kind"]) * active
        interior = sb * (4.0 * q + 4.0 * kv + mlp_interior) / t
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        replicated = sb * (8.0 + 2.0 * c["dropout"]) * h / sp_split
        layer = stored = interior + replicated  # a layer's activations for its backward, scores aside
        rc = c["recompute"]
        stores_scores = (rc == 0) & (lookup(_ATTN_KERNEL, c["stack"]) == 0)
        if stores_scores.any():  # unfused attention without recompute keeps the s x s scores
            scores = 5.0 * c["n_heads"] * s_loc * c["seq_len"] * c["micro_batch"] / t
            layer = layer + np.where(stores_scores, scores, 0.0)
        layers_in_flight = np.minimum(
            layers * p * np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0),
            layers * c["n_microbatches"],
        )
        # full recompute keeps each layer's input, plus one layer re-materialized at a time (``stored``)
        kept = np.where(rc == 2, 2.0 * sb * h / sp_split * layers_in_flight + stored, layer * layers_in_flight)
        logits = 4.0 * sb * c["vocab_size"] / t
        activations = kept + logits

        used = (weights + grads + optimizer + activations) / 1e9
        # HBM sizes are sold in binary units (an "80 GB" H100 holds 80 GiB = 85.9e9 bytes)
        usable = c["gpu_hbm_gb"] * GIB_PER_GB * cal.hbm_usable_frac - cal.hbm_reserved_gb
        return {
            "params_per_gpu": whole,
            "mem_weights_gb": weights / 1e9,
            "mem_grads_gb": grads / 1e9,
            "mem_optimizer_gb": optimizer / 1e9,
            "mem_activations_gb": activations / 1e9,
            "hbm_used_gb": used,
            "hbm_usable_gb": usable,
            "con_memory": used - usable,
        }
