"""Time of one engine step on the busiest GPU: a roofline per kernel class, communication, launch and host.

A step of continuous batching (Orca, Yu et al. OSDI'22; TensorRT-LLM in-flight batching; vLLM) runs every
decoding request's next token (D tokens over the instance's stage) and, in a mixed step, a chunk of P
prefill tokens (Sarathi-Serve, Agrawal et al. OSDI'24; chunked context). Per GPU of the busiest stage
(objectives.serving.memory for the shards), each kernel class runs at the slower of its bytes through HBM
and its FLOPs at the GPU's rate (a roofline per class, Williams et al. 2009; LLM-Viewer and GenZ do the
same per operator, inference-measurements.md 2.5), and the classes add:

- GEMMs of the attention projections, dense feed-forward layers, shared experts and router: their weight
  shard read once per step (decode: bandwidth-bound) against 2 FLOPs per weight per token of the GPU's
  attention group (prefill: compute-bound), at the precision's measured large-GEMM rate (gpus.yaml MAMF)
  x ``gemm_eff_scale``. Under attention data parallelism the prefill chunk lands on one group, which
  paces the step (the others wait for it at the expert all-to-all).
- Routed experts: only the experts the step's T tokens touch are read, E_local x (1 - (1 - k/E)^T) of the
  GPU's local experts (top-k routing spread evenly: the chance an expert misses every token), against
  2 x k x (expert parameters) FLOPs per token over the stage's GPUs.
- The output layer (bf16) for the tokens that sample: every decode token and each finished prefill.
- Decode attention reads every decoding request's KV (its mean context ISL + OSL/2, a window at most in a
  windowed layer) against 2 x heads x (qk + v) FLOPs per cached token: GQA's query heads of the GPU over
  d_head; MLA in its absorbed decode form (DeepSeek-V2 Sec. 2.1.2; TensorRT-LLM, SGLang and vLLM decode)
  over the latent, kv_lora_rank + qk_rope_dim for QK and kv_lora_rank for V, which makes MLA decode
  attention compute-bound where GQA's is bandwidth-bound.
- Prefill attention, compute-bound, causal: each prefill token attends ISL/2 keys on average (a window's
  W - W^2/2s in a sliding layer; objectives.transformer.attended_keys), over the unabsorbed per-head widths,
  at the GPU's flash-attention efficiency (gpus.yaml ``gpu_attn_eff_fa3``, FlashAttention-3 / cuDNN class)
  x ``gemm_eff_scale``; the KV written for every new token through HBM.
- Communication, not overlapped (decode steps have nothing to hide it behind): two all-reduces per layer
  over tp of the group's tokens x h in 16 bits (after attention and after the feed-forward, Megatron-style
  tensor parallelism; latency-bound in decode: ``allreduce_latency_s`` each, plus the ring's bandwidth
  term, objectives.collectives); under attention data parallelism, per MoE layer, an all-gather of every
  group's tokens to every GPU and a reduce-scatter of the outputs (the engines' default), or with
  ``moe_all_to_all`` an all-to-all dispatch and combine of the top-k copies of each token (DeepEP;
  dispatch in fp8 where the weights are fp8 or fp4, combine in bf16: DeepSeek-V3 Sec. 3.3; GShard,
  Lepikhin et al. 2021); one send of the group's activations to the next pipeline stage.
- A step not replayed from a CUDA graph runs no faster than the host launches its kernels
  (``LAUNCH_S_PER_LAYER`` per layer); the engine's host work per step (``host_step_s``, and
  ``host_request_s`` per request of the busiest attention group: scheduling, sampling, output processing)
  runs beside the GPU where the engine overlaps it, after it otherwise.

- Activations through HBM: every token's 16-bit activations in and out of the layer's kernels (norms and
  residuals, q, k, v and context, the feed-forward interior; a routed copy's expanded input and output),
  bandwidth-bound, beside the GEMMs: negligible for wide dense layers, as large as the GEMMs for narrow
  experts with many copies a token.

Not modelled: load imbalance among attention groups beyond the prefill chunk, KV reads of earlier
prefill chunks, speculative decoding.
"""

from __future__ import annotations

import numpy as np

from objectives.base import as_codes, lookup
from objectives.collectives import Tiers, all_gather_s, all_reduce_s, all_to_all_s, p2p_s, reduce_scatter_s
from objectives.serving.engines import LAUNCH_S_PER_LAYER, engine_trait
from objectives.serving.memory import BYTES_PER_VALUE, kv_bytes_per_token_layer, stage_layers
from objectives.transformer import attended_keys

