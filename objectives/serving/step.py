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
  Each expert is split over ``etp`` GPUs, each GEMM d_ff / etp wide (objectives/serving/experts.py).
- The output layer (bf16) for the tokens that sample: every decode token and each finished prefill.
- Decode attention reads every decoding request's KV (its mean context ISL + OSL/2, a window at most in a
  windowed layer) against 2 x heads x (qk + v) FLOPs per cached token: GQA's query heads of the GPU over
  d_head; MLA in its absorbed decode form (DeepSeek-V2 Sec. 2.1.2; TensorRT-LLM, SGLang and vLLM decode)
  over the latent, kv_lora_rank + qk_rope_dim for QK and kv_lora_rank for V, which makes MLA decode
  attention compute-bound where GQA's is bandwidth-bound.
- Prefill attention, compute-bound, causal: each prefill token attends ISL/2 keys on average (a window's
  W - W^2/2s in a sliding layer; objectives.training.transformer.attended_keys), over the unabsorbed per-head widths,
  at the GPU's flash-attention efficiency (gpus.yaml ``gpu_attn_eff_fa3``, FlashAttention-3 / cuDNN class)
  x ``gemm_eff_scale``; the KV written for every new token through HBM.
- Communication, not overlapped (decode steps have nothing to hide it behind): two all-reduces per layer
  over tp of the group's tokens x h in 16 bits (after attention and after the feed-forward, Megatron-style
  tensor parallelism; latency-bound in decode: ``allreduce_latency_s`` each, plus the ring's bandwidth
  term, objectives.training.collectives); under attention data parallelism, per MoE layer, an all-gather of every
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

With ``prefix_hit_frac`` h (a share of each prompt served from a prefix cache) the prefill computes the
uncached (1 - h) ISL tokens, each attending the whole context before it, the cached prefix included.

With speculative decoding (``spec_decode``, objectives/serving/speculative.py) a decode step verifies 1 + k
tokens of each decoding request and drafts k (:meth:`StepModel._speculative`).

