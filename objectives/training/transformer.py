"""Transformer arithmetic: parameter counts and model FLOPs per token.

Decoder layers with one of two attention forms and a mix of feed-forward layers:

- Attention: multi-head or grouped-query (``n_kv_heads``; Ainslie et al. 2023), or multi-head latent
  attention (MLA, DeepSeek-V2 Sec. 2.1, DeepSeek-V3 Sec. 2.1.1) where ``kv_lora_rank`` > 0: the input is
  projected down to a query latent of ``q_lora_rank`` (0: no query compression, h projects straight to
  the heads) and a key-value latent of ``kv_lora_rank`` plus one shared rotary key of ``qk_rope_dim``;
  the latents are RMS-normed and projected up to per-head queries and keys of ``qk_nope_dim +
  qk_rope_dim`` and values of ``v_head_dim``; the output projects heads x v_head_dim back to h.
  Training runs this *unabsorbed* form: Megatron-Core (megatron/core/transformer/multi_latent_attention.py)
  up-projects the latent before the attention kernel and folds W_UK into the query only in decode-only
  inference (``cache_mla_latents``), so QK^T runs over qk_nope_dim + qk_rope_dim per head and AV over
  v_head_dim, n_heads key and value heads (MLA's ``n_kv_heads`` is n_heads).
- Feed-forward: GELU (two matrices) or SwiGLU (three; Shazeer 2020). Mixture-of-experts layers
  (``moe_experts`` routed experts of ``d_ff``, ``moe_topk`` per token, a linear router) may carry
  ``moe_shared_experts`` always-active experts of width ``d_ff`` each (DeepSeekMoE, Dai et al. 2024 Sec.
  3.2; Llama 4). The first ``moe_dense_layers`` layers are dense (DeepSeek's ``first_k_dense_replace``),
  and of the layers after them every ``moe_layer_freq``-th is MoE, starting with the first (Megatron-LM
  ``--moe-layer-freq``: layer i is MoE where i % k == 0; Llama 4 Maverick alternates, k = 2): ceil((L -
  moe_dense_layers) / k) MoE layers. The other layers are dense of width ``dense_d_ff`` (0: d_ff).
- Windowed attention: ``attn_window_frac`` of the layers (rounded to whole layers) attend only within
  ``attn_window`` tokens: a sliding window (gpt-oss alternates 128-token windows with full layers, Gemma 3
  windows five of six at 1,024; ``attn_window_kind`` sliding) or aligned chunks (Llama 4: 8,192-token
  chunks on three of four layers, meta-llama/llama-models models/llama4/model.py
  ``create_chunked_attention_mask``; ``attn_window_kind`` chunked).

FLOPs follow Narayanan et al., SC'21, Sec. 5.1 (Eq. 3): a matmul of an (m x k) by (k x n) matrix costs
2mkn; the forward pass of a layer costs 2 x (its matmul parameters) per token plus the attention core,
and the vocabulary projection 2 x V x h per token. Training costs 3x the forward (backward = 2x forward);
recomputation is *not* part of model FLOPs (Korthikanti et al., MLSys'23, Sec. 6: MFU vs HFU). The MLA
terms are those of Megatron-LM's ``num_floating_point_operations`` (megatron/training/training.py, "MLA").

The attention core (QK^T and attention-over-V) costs 2 x heads x (qk dim + v dim) FLOPs forward per
(query, attended key) pair, and is counted two ways:

- ``model_flops_per_token``: causal. A full layer attends on average to s/2 keys per query, the half of
  the s x s scores a causal decoder needs (the other half is masked and flash attention skips it). This is
  Megatron-LM's ``num_floating_point_operations`` today (megatron/training/training.py, "causal mask") and
  Megatron-Bridge's published TFLOP/s; the compute model does this work, so utilisation on this count
  cannot exceed the GPU's GEMM rate. A sliding-window layer of window W < s attends to min(i + 1, W)
  keys at position i: W - W^2 / 2s on average (the shared model-architectures notes, "Sliding-window and
  chunked layers": prefill costs 4 n_q d (W s - W^2 / 2)); a chunked layer of chunk C attends within its
  chunk, (C^2 floor(s / C) + (s mod C)^2) / 2s on average (C/2 where C divides s). Either is s/2 where the
  window covers the sequence.
- ``model_flops_per_token_full_attn``: twice the causal core (the full s x s of a full layer), as in
  Narayanan et al. Eq. 3, NeMo 24.x ``flops_formulas``, MosaicML llm-foundry (6N + 12·l·s·d) and PaLM
  App. B; at 128K tokens it nearly doubles a model's FLOPs, so its MFU is not bounded by the hardware.

Not described: DeepSeek's multi-token-prediction module (one more layer and output pass on the last
pipeline stage), gpt-oss's attention sinks (one learned logit per head, no matmul), linear-attention and
Mamba layers.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["TransformerMath", "TransformerParameters", "PARAMETERS", "attended_keys", "KV_CACHE_BYTES"]

#: bytes per cached key, value or latent element (bf16)
KV_CACHE_BYTES = 2.0


def attended_keys(seq_len, window, chunked) -> np.ndarray:
    """Mean keys a query attends to in a causal layer over ``seq_len`` tokens: s/2 for a full layer (window
    0 or >= s), W - W^2/2s in a sliding window of W, (C^2 floor(s/C) + (s mod C)^2)/2s in aligned chunks of C
    (``chunked`` > 0). Module docstring; the shared model-architectures notes."""
    s = np.asarray(seq_len, dtype=np.float64)
    w = np.asarray(window, dtype=np.float64)
    windowed = (w > 0) & (w < s)
    w = np.where(windowed, w, 1.0)  # a placeholder where the layer is full (no division by 0 below)
    sliding = w - w * w / (2.0 * s)
    chunks = (w * w * np.floor(s / w) + np.mod(s, w) ** 2) / (2.0 * s)
    return np.where(windowed, np.where(np.asarray(chunked) > 0, chunks, sliding), 0.5 * s)


class TransformerMath(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind",
        "vocab_size", "seq_len", "moe_experts", "moe_topk", "tied_embeddings",
        "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim", "v_head_dim",
        "moe_shared_experts", "moe_dense_layers", "dense_d_ff", "moe_layer_freq",
        "attn_window", "attn_window_frac", "attn_window_kind",
    )
    provides = {
        "n_params": "count; all parameters (embeddings included, every expert)",
        "n_params_active": "count; parameters a token passes through (top-k and shared experts, embeddings included)",
        "params_attn_layer": "count; attention matmul parameters of one layer (Q, K, V, O; MLA: down and up projections)",
        "params_attn_replicated_layer": "count; of which MLA's down projections, replicated on every tensor-parallel rank",
        "params_ffn_layer": "count; feed-forward parameters of one MoE layer (routed and shared experts, router), or of a "
                            "dense layer in a dense model",
        "params_ffn_active_layer": "count; feed-forward parameters one token uses in one MoE layer (top-k and shared "
                                   "experts, router), or in a dense layer",
        "params_expert_layer": "count; routed-expert parameters of one MoE layer (sharded by expert parallelism; 0 dense)",
        "params_ffn_dense_layer": "count; feed-forward parameters of one dense layer (width dense_d_ff in an MoE model, d_ff "
                                  "in a dense one)",
        "params_embedding": "count; input embedding plus output projection (once if tied)",
        "n_moe_layers": "count; MoE layers (after moe_dense_layers dense ones, every moe_layer_freq-th)",
        "n_windowed_layers": "count; layers attending within attn_window tokens (attn_window_frac of them)",
        "attn_qk_dim": "count; per-head width of QK^T (d_head; MLA qk_nope_dim + qk_rope_dim)",
        "attn_v_dim": "count; per-head width of values and context (d_head; MLA v_head_dim)",
        "kv_cache_bytes_per_token": "bytes; bf16 K and V per token over the full-attention layers (MLA: the latent and the "
                                    "rotary key); windowed layers hold at most attn_window tokens and are left out",
        "flops_per_token_fwd": "FLOP; model forward FLOPs per token (causal attention core; windowed layers within their window)",
        "model_flops_per_token": "FLOP; model training FLOPs per token, 3x forward, causal attention, recompute excluded",
        "model_flops_per_token_full_attn": "FLOP; the same with the full s x s attention core (Narayanan Eq. 3, NeMo 24.x, MosaicML)",
    }

    @staticmethod
    def parameters(c) -> dict[str, np.ndarray]:
        """The architecture's parameter counts and dimensions (:data:`PARAMETERS`), without the FLOPs per
        token (nor seq_len, which only they read)."""
        h, L, V = c["d_model"], c["n_layers"], c["vocab_size"]
        a, g = c["n_heads"], c["n_kv_heads"]
        mla = c["kv_lora_rank"] > 0
        ql, kl, rope = c["q_lora_rank"], c["kv_lora_rank"], c["qk_rope_dim"]
        qk = np.where(mla, c["qk_nope_dim"] + rope, c["d_head"])
        vd = np.where(mla, c["v_head_dim"], c["d_head"])
        # GQA: Q and O project h <-> heads*d_head, K and V h -> kv_heads*d_head (Ainslie et al. 2023)
        gqa = 2.0 * h * a * c["d_head"] + 2.0 * h * g * c["d_head"]
        # MLA (DeepSeek-V3 inference/model.py MLA: wq_a, wq_b, wkv_a, wkv_b, wo; Megatron-LM
        # num_floating_point_operations "MLA"): the query down and up, or h straight to the heads; the
        # key-value down to the latent and the rotary key; the latent up to per-head keys and values; output
        q_proj = np.where(ql > 0, h * ql + ql * a * qk, h * a * qk)
        kv_proj = h * (kl + rope) + kl * a * (c["qk_nope_dim"] + vd)
        mla_attn = q_proj + kv_proj + a * vd * h
        attn = np.where(mla, mla_attn, gqa)
        # Megatron-Core builds the down projections as duplicated (not tensor-parallel) linears
        replicated = np.where(mla, np.where(ql > 0, h * ql, 0.0) + h * (kl + rope), 0.0)
        norms = 2.0 * h + np.where(mla, ql + kl, 0.0)  # two RMS/LayerNorm gains (+ MLA's latent norms)

        n_mats = 2.0 + c["ffn_kind"]  # gelu: up, down; swiglu: gate, up, down (Shazeer 2020)
        moe = c["moe_experts"] > 0
        expert_one = n_mats * h * c["d_ff"]
        experts = np.where(moe, c["moe_experts"] * expert_one, 0.0)
        router = np.where(moe, h * c["moe_experts"], 0.0)
        shared = np.where(moe, c["moe_shared_experts"] * expert_one, 0.0)
        moe_all = experts + shared + router
        moe_active = np.where(moe, c["moe_topk"] * expert_one, 0.0) + shared + router
        dense_ffn = n_mats * h * np.where(moe & (c["dense_d_ff"] > 0), c["dense_d_ff"], c["d_ff"])
        every = np.maximum(c["moe_layer_freq"], 1.0)
        n_moe = np.where(moe, np.ceil(np.maximum(L - c["moe_dense_layers"], 0.0) / every), 0.0)
        n_dense = L - n_moe

        embedding = V * h * (2.0 - c["tied_embeddings"])
        per_layer = L * (attn + norms)
        n_params = per_layer + n_moe * moe_all + n_dense * dense_ffn + embedding + h
        n_active = per_layer + n_moe * moe_active + n_dense * dense_ffn + embedding + h

        n_win = np.where(c["attn_window"] > 0, np.round(c["attn_window_frac"] * L), 0.0)
        kv_per_layer = np.where(mla, kl + rope, 2.0 * g * c["d_head"])  # DeepSeek-V3 model.py kv_cache + pe_cache
        return {
            "n_params": n_params,
            "n_params_active": n_active,
            "params_attn_layer": attn,
            "params_attn_replicated_layer": replicated,
            "params_ffn_layer": np.where(moe, moe_all, dense_ffn),
            "params_ffn_active_layer": np.where(moe, moe_active, dense_ffn),
            "params_expert_layer": experts,
            "params_ffn_dense_layer": dense_ffn,
            "params_embedding": embedding,
            "n_moe_layers": n_moe,
            "n_windowed_layers": n_win,
            "attn_qk_dim": qk,
            "attn_v_dim": vd,
            "kv_cache_bytes_per_token": KV_CACHE_BYTES * (L - n_win) * kv_per_layer,
        }

    def compute(self, c, cal):
        out = self.parameters(c)
        L, s, V, h, a = c["n_layers"], c["seq_len"], c["vocab_size"], c["d_model"], c["n_heads"]
        qk, vd, n_win, n_moe = out["attn_qk_dim"], out["attn_v_dim"], out["n_windowed_layers"], out["n_moe_layers"]
        # forward FLOPs per token: matmuls, attention core, vocabulary projection (Narayanan'21 Eq. 3)
        keys = (L - n_win) * attended_keys(s, 0.0, 0.0) \
            + n_win * attended_keys(s, c["attn_window"], c["attn_window_kind"])  # summed over layers
        core = 2.0 * a * (qk + vd) * keys  # QK^T and AV, causal
        matmuls = 2.0 * (L * out["params_attn_layer"] + n_moe * out["params_ffn_active_layer"]
                         + (L - n_moe) * out["params_ffn_dense_layer"]) + 2.0 * V * h
        fwd = matmuls + core
        return {
            **out,
            "flops_per_token_fwd": fwd,
            "model_flops_per_token": 3.0 * fwd,
            "model_flops_per_token_full_attn": 3.0 * (fwd + core),
        }


#: TransformerMath's outputs that count the architecture's parameters and dimensions (no FLOPs per token)
PARAMETERS = tuple(k for k in TransformerMath.provides if "flops" not in k)


class TransformerParameters(Model):
    """:class:`TransformerMath` without the training FLOPs per token (3x forward at seq_len): the serving
    model (objectives/serving) reads the parameter counts alone, its FLOPs being per step."""

    requires = tuple(r for r in TransformerMath.requires if r != "seq_len")
    provides = {k: TransformerMath.provides[k] for k in PARAMETERS}

    def compute(self, c, cal):
        return TransformerMath.parameters(c)
