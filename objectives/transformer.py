"""Transformer arithmetic: parameter counts and model FLOPs per token.

Dense decoder layers with multi-head or grouped-query attention (``n_kv_heads``), a GELU (two matrices)
or SwiGLU (three matrices) feed-forward block, and optional mixture-of-experts layers (``moe_experts``
experts of ``d_ff`` each, ``moe_topk`` active per token, a linear router).

FLOPs follow Narayanan et al., SC'21, Sec. 5.1 (Eq. 3): a matmul of an (m x k) by (k x n) matrix costs
2mkn; the forward pass of a layer costs 2 x (its matmul parameters) per token plus the attention core,
and the vocabulary projection 2 x V x h per token. Training costs 3x the forward (backward = 2x forward);
recomputation is *not* part of model FLOPs (Korthikanti et al., MLSys'23, Sec. 6: MFU vs HFU).

The attention core (QK^T and attention-over-V) is counted two ways:

- ``model_flops_per_token``: causal, 2 x s x (heads x d_head) per token forward, the half of the s x s
  scores a causal decoder needs (the other half is masked and flash attention skips it). This is
  Megatron-LM's ``num_floating_point_operations`` today (megatron/training/training.py, "causal mask")
  and Megatron-Bridge's published TFLOP/s; the compute model does this work, so utilisation on this
  count cannot exceed the GPU's GEMM rate.
- ``model_flops_per_token_full_attn``: the full s x s, 4 x s x (heads x d_head) per token forward, as in
  Narayanan et al. Eq. 3, NeMo 24.x ``flops_formulas``, MosaicML llm-foundry (6N + 12·l·s·d) and PaLM
  App. B; at 128K tokens it nearly doubles a model's FLOPs, so its MFU is not bounded by the hardware.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["TransformerMath"]


class TransformerMath(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind",
        "vocab_size", "seq_len", "moe_experts", "moe_topk", "tied_embeddings",
    )
    provides = {
        "n_params": "count; all parameters (embeddings included, every expert)",
        "n_params_active": "count; parameters a token passes through (top-k experts only)",
        "params_attn_layer": "count; attention matmul parameters of one layer (Q, K, V, O)",
        "params_ffn_layer": "count; feed-forward parameters of one layer, every expert",
        "params_ffn_active_layer": "count; feed-forward parameters one token uses in one layer (incl. router)",
        "params_embedding": "count; input embedding plus output projection (once if tied)",
        "flops_per_token_fwd": "FLOP; model forward FLOPs per token (causal attention core: half of s x s)",
        "model_flops_per_token": "FLOP; model training FLOPs per token, 3x forward, causal attention, recompute excluded",
        "model_flops_per_token_full_attn": "FLOP; the same with the full s x s attention core (Narayanan Eq. 3, NeMo 24.x, MosaicML)",
    }

    def compute(self, c, cal):
        h, L, s, V = c["d_model"], c["n_layers"], c["seq_len"], c["vocab_size"]
        q_width = c["n_heads"] * c["d_head"]
        kv_width = c["n_kv_heads"] * c["d_head"]
        # Q and O project h <-> heads*d_head; K and V project h -> kv_heads*d_head (GQA, Ainslie et al. 2023)
        two_h = 2.0 * h
        attn = two_h * q_width + two_h * kv_width
        n_mats = 2.0 + c["ffn_kind"]  # gelu: up, down; swiglu: gate, up, down (Shazeer 2020)
        experts = np.maximum(c["moe_experts"], 1.0)
        moe = c["moe_experts"] > 0
        active = np.where(moe, c["moe_topk"], 1.0)
        router = np.where(moe, h * c["moe_experts"], 0.0)
        ffn_one = n_mats * h * c["d_ff"]
        ffn_all = experts * ffn_one + router
        ffn_active = active * ffn_one + router
        norms = two_h  # two RMS/LayerNorm gains per layer (biases ignored)
        embedding = V * h * (2.0 - c["tied_embeddings"])
        n_params = L * (attn + ffn_all + norms) + embedding + h
        n_active = L * (attn + ffn_active + norms) + embedding + h
        # forward FLOPs per token: matmuls, attention core, vocabulary projection (Narayanan'21 Eq. 3)
        core_full = L * 4.0 * s * q_width
        fwd_full = L * 2.0 * (attn + ffn_active) + core_full + 2.0 * V * h
        fwd = fwd_full - 0.5 * core_full  # causal: half the scores
        return {
            "n_params": n_params,
            "n_params_active": n_active,
            "params_attn_layer": attn,
            "params_ffn_layer": ffn_all,
            "params_ffn_active_layer": ffn_active,
            "params_embedding": embedding,
            "flops_per_token_fwd": fwd,
            "model_flops_per_token": 3.0 * fwd,
            "model_flops_per_token_full_attn": 3.0 * fwd_full,
        }