Not modelled: load imbalance among attention groups beyond the prefill chunk, KV reads of earlier
prefill chunks (and of a cached prefix).
"""

from __future__ import annotations

import numpy as np

from objectives.base import as_codes, lookup, select
from objectives.serving.balance import expert_imbalance, expert_slots
from objectives.serving.engines import LAUNCH_S_PER_LAYER, engine_trait
from objectives.serving.experts import expert_all_to_all, expert_tp, expert_weight_bytes_per_gpu
from objectives.serving.latency import latency_design, latency_step
from objectives.serving.memory import BYTES_PER_VALUE, kv_bytes_per_token_layer, stage_layers
from objectives.training.collectives import Tiers, all_reduce_terms, p2p_terms, reduce_scatter_terms
from objectives.training.transformer import attended_keys

__all__ = ["StepModel", "step_design", "experts_touched", "STEP_COLUMNS"]

#: the columns a StepModel reads (a model that builds one declares them among its ``requires``)
STEP_COLUMNS = (
    "tp", "attn_dp", "pp", "ep", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "dense_d_ff", "vocab_size",
    "n_layers", "n_moe_layers", "n_windowed_layers", "moe_experts", "moe_topk", "moe_shared_experts", "moe_all_to_all",
    "kv_lora_rank", "qk_rope_dim", "attn_qk_dim", "attn_v_dim", "attn_window", "attn_window_kind", "params_attn_layer",
    "params_attn_replicated_layer", "params_ffn_layer", "params_expert_layer", "params_ffn_dense_layer", "precision",
    "kv_precision", "engine", "input_len", "output_len", "prefix_hit_frac", "gpu_hbm_tbyte_s", "gpu_bf16_tflop_s",
    "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa3",
    "scaleup_size", "scaleup_gbyte_s", "scaleup_mesh", "nic_gbyte_s", "net_eff_rel", "host_grace", "latency_tuned", "etp",
    "eplb", "redundant_experts",
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
#: what :func:`step_design` gives that a StepModel keeps as it is
_DESIGN_ATTRIBUTES = ("dense_mem", "dense_flop", "expert_mem", "imbalance", "expert_flop", "expert_half", "log_miss",
                      "act_stage", "logits_mem", "logits_flop", "comm0", "per_group_token", "per_stage_token",
                      "launch", "host", "host_request", "overlap", "graphs", "graph_max", "latency_tuned",
                      "lat_comm0", "lat_floor")


def step_design(c, cal) -> dict[str, np.ndarray]:
    """The constants of a step that depend on the design alone: every column of STEP_COLUMNS but the
    request's ``input_len``, ``output_len`` and ``prefix_hit_frac`` (objectives/serving/designs.py computes
    them once per design): the kernel classes' seconds per step and per token, communication, launch and
    host (module doc), and the factors of the request's attention terms (:class:`StepModel`)."""
    t, d, p = c["tp"], c["attn_dp"], c["pp"]
    g = t * d
    h, a = c["d_model"], c["n_heads"]
    layers, moe_layers, full_layers = stage_layers(c)
    win_layers = layers - full_layers
    prec, engine = as_codes(c["precision"]), as_codes(c["engine"])
    bpw = lookup(BYTES_PER_VALUE, prec)
    moe = c["moe_experts"] > 0
    mla = c["kv_lora_rank"] > 0
    topk = np.where(moe, c["moe_topk"], 0.0)
    experts = np.maximum(c["moe_experts"], 1.0)

    # --- rates: HBM at hbm_eff; GEMMs at the precision's measured rate (bf16 where the GPU has none:
    # such rows are infeasible, con_precision); attention at the flash-attention efficiency, in bf16
    bw = c["gpu_hbm_tbyte_s"] * 1e12 * cal.hbm_eff
    peak16 = c["gpu_bf16_tflop_s"] * 1e12
    rate16 = peak16 * c["gpu_gemm_eff_bf16"] * cal.gemm_eff_scale[0]
    # a lower precision never runs slower than the next higher one on the same GPU (its tensor cores
    # are at least as fast, and an engine would not lose by it): fp4 >= fp8 >= bf16
    scales = cal.gemm_eff_scale
    rate8 = c["gpu_fp8_tflop_s"] * 1e12 * c["gpu_gemm_eff_fp8"] * scales[1]
    rate8 = np.where(rate8 > 0, np.maximum(rate8, rate16), rate16)
    rate4 = c["gpu_fp4_tflop_s"] * 1e12 * c["gpu_gemm_eff_fp4"] * scales[2]
    rate = select(prec, (rate16, rate8, np.where(rate4 > 0, np.maximum(rate4, rate8), rate8)))
    rate_attn = np.minimum(peak16 * c["gpu_attn_eff_fa3"] * cal.gemm_eff_scale[0], rate16)

    # --- GEMM classes (objectives.serving.memory for the shards): seconds per step of the weights read,
    # and per token of FLOPs, each GEMM's at its narrowest width's share of the rate (x d / (d +
    # gemm_n_half), the training calibration's: objectives/training/compute.py)
    repl = c["params_attn_replicated_layer"]
    attn = (c["params_attn_layer"] - repl) / t + repl
    shared = (c["params_ffn_layer"] - c["params_expert_layer"]) / t
    dense_ffn = c["params_ffn_dense_layer"] / t
    dense_mem = bpw * (layers * attn + (layers - moe_layers) * dense_ffn + moe_layers * shared) / bw
    n_half = cal.base.gemm_n_half
    q_width = np.minimum(h, a * c["attn_qk_dim"] / t)
    dense_width = np.where(moe & (c["dense_d_ff"] > 0), c["dense_d_ff"], c["d_ff"]) / t
    shared_width = np.maximum(c["moe_shared_experts"], 1.0) * c["d_ff"] / t
    dense_flop = 2.0 * (layers * attn / _fill(q_width, n_half) + (layers - moe_layers) * dense_ffn
                        / _fill(np.minimum(h, dense_width), n_half) + moe_layers * shared
                        / _fill(np.minimum(h, shared_width), n_half)) / rate
    expert_mem = expert_weight_bytes_per_gpu(c, bpw, moe_layers) / bw  # every local expert slot of the stage
    expert_split = expert_tp(c)  # each expert split over etp GPUs (blank: g / ep; objectives/serving/experts.py)
    # the busiest expert-parallel GPU gets more than its share of the routed tokens (with or without an expert
    # load balancer: objectives/serving/balance.py), and grouped expert GEMMs run at expert_gemm_scale of a
    # dense GEMM's rate
    imbalance = expert_imbalance(c, cal.expert_load_cv)
    slot_share = expert_slots(c) / experts  # a balancer's redundant copies: more local slots to read and run
    expert_flop = 2.0 * moe_layers * topk * c["params_expert_layer"] / experts / g \
        / np.where(moe, cal.expert_gemm_scale, 1.0) / _fill(np.minimum(h, c["d_ff"] / expert_split), n_half) / rate
    # the rows' fixed cost (tiles, waves, the weights' stream) is each local expert's, not its tokens': the
    # busiest GPU's extra tokens scale only the token term (expert_flop x (imbalance x T + expert_half))
    expert_half = np.where(moe, cal.gemm_rows_half * experts * slot_share / np.maximum(topk, 1.0), 0.0)  # stage tokens
    log_miss = np.log1p(-np.minimum(topk / experts, 0.999))
    # 16-bit activations through HBM per token (kernels outside the GEMMs and the GEMMs' own inputs and
    # outputs: norms and residuals 4h, the attention's q, k, v and context, the feed-forward's gate and up
    # outputs read by the activation, its output read by the down projection, 6 d_ff; a routed copy's
    # expanded input and output written and read, 4h, and its interior): what makes MoE layers of narrow
    # experts (Qwen3: d_ff 768-1536, eight copies a token) bandwidth-bound where dense layers are not
    kv_width = np.where(mla, a * (c["attn_qk_dim"] + c["attn_v_dim"]), 2.0 * c["n_kv_heads"] * c["d_head"]) / t
    act_group = ACT_BYTES * (layers * (4.0 * h + a * (c["attn_qk_dim"] + c["attn_v_dim"]) / t + kv_width)
                             + (layers - moe_layers) * (2.0 * h + 6.0 * dense_width)
                             + moe_layers * (c["moe_shared_experts"] > 0) * (2.0 * h + 6.0 * shared_width)) / bw
    act_stage = ACT_BYTES * moe_layers * (4.0 * h + 6.0 * c["d_ff"] / expert_split) * topk / g * imbalance / bw
    logits_params = 2.0 * c["vocab_size"] * h / t
    logits_mem = logits_params / bw
    logits_flop = logits_params / rate16

    # --- attention: decode (KV read, absorbed MLA), seconds per decode token of the group, and prefill
    # (causal, unabsorbed), per prefill token
    kv_layer = kv_bytes_per_token_layer(c)
    heads = a / t
    dec_dims = np.where(mla, 2.0 * c["kv_lora_rank"] + c["qk_rope_dim"], 2.0 * c["d_head"])
    # TensorRT-LLM's Blackwell MLA generation kernel with an fp8 KV cache quantizes Q too and runs FP8
    # multi-query attention on the 5th-generation tensor cores (tech blog 3, "FP8 KV Cache": "both Q and
    # KV are quantized to FP8, and FP8 MQA is used"; "Attention Kernels Optimization": 2-CTA MMA of
    # Blackwell): its math at the fp8 GEMM rate over bf16's. Blackwell is told by its FP4 tensor cores
    # (objectives.training.intervals.generation does the same); Hopper, other engines and bf16 caches in bf16
    fp8_mqa = mla & (as_codes(c["kv_precision"]) == 1) & (engine == 0) & (c["gpu_fp4_tflop_s"] > 0)
    rate_dec = rate_attn * np.where(fp8_mqa, rate8 / rate16, 1.0)
    dec_flop = 2.0 * heads * dec_dims  # FLOPs per cached token read (x keys / rate_dec: StepModel)
    pre_flop = 2.0 * heads * (c["attn_qk_dim"] + c["attn_v_dim"])  # per attended key (x pre_keys / rate_attn)

    # --- communication (objectives.training.collectives; latency the serving all-reduce's), linear in the group's
    # tokens: comm0 + comm1 x tokens
    tiers = Tiers(size=c["scaleup_size"], bw_up=c["scaleup_gbyte_s"] * 1e9 * cal.base.scaleup_eff,
                  bw_out=c["nic_gbyte_s"] * 1e9 * cal.base.scaleout_eff * c["net_eff_rel"],
                  lat_up=0.0, lat_out=cal.base.scaleout_latency_s, mesh=c["scaleup_mesh"])
    lat = cal.allreduce_latency_s
    row = h * ACT_BYTES  # bytes of one token's activations
    n_ar = 2.0 * layers * (t > 1)
    # under attention data parallelism an MoE layer moves its tokens to the experts and back: by default
    # (TensorRT-LLM fused_moe without its opt-in all-to-all; vLLM's allgather_reducescatter backend;
    # SGLang without DeepEP) an all-gather of every group's tokens, quantized where the weights are,
    # and a reduce-scatter of the outputs in bf16; with ``moe_all_to_all`` (DeepEP, TensorRT-LLM's
    # all-to-all kernels) a dispatch and a combine of the top-k copies of each token, fp8 out and bf16 back
    gathered = (d > 1) & moe
    n_gather = moe_layers * gathered * (c["moe_all_to_all"] <= 0)
    n_a2a = 2.0 * moe_layers * gathered * (c["moe_all_to_all"] > 0)
    dispatch = np.where(prec > 0, 1.0, ACT_BYTES)
    a2a_row = topk * h * (dispatch + ACT_BYTES) / 2.0 * imbalance  # per token and call (dispatch, combine)

    # a bandwidth term at 0 bytes is 0 exactly where every bandwidth is positive and every group has a rank
    positive = bool(np.all(tiers.bw_up > 0) and np.all(tiers.bw_out > 0))

    def linear(terms, per_token, group, stride, used):
        """(seconds at 0 bytes, seconds per token) of a collective of ``per_token`` bytes a token, the time
        at ``per_token`` bytes minus that at 0 (``terms``: the collective's bandwidth and latency terms, of
        which its time is the sum; at 0 bytes its latency alone); (0, 0) where no row of the chunk runs it."""
        if not np.any(used):
            return 0.0, 0.0
        bw, lat = terms(per_token, group, stride, tiers)
        at0 = lat if positive and np.all(group >= 1) else sum(terms(0.0, group, stride, tiers))
        return at0, (bw + lat) - at0

    piped = p > 1
    ar0, ar1 = linear(all_reduce_terms, row, t, 1.0, n_ar)
    # over the ep ranks of an expert group, the etp slices of each expert gathered and reduced (experts.py)
    a2a0, a2a1 = expert_all_to_all(linear, a2a_row, c["ep"], expert_split, n_a2a, lat)
    # the all-gather and reduce-scatter carry every group's own tokens, not the busiest group's padded to
    # g copies (TensorRT-LLM fused_moe: allgather / reducescatter with ``sizes=all_rank_num_tokens``
    # unless ``use_dp_padding``, which only CUDA-graphed decode steps set): per token of the stage
    ag0, ag1 = linear(reduce_scatter_terms, row * dispatch / ACT_BYTES, g, 1.0, n_gather)  # the all-gather's
    rs0, rs1 = linear(reduce_scatter_terms, row, g, 1.0, n_gather)
    pp0, pp1 = linear(p2p_terms, row, p, g, piped)
    comm0 = n_ar * (lat + ar0) + n_a2a * (lat + a2a0) + n_gather * (2.0 * lat + ag0 + rs0) + piped * (lat + pp0)
    comm1 = n_ar * ar1 + n_a2a * a2a1 + piped * pp1
    # the group's tokens through HBM: activations, KV written, collectives; the stage's tokens gathered
    per_group_token = act_group + kv_layer * layers / bw + comm1
    per_stage_token = act_stage + n_gather * (ag1 + rs1)

    # --- launch and host
    launch = layers * LAUNCH_S_PER_LAYER
    # the host's work runs slower on a Grace host than on an x86 Xeon (``host_grace_scale``: PyTorch's CPU
    # time per module 2.75x on GB200, TransformerEngine #2053; the engine's Python executor likewise)
    grace = 1.0 + c["host_grace"] * (cal.host_grace_scale - 1.0)
    host = lookup(np.asarray(cal.host_step_s), engine) * grace
    host_request = lookup(np.asarray(cal.host_request_s), engine) * grace
    overlap = lookup(_OVERLAP, engine) > 0
    graphs = lookup(_GRAPHS, engine)
    graph_max = lookup(_GRAPH_MAX, engine)
    # a latency-tuned deployment's decode step (objectives/serving/latency.py): fused one-shot all-reduces, kernels' floor
    lat_comm0, lat_floor = latency_design(c, layers, moe_layers, n_ar + n_a2a * (1.0 + (expert_split > 1))
                                         + 2.0 * n_gather + piped, lat, comm0)
    return {"latency_tuned": c["latency_tuned"], "lat_comm0": lat_comm0, "lat_floor": lat_floor,
            "dense_mem": dense_mem, "dense_flop": dense_flop, "expert_mem": expert_mem, "imbalance": imbalance,
            "expert_flop": expert_flop, "expert_half": expert_half, "log_miss": log_miss, "act_stage": act_stage,
            "logits_mem": logits_mem, "logits_flop": logits_flop, "comm0": comm0, "per_group_token": per_group_token,
            "per_stage_token": per_stage_token, "launch": launch, "host": host, "host_request": host_request,
            "overlap": overlap, "graphs": graphs, "graph_max": graph_max, "kv_layer": kv_layer, "bw": bw,
            "full_layers": full_layers, "win_layers": win_layers, "dec_flop": dec_flop, "rate_dec": rate_dec,
            "pre_flop": pre_flop, "rate_attn": rate_attn}