__all__ = ["StepModel", "experts_touched", "STEP_COLUMNS"]

#: the columns a StepModel reads (a model that builds one declares them among its ``requires``)
STEP_COLUMNS = (
    "tp", "attn_dp", "pp", "ep", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "dense_d_ff", "vocab_size",
    "n_layers", "n_moe_layers", "n_windowed_layers", "moe_experts", "moe_topk", "moe_shared_experts", "moe_all_to_all",
    "kv_lora_rank", "qk_rope_dim", "attn_qk_dim", "attn_v_dim", "attn_window", "attn_window_kind", "params_attn_layer",
    "params_attn_replicated_layer", "params_ffn_layer", "params_expert_layer", "params_ffn_dense_layer", "precision",
    "kv_precision", "engine", "input_len", "output_len", "gpu_hbm_tbyte_s", "gpu_bf16_tflop_s", "gpu_fp8_tflop_s",
    "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa3", "scaleup_size",
    "scaleup_gbyte_s", "scaleup_mesh", "nic_gbyte_s", "net_eff_rel",
)


def experts_touched(tokens, topk, experts):
    """Distinct experts T tokens routed top-k of E touch, evenly at random: E (1 - (1 - k/E)^T), each
    expert missed by every token with probability (1 - k/E)^T (the step's expert weights read)."""
    experts = np.asarray(experts, dtype=np.float64)
    return experts * -np.expm1(np.asarray(tokens, dtype=np.float64) * np.log1p(-np.asarray(topk) / experts))


def _fill(width, n_half):
    """Share of the large-GEMM rate a GEMM dimension of ``width`` leaves: width / (width + n_half)."""
    return width / (width + n_half)

_OVERLAP = engine_trait("overlap")
_GRAPHS = engine_trait("graphs")
_GRAPH_MAX = engine_trait("graph_max_batch")
ACT_BYTES = 2.0  # 16-bit activations on the wire