class StepModel:
    """The per-row constants of a step (what does not depend on the batch) and :meth:`time` of a step.

    ``c``: prepared columns with TransformerParameters' and ServingMemory's outputs; ``cal``: ServingCalibration;
    ``design``: :func:`step_design` of the rows (by row), computed from ``c`` where not given. Every array
    broadcasts against the batch arrays :meth:`time` gets (one row, or rows x candidates)."""

    def __init__(self, c, cal, design=None):
        k = step_design(c, cal) if design is None else design
        for name in _DESIGN_ATTRIBUTES:
            setattr(self, name, k[name])
        self.d = c["attn_dp"]
        self.half = cal.gemm_rows_half  # a GEMM of M rows runs at M / (M + gemm_rows_half) of its rate
        # attention over the request's context: decode reads every decoding request's KV (its mean context,
        # a window at most in a windowed layer), prefill attends ISL/2 keys a token (objectives.training.transformer)
        isl, osl = c["input_len"], c["output_len"]
        # prefix caching: the prefill computes only the prompt's uncached suffix, (1 - h) ISL tokens
        # (TensorRT-LLM KV cache reuse, enable_block_reuse; vLLM automatic prefix caching; SGLang
        # RadixAttention, Zheng et al. 2024): its GEMMs, KV writes and activations per computed token. At
        # least the last token is computed, for its logits (vLLM v1 kv_cache_manager get_computed_blocks: a
        # hit of at most num_tokens - 1; SGLang Req._compute_max_prefix_len: input_len - 1)
        hit = np.minimum(c["prefix_hit_frac"], 1.0 - 1.0 / isl)
        self.prefill_tokens = isl * (1.0 - hit)
        full_layers, win_layers, bw = k["full_layers"], k["win_layers"], k["bw"]
        ctx = isl + 0.5 * osl  # mean context of a decoding request
        window = c["attn_window"]
        windowed = np.any(win_layers > 0)
        ctx_win = np.where(window > 0, np.minimum(ctx, window), ctx) if windowed else ctx
        keys = full_layers * ctx + win_layers * ctx_win  # cached tokens read per decode token, over the stage
        self.attn_dec_mem, self.attn_dec_flop = k["kv_layer"] * keys / bw, k["dec_flop"] * keys / k["rate_dec"]
        self.attn_dec = np.maximum(self.attn_dec_mem, self.attn_dec_flop)
        # speculative decoding (objectives/serving/speculative.py): a decoding request's 1 + k tokens verified
        # a step, and k draft forwards of spec_draft_layers layers each; none where no row speculates
        self.draft = c["spec_draft_tokens"] if "spec_draft_tokens" in c else 0.0
        self.spec = bool(np.any(self.draft > 0))
        if self.spec:
            self.verify = 1.0 + self.draft
            self.emitted = c["spec_accept_tokens_per_step"]  # tau: tokens a request emits a verify step
            self.draft_layers = c["spec_draft_layers"]
            self.stage_layers = full_layers + win_layers
        # each computed token attends the whole context before it, the cached prefix's KV included (vLLM's
        # prefill over a cached prefix, PR #2762: the new tokens' attention reads the prefix's KV): over
        # positions hs..s of a causal layer, (s A(s) - hs A(hs)) / ((1 - h) s) keys a token, A =
        # attended_keys; a full layer's s (1 + h) / 2 (s / 2 without a hit)
        pre_keys = full_layers * 0.5 * isl * (1.0 + hit)
        if windowed:
            kind = c["attn_window_kind"]
            cached = np.maximum(hit * isl, 1e-9)  # no hit: h A(.) is 0 (a positive length, no 0 / 0)
            pre_keys = pre_keys + win_layers * (attended_keys(isl, window, kind)
                                                - hit * attended_keys(cached, window, kind)) / (1.0 - hit)
        self.pre_attn = k["pre_flop"] * pre_keys / k["rate_attn"]

    def time(self, dec, pre, mixed: bool, pre_stage=None) -> np.ndarray:
        """Seconds of one step with ``dec`` decoding requests over the stage (split over the attention
        groups; one token each, 1 + k verified where the row speculates) and ``pre`` prefill tokens on the
        busiest group (0 in a decode-only step); ``pre_stage``: the prefill tokens of every group together,
        which the stage's experts and the expert all-gather see (default
        ``pre``: one group carries a chunk)."""
        dec_group = dec / self.d
        requests = dec_group + pre / self.prefill_tokens  # sampling requests of the group
        if self.spec:
            gpu = self._speculative(dec, dec_group, pre, requests, pre_stage)
        else:
            group = dec_group + pre  # tokens of the busiest attention group
            stage = dec + (pre if pre_stage is None else pre_stage)  # tokens the stage's experts see
            gpu = self._layers(group, stage) + self._logits(requests) + dec_group * self.attn_dec \
                + pre * self.pre_attn + group * self.per_group_token + stage * self.per_stage_token + self.comm0
        if mixed:
            graphed = self.graphs >= 2
        else:
            graphed = (self.graphs >= 2) | ((self.graphs >= 1) & (dec_group <= self.graph_max))
        device = np.where(graphed, gpu, np.maximum(gpu, self.launch))
        # the per-request host work (sampling, output processing) runs per token emitted: tau a verify step
        host = self.host + self.host_request * (requests + (dec_group * (self.emitted - 1.0) if self.spec else 0.0))
        device, host, tuned = latency_step(self, gpu, device, host, dec_group, mixed)  # latency_tuned rows
        return np.where(self.overlap | tuned, np.maximum(device, host), device + host)

    def _layers(self, group, stage):
        """Seconds of the GEMM classes (dense and routed experts) with ``group`` tokens on the busiest attention
        group and ``stage`` tokens at the stage's experts."""
        touched = -np.expm1(stage * self.log_miss)  # share of the experts with rows: latency-tuned, only they pay
        rows = np.where(self.latency_tuned > 0, touched, 1.0)  # the fixed cost (objectives/serving/latency.py)
        return np.maximum(self.dense_mem, self.dense_flop * (group + self.half)) \
            + np.maximum(self.expert_mem * touched, self.expert_flop * (self.imbalance * stage + self.expert_half * rows))

    def _logits(self, tokens):
        """Seconds of the output layer over ``tokens`` sampled positions."""
        return np.maximum(self.logits_mem, self.logits_flop * (tokens + self.half))

    def _speculative(self, dec, dec_group, pre, requests, pre_stage):
        """GPU seconds of a step verifying 1 + k tokens of each of ``dec`` decoding requests and drafting k.

        The verify (Leviathan et al. 2023, Sec. 3; TensorRT-LLM tech blog 2, "Attention for MTP": the
        generation step takes K + 1 input tokens a request under a causal mask): the weights are read once
        a step as in a plain decode step, while every GEMM's FLOPs, activations, KV written (the rejected
        tokens' included, written then discarded) and collectives scale with the 1 + k tokens, and the
        output layer samples all of them; decode attention reads each request's KV once for its 1 + k
        queries, its FLOPs x (1 + k). So at small batch a verify step costs about a plain decode step (the
        weights' bytes), at large batch (compute-bound) 1 + k of them for tau tokens: fewer tokens per
        second than without speculation where tau < 1 + k.

        The draft (objectives/serving/speculative.py): k forwards of one token a request, each of
        ``spec_draft_layers`` of the stage's average layer (its GEMMs, decode attention, per-token traffic
        and collectives at the plain decode batch: the stage's layer terms over its layers) plus the output
        layer (shared by MTP; EAGLE-3's and a draft model's own heads taken as large)."""
        v = self.verify
        group = dec_group * v + pre
        stage = dec * v + (pre if pre_stage is None else pre_stage)
        gpu = self._layers(group, stage) + self._logits(dec_group * v + (requests - dec_group)) \
            + dec_group * np.maximum(self.attn_dec_mem, v * self.attn_dec_flop) + pre * self.pre_attn \
            + group * self.per_group_token + stage * self.per_stage_token + self.comm0
        layer = (self._layers(dec_group, dec) + dec_group * (self.attn_dec + self.per_group_token)
                 + dec * self.per_stage_token + self.comm0) / self.stage_layers
        return gpu + np.where(dec > 0, self.draft * (self.draft_layers * layer + self._logits(dec_group)), 0.0)