class StepModel:
    """The per-row constants of a step (what does not depend on the batch) and :meth:`time` of a step.

    ``c``: prepared columns with TransformerMath's and ServingMemory's outputs; ``cal``: ServingCalibration.
    Every array broadcasts against the batch arrays :meth:`time` gets (one row, or rows x candidates)."""

    def __init__(self, c, cal):
        t, d, p = c["tp"], c["attn_dp"], c["pp"]
        g = t * d
        h, a = c["d_model"], c["n_heads"]
        isl, osl = c["input_len"], c["output_len"]
        layers, moe_layers, full_layers = stage_layers(c)
        win_layers = layers - full_layers
        prec, engine = as_codes(c["precision"]), as_codes(c["engine"])
        bpw = lookup(BYTES_PER_VALUE, prec)
        moe = c["moe_experts"] > 0
        mla = c["kv_lora_rank"] > 0

        # --- rates: HBM at hbm_eff; GEMMs at the precision's measured rate (bf16 where the GPU has none:
        # such rows are infeasible, con_precision); attention at the flash-attention efficiency, in bf16
        self.bw = c["gpu_hbm_tbyte_s"] * 1e12 * cal.hbm_eff
        peak16 = c["gpu_bf16_tflop_s"] * 1e12
        scale = lookup(np.asarray(cal.gemm_eff_scale), prec)
        rate16 = peak16 * c["gpu_gemm_eff_bf16"] * cal.gemm_eff_scale[0]
        peak = np.where(prec == 1, c["gpu_fp8_tflop_s"], np.where(prec == 2, c["gpu_fp4_tflop_s"], c["gpu_bf16_tflop_s"])) * 1e12
        eff = np.where(prec == 1, c["gpu_gemm_eff_fp8"], np.where(prec == 2, c["gpu_gemm_eff_fp4"], c["gpu_gemm_eff_bf16"]))
        rate = peak * eff * scale
        self.rate = np.where(rate > 0, rate, rate16)
        self.rate16 = rate16
        self.rate_attn = np.minimum(peak16 * c["gpu_attn_eff_fa3"] * cal.gemm_eff_scale[0], rate16)

        # --- GEMM classes (objectives.serving.memory for the shards)
        repl = c["params_attn_replicated_layer"]
        attn = (c["params_attn_layer"] - repl) / t + repl
        shared = (c["params_ffn_layer"] - c["params_expert_layer"]) / t
        dense_ffn = c["params_ffn_dense_layer"] / t
        dense_params = layers * attn + (layers - moe_layers) * dense_ffn + moe_layers * shared
        self.w_dense = bpw * dense_params  # bytes read per step
        # FLOPs per token of the GPU's attention group, each GEMM's at its narrowest width's share of the rate
        # (x d / (d + gemm_n_half), the training calibration's: objectives/compute.py)
        n_half = cal.base.gemm_n_half
        q_width = np.minimum(h, a * c["attn_qk_dim"] / t)
        dense_width = np.where(moe & (c["dense_d_ff"] > 0), c["dense_d_ff"], c["d_ff"]) / t
        shared_width = np.maximum(c["moe_shared_experts"], 1.0) * c["d_ff"] / t
        self.f_dense = 2.0 * (layers * attn / _fill(q_width, n_half) + (layers - moe_layers) * dense_ffn
                              / _fill(np.minimum(h, dense_width), n_half) + moe_layers * shared
                              / _fill(np.minimum(h, shared_width), n_half))
        self.w_expert = bpw * moe_layers * c["params_expert_layer"] / g  # every local expert of the stage
        one_expert = c["params_expert_layer"] / np.maximum(c["moe_experts"], 1.0)
        expert_width = np.minimum(h, c["d_ff"] / np.maximum(g / c["ep"], 1.0))  # each expert split over g / ep
        # the busiest expert-parallel GPU gets more than its share of the routed tokens (ep_imbalance)
        imbalance = np.where(c["ep"] > 1, cal.ep_imbalance, 1.0) / np.where(moe, cal.expert_gemm_scale, 1.0)
        self.f_expert = 2.0 * moe_layers * np.where(moe, c["moe_topk"], 0.0) * one_expert / g * imbalance \
            / _fill(expert_width, n_half)  # per token of the stage
        self.expert_share = np.where(moe, c["moe_topk"] / np.maximum(c["moe_experts"], 1.0), 0.0)
        self.rows_half = cal.gemm_rows_half
        self.log_miss = np.log1p(-np.where(moe, np.minimum(c["moe_topk"] / np.maximum(c["moe_experts"], 1.0), 0.999), 0.0))
        # 16-bit activations through HBM per token (kernels outside the GEMMs and the GEMMs' own inputs and
        # outputs: norms and residuals 4h, the attention's q, k, v and context, the feed-forward's gate and up
        # outputs read by the activation, its output read by the down projection, 6 d_ff; a routed copy's
        # expanded input and output written and read, 4h, and its interior): what makes MoE layers of narrow
        # experts (Qwen3: d_ff 768-1536, eight copies a token) bandwidth-bound where dense layers are not
        ctx_width = a * c["attn_v_dim"] / t
        kv_width = np.where(mla, a * (c["attn_qk_dim"] + c["attn_v_dim"]), 2.0 * c["n_kv_heads"] * c["d_head"]) / t
        self.act_dense = ACT_BYTES * (layers * (4.0 * h + a * c["attn_qk_dim"] / t + kv_width + ctx_width)
                                      + (layers - moe_layers) * (2.0 * h + 6.0 * dense_width)
                                      + moe_layers * (c["moe_shared_experts"] > 0) * (2.0 * h + 6.0 * shared_width))
        self.act_expert = ACT_BYTES * moe_layers * (4.0 * h + 6.0 * c["d_ff"] / np.maximum(g / c["ep"], 1.0)) \
            * np.where(moe, c["moe_topk"], 0.0) / g * imbalance  # per token of the stage, on the busiest GPU
        self.w_logits = 2.0 * c["vocab_size"] * h / t
        self.f_logits = 2.0 * c["vocab_size"] * h / t

        # --- attention: decode (KV read, absorbed MLA) and prefill (causal, unabsorbed)
        kv_layer = kv_bytes_per_token_layer(c)
        heads = a / t
        dec_dims = np.where(mla, 2.0 * c["kv_lora_rank"] + c["qk_rope_dim"], 2.0 * c["d_head"])
        ctx = isl + 0.5 * osl  # mean context of a decoding request
        window = c["attn_window"]
        ctx_win = np.where(window > 0, np.minimum(ctx, window), ctx)
        keys = full_layers * ctx + win_layers * ctx_win  # cached tokens read per decode token, over the stage
        self.kv_read = kv_layer * keys
        self.f_attn_dec = 2.0 * heads * dec_dims * keys
        self.kv_write = kv_layer * layers
        pre_keys = full_layers * attended_keys(isl, 0.0, 0.0) + win_layers * attended_keys(isl, window, c["attn_window_kind"])
        self.f_attn_pre = 2.0 * heads * (c["attn_qk_dim"] + c["attn_v_dim"]) * pre_keys
        self.isl = isl

        # --- communication (objectives.collectives; the latency is the serving all-reduce's)
        tiers = Tiers(size=c["scaleup_size"], bw_up=c["scaleup_gbyte_s"] * 1e9 * cal.base.scaleup_eff,
                      bw_out=c["nic_gbyte_s"] * 1e9 * cal.base.scaleout_eff * c["net_eff_rel"],
                      lat_up=0.0, lat_out=cal.base.scaleout_latency_s, mesh=c["scaleup_mesh"])
        self.tiers, self.t, self.g, self.p, self.d = tiers, t, g, p, d
        self.n_ar = 2.0 * layers * (t > 1)
        # under attention data parallelism an MoE layer moves its tokens to the experts and back: by default
        # (TensorRT-LLM fused_moe without its opt-in all-to-all; vLLM's allgather_reducescatter backend;
        # SGLang without DeepEP) an all-gather of every group's tokens, quantized where the weights are,
        # and a reduce-scatter of the outputs in bf16; with ``moe_all_to_all`` (DeepEP, TensorRT-LLM's
        # all-to-all kernels) a dispatch and a combine of the top-k copies of each token, fp8 out and bf16 back
        gathered = (d > 1) & moe
        self.n_gather = moe_layers * gathered * (c["moe_all_to_all"] <= 0)
        self.n_a2a = 2.0 * moe_layers * gathered * (c["moe_all_to_all"] > 0)
        self.dispatch = np.where(prec > 0, 1.0, ACT_BYTES)
        self.a2a_bytes = np.where(moe, c["moe_topk"], 0.0) * h * (self.dispatch + ACT_BYTES) / 2.0 * imbalance  # per token
        self.h = h
        self.lat = cal.allreduce_latency_s

        # --- launch and host
        self.launch = layers * LAUNCH_S_PER_LAYER
        self.host = lookup(np.asarray(cal.host_step_s), engine)
        self.host_request = lookup(np.asarray(cal.host_request_s), engine)
        self.overlap = lookup(_OVERLAP, engine) > 0
        self.graphs = lookup(_GRAPHS, engine)
        self.graph_max = lookup(_GRAPH_MAX, engine)

    def time(self, dec, pre, mixed: bool) -> np.ndarray:
        """Seconds of one step with ``dec`` decode tokens over the stage (split over the attention groups)
        and ``pre`` prefill tokens on the busiest group (0 in a decode-only step)."""
        d = self.d
        group = dec / d + pre  # tokens of the busiest attention group
        stage = dec + pre  # tokens the stage's experts see
        bw = self.bw
        half = self.rows_half  # a GEMM of M rows runs at M / (M + rows_half) of the large-GEMM rate
        t_dense = np.maximum(self.w_dense / bw, self.f_dense * (group + half) / self.rate)
        touched = -np.expm1(stage * self.log_miss)  # share of local experts the step touches
        rows = stage * self.expert_share  # rows of each routed expert's GEMM
        t_expert = np.maximum(self.w_expert * touched / bw, self.f_expert * stage * (rows + half) / (rows + 1e-9) / self.rate)
        t_act = (group * self.act_dense + stage * self.act_expert) / bw
        logits = dec / d + pre / self.isl
        t_logits = np.maximum(self.w_logits / bw, self.f_logits * (logits + half) / self.rate16)
        dec_group = dec / d
        t_attn = np.maximum(dec_group * self.kv_read / bw, dec_group * self.f_attn_dec / self.rate_attn) \
            + pre * self.f_attn_pre / self.rate_attn + group * self.kv_write / bw
        nbytes = group * self.h * ACT_BYTES
        t_comm = self.n_ar * (self.lat + all_reduce_s(nbytes, self.t, 1.0, self.tiers)) \
            + self.n_a2a * (self.lat + all_to_all_s(group * self.a2a_bytes, self.g, 1.0, self.tiers)) \
            + self.n_gather * (2.0 * self.lat + all_gather_s(self.g * nbytes * self.dispatch / ACT_BYTES, self.g, 1.0, self.tiers)
                               + reduce_scatter_s(self.g * nbytes, self.g, 1.0, self.tiers)) \
            + (self.p > 1) * (self.lat + p2p_s(nbytes, self.p, self.g, self.tiers))
        gpu = t_dense + t_expert + t_act + t_logits + t_attn + t_comm
        graphed = (self.graphs >= 2) | ((self.graphs >= 1) & (dec_group <= self.graph_max)) if not mixed else (self.graphs >= 2)
        device = np.where(graphed, gpu, np.maximum(gpu, self.launch))
        host = self.host + self.host_request * (dec_group + pre / self.isl)
        return np.where(self.overlap, np.maximum(device, host), device + host)
