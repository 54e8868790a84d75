"""Serving memory per GPU: weights by shard, the activation workspace, the KV cache and how many requests fit.

Weights (the busiest pipeline stage: ceil(L / pp) layers, as many of them MoE and full-attention as it can
hold, objectives.training.layout's rule for training): attention split over the ``tp`` ranks of an attention group
(MLA's down projections replicated on each, Megatron-Core and TensorRT-LLM alike), dense feed-forward
layers, shared experts and the router over tp (under attention data parallelism each group holds its own
copy, as TensorRT-LLM's DeepSeek and Llama 4 models run their dense MLPs with ``overridden_tp_size``),
routed experts over all tp x attn_dp GPUs of the stage (``ep`` ranks, each expert split over the ``etp``
of each expert group: objectives/serving/experts.py).
Linear layers at the row's ``precision``: 2, 1 or 0.5625 bytes per weight (NVFP4: 4-bit values and one
E4M3 scale per 16, NVIDIA "Introducing NVFP4", 2025); embeddings and the output layer in bf16 (ModelOpt
quantizes neither), vocabulary-parallel over tp, both tables on a one-stage instance.

KV cache (inference-measurements.md 2.1): per token and layer, GQA holds K and V of its KV heads,
2 x n_kv x d_head elements, split over tp while n_kv >= tp and replicated beyond (each rank keeps at least
one head: TensorRT-LLM bench tuning.py ``adjusted_num_kv_heads``); MLA holds its latent and rotary key,
kv_lora_rank + qk_rope_dim, once per layer and whole on every tp rank (DeepSeek-V3 inference/model.py
``kv_cache`` and ``pe_cache``; hence attention data parallelism, TensorRT-LLM blog 3). Bytes per element
by ``kv_precision`` as for weights. A sliding-window layer keeps at most ``attn_window`` tokens (cyclic KV,
TensorRT-LLM and vLLM's hybrid allocator). A request reserves ISL + OSL tokens where the engine
guarantees no eviction (TensorRT-LLM GUARANTEED_NO_EVICT), and ISL + OSL/2 on average where pages come on
demand (vLLM, SGLang).

Capacity: HBM (its binary size, 80 GB = 80 GiB, as objectives.training.memory counts it) less the CUDA context and
NCCL buffers (``hbm_reserved_gb``), the weights and the activation workspace, times the engine's KV share
(objectives.serving.engines; ``kv_mem_frac`` overrides it). The workspace is one step of the token budget
through the widest layer (the residual stream and norms, 4h, and the gate and up outputs, 2F/tp, in 16
bits) plus fp32 logits of the batch over the vocabulary. Under attention data parallelism TensorRT-LLM's
PyTorch backend (``trtllm``) holds more: its fused MoE runs on the tokens all-gathered from the attn_dp
groups (fused_moe_cutlass.py: "The maximum number of tokens in MoE are multiplied by DP size when attention
DP is enabled", ``moe_max_num_tokens`` = max_num_tokens x dp_size, no chunking by default), and it sizes the
KV cache after a dry run of max_num_tokens on every rank (_torch/pyexecutor/_util.py ``KvCacheCreator``:
``_create_dummy_context_requests`` repeats the requests ``tp_size`` times under attention DP;
``peak_memory = torch_peak_memory + extra_cost``, the latter "NCCL and CUDA graphs"; ``available_kv_mem =
(total_gpu_memory - peak_memory + ...) * fraction``) with the decode CUDA graphs captured up to
min(max_batch_size, max_num_tokens) a rank (model_engine.py ``_filter_cuda_graph_batch_sizes``; the
perf-overview's MoE ``llm_options`` list batch sizes to 8,192), whose private memory pool keeps that graph's
intermediates. Each holds the CUTLASS MoE workspace of its gathered tokens, top-k rows a token, a row the
permuted input and the fc2 output (h each), the gated fc1 output (2 d_ff / etp) and the activation's
(d_ff / etp), 16-bit (cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu
``getWorkspaceDeviceBufferSizes``: ``permuted_data_size``, ``glu_inter_size``, ``fc1_result_size``,
``fc2_result_size``). ``max_concurrency`` is what the KV cache holds
at the engine's reservation, at most the engine's batch limit, on every attention data-parallel group;
``con_kv`` > 0 where not even one request fits.
"""

from __future__ import annotations

import numpy as np

from objectives.base import as_codes, lookup, select
from objectives.serving.balance import balance_layout_bad, expert_slots
from objectives.serving.designs import PerDesign
from objectives.serving.engines import ENGINES, engine_trait
from objectives.serving.experts import expert_layout_bad, expert_tp, expert_weight_bytes_per_gpu
from objectives.serving.latency import LATENCY_GRAPH_MAX_BATCH
from objectives.table import is_constant
from objectives.training.memory import GIB_PER_GB

__all__ = ["ServingMemory", "BYTES_PER_VALUE", "stage_layers", "kv_bytes_per_token_layer"]

#: bytes per weight or cached value by precision code (bf16, fp8, fp4 with its E4M3 scale per 16 values)
BYTES_PER_VALUE = (2.0, 1.0, 0.5 + 1.0 / 16.0)
_KV_FRAC = engine_trait("kv_free_frac")
_KV_OF_TOTAL = engine_trait("kv_of_total")
_RESERVE_FULL = engine_trait("reserve_full")
_MAX_BATCH = engine_trait("max_batch")
_BUDGET = engine_trait("token_budget")
_BUDGET_BIG = engine_trait("token_budget_big")
_TRTLLM, _TRTLLM_2024 = ENGINES.index("trtllm"), ENGINES.index("trtllm-2024")


def given_or(column: np.ndarray, default) -> np.ndarray:
    """``column`` where given, ``default`` where blank (NaN); a column given or blank throughout (a constant
    column, the usual case of an optional setting) costs no pass over its rows."""
    values = column[:1] if is_constant(column) else column
    blank = np.isnan(values)
    if not blank.any():
        return column
    if blank.all():
        return np.broadcast_to(default, np.broadcast_shapes(np.shape(default), column.shape))
    return np.where(np.isnan(column), default, column)


def stage_layers(c) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layers, MoE layers, full-attention layers) of the busiest pipeline stage: ceil(L / pp) layers holding
    as many MoE and full-attention layers as they can."""
    layers = np.ceil(c["n_layers"] / c["pp"])
    return layers, np.minimum(c["n_moe_layers"], layers), np.minimum(c["n_layers"] - c["n_windowed_layers"], layers)


def kv_bytes_per_token_layer(c) -> np.ndarray:
    """Cached bytes per token per layer on one GPU at the row's kv_precision (module doc)."""
    per_rank = np.where(c["kv_lora_rank"] > 0, c["kv_lora_rank"] + c["qk_rope_dim"],
                        2.0 * c["d_head"] * np.maximum(c["n_kv_heads"] / c["tp"], 1.0))
    return per_rank * lookup(BYTES_PER_VALUE, as_codes(c["kv_precision"]))


class ServingMemory(PerDesign):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "dense_d_ff", "vocab_size", "moe_experts",
        "moe_topk", "kv_lora_rank", "qk_rope_dim", "attn_window", "n_moe_layers", "n_windowed_layers", "params_attn_layer",
        "params_attn_replicated_layer", "params_ffn_layer", "params_expert_layer", "params_ffn_dense_layer",
        "params_embedding", "kv_cache_bytes_per_token", "tp", "pp", "ep", "attn_dp", "precision", "kv_precision", "engine",
        "input_len", "output_len", "gpu_hbm_gb", "gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s",
        "max_batch_size", "max_num_tokens", "kv_mem_frac", "spec_weights_gb", "etp", "latency_tuned",
        "eplb", "redundant_experts",
    )
    provides = {
        "weights_gb": "GB; weights per GPU (the busiest stage: its layers' shards, embeddings in bf16)",
        "act_workspace_gb": "GB; activation workspace per GPU (one step of the token budget, fp32 logits of the batch)",
        "kv_bytes_per_token": "bytes; KV cache per token of the whole model at kv_precision (full-attention layers)",
        "kv_bytes_per_token_gpu": "bytes; KV cache per token on one GPU (its stage's layers, its tp shard; windowed "
                                  "layers included)",
        "kv_request_gb": "GB; KV cache one request reserves on one GPU (ISL + OSL tokens, or ISL + OSL/2 paged on demand)",
        "kv_cache_gb": "GB; KV cache capacity per GPU beside weights, workspace and reserved memory",
        "token_budget": "tokens; most tokens one step processes on one attention group (max_num_tokens; the engine's "
                        "default where blank)",
        "batch_limit": "requests; the engine's most requests in flight per instance (max_batch_size x attn_dp; a "
                       "latency-tuned instance's batch at most 8 a group)",
        "max_concurrency": "requests; most requests in flight per instance: the KV cache at the engine's reservation, "
                           "capped by batch_limit",
        "con_kv": "GB; one request's KV per GPU minus the capacity (> 0: not even one request fits)",
        "con_layout": "flag; 1 where the mapping cannot lay out (tp, ep or pp does not divide what it splits, "
                      "ep x etp is not tp x attn_dp, or ep does not divide a load balancer's expert slots)",
        "con_precision": "flag; 1 where the GPU has no tensor cores for the precision, or no format for the KV precision",
    }

    #: what the design part reads: every input but the request shape and the per-row engine settings
    design_requires = tuple(k for k in requires if k not in ("input_len", "output_len", "max_batch_size",
                                                             "max_num_tokens", "kv_mem_frac", "spec_weights_gb",
                                                             "latency_tuned"))

    def design_compute(self, c, cal):
        """What depends on the design alone (objectives/serving/designs.py): weights, KV bytes per token,
        HBM less the weights, the engine's traits, layout and precision flags."""
        t, d, p, ep = c["tp"], c["attn_dp"], c["pp"], c["ep"]
        gpus_stage = t * d
        h, vocab = c["d_model"], c["vocab_size"]
        layers, moe_layers, full_layers = stage_layers(c)
        prec, kvp, engine = as_codes(c["precision"]), as_codes(c["kv_precision"]), as_codes(c["engine"])
        bpw = lookup(BYTES_PER_VALUE, prec)
        repl = c["params_attn_replicated_layer"]
        attn = (c["params_attn_layer"] - repl) / t + repl
        shared = (c["params_ffn_layer"] - c["params_expert_layer"]) / t  # shared experts and router, as dense
        linear = layers * attn + (layers - moe_layers) * c["params_ffn_dense_layer"] / t + moe_layers * shared
        embedding = np.where(p > 1, vocab * h, c["params_embedding"]) / t
        # the routed experts' slots over ep x etp (objectives/serving/experts.py; a balancer's copies included)
        weights = bpw * linear + expert_weight_bytes_per_gpu(c, bpw, moe_layers) + 2.0 * embedding
        kv_layer = kv_bytes_per_token_layer(c)
        hbm = c["gpu_hbm_gb"] * GIB_PER_GB * 1e9
        reserved = cal.base.hbm_reserved_gb * 1e9
        widest = np.maximum(np.where(c["moe_experts"] > 0, c["moe_topk"] * c["d_ff"], 0.0),
                            np.where(c["dense_d_ff"] > 0, c["dense_d_ff"], c["d_ff"]))
        # layout: tp splits the query heads, and the KV heads or their copies evenly (MLA: one latent);
        # ep splits the expert slots and the stage's GPUs; no more stages than layers
        layout = (np.mod(c["n_heads"], t) != 0) | (p > c["n_layers"]) \
            | ((c["kv_lora_rank"] <= 0) & (np.mod(t, c["n_kv_heads"]) != 0) & (np.mod(c["n_kv_heads"], t) != 0))
        if np.any(ep > 1):
            layout = layout | (np.mod(expert_slots(c), ep) != 0) | (np.mod(gpus_stage, ep) != 0) \
                | ((c["moe_experts"] <= 0) & (ep > 1))
        # a given etp with ep makes the stage's GPUs (objectives/serving/experts.py); a balancer's copies need the
        # balancer, and ep splits its E + R slots (objectives/serving/balance.py)
        layout = layout | expert_layout_bad(c) | balance_layout_bad(c)
        rates = (c["gpu_bf16_tflop_s"], c["gpu_fp8_tflop_s"], c["gpu_fp4_tflop_s"])
        precision = ~(select(prec, rates) > 0) | ~(select(kvp, rates) > 0)
        out = {
            "weights_gb": weights / 1e9,
            "kv_bytes_per_token": c["kv_cache_bytes_per_token"] * lookup(BYTES_PER_VALUE, kvp) / 2.0,
            "kv_bytes_per_token_gpu": layers * kv_layer,  # a token in every layer of the stage (inside every window)
            "con_layout": layout.astype(np.float64),
            "con_precision": precision.astype(np.float64),
            "weights": weights, "hbm": hbm, "hbm_free": hbm - reserved - weights,
            "kv_full": kv_layer * full_layers, "reserve_full": lookup(_RESERVE_FULL, engine),
            "kv_frac": lookup(_KV_FRAC, engine), "of_total": lookup(_KV_OF_TOTAL, engine) > 0,
            "engine_batch": lookup(_MAX_BATCH, engine),
            "default_budget": np.where(c["gpu_hbm_gb"] >= 160.0, lookup(_BUDGET_BIG, engine), lookup(_BUDGET, engine)),
            "width": 4.0 * h + 2.0 * widest / t,
            # CUTLASS MoE workspace bytes per gathered token under trtllm's attention DP (module doc)
            "moe_row": np.where((c["moe_experts"] > 0) & (d > 1) & (engine == _TRTLLM), 2.0 * c["moe_topk"]
                                * (2.0 * h + 3.0 * c["d_ff"] / expert_tp(c)), 0.0),
            # the GPUs whose requests trtllm-bench's heuristic counts into one max_batch_size (below)
            "bench_groups": np.where((engine == _TRTLLM) | (engine == _TRTLLM_2024), d, 1.0),
        }
        windowed = layers > full_layers
        if np.any(windowed):  # windowed layers hold at most their window
            out["windowed"], out["kv_windowed"] = windowed, kv_layer * (layers - full_layers)
        return out

    def row_compute(self, c, d, cal):
        """The rest, per row: the request's KV, the engine's batch and token budget, the KV capacity."""
        isl, osl = c["input_len"], c["output_len"]
        reserve = np.where(d["reserve_full"] > 0, isl + osl, isl + 0.5 * osl)
        kv_request = d["kv_full"] * reserve
        if "windowed" in d and np.any(d["windowed"]):
            kv_request = kv_request + d["kv_windowed"] * np.where(c["attn_window"] > 0,
                                                                 np.minimum(reserve, c["attn_window"]), reserve)
        reserved = cal.base.hbm_reserved_gb * 1e9
        frac = given_or(c["kv_mem_frac"], d["kv_frac"])
        # a speculative row's draft module, head or model beside the weights (objectives/serving/speculative.py)
        draft = c["spec_weights_gb"] * 1e9 if "spec_weights_gb" in c else 0.0
        hbm_free = d["hbm_free"] - draft
        # the engine's batch and token budget: trtllm-bench sizes them from the KV that the weights leave
        # (tuning.py calc_engine_setting: min(requests, 4096) / pp, budget batch x (1 + ISL/OSL) in [2048, 32768]).
        # It knows the command's --tp and --pp only (tp_size x pp_size GPUs, the KV heads split over tp), so
        # under attention DP it counts the requests of every attention group, and the engine applies that
        # max_batch_size to each attention-DP rank (bench/benchmark/utils/general.py get_settings passes
        # params tp; the DeepSeek-R1 guide: --max_batch_size per rank): the requests of attn_dp groups
        free0 = np.maximum(hbm_free, 0.0) * frac
        fits0 = free0 / np.maximum(kv_request, 1.0) * d["bench_groups"]
        batch = given_or(c["max_batch_size"], np.minimum(np.maximum(np.ceil(fits0), 1.0), d["engine_batch"]))
        # a latency-tuned instance runs the min-latency configuration: CUDA graphs up to LATENCY_GRAPH_MAX_BATCH
        # and no larger batch (objectives/serving/latency.py); more requests would run outside its graphs
        batch = np.where(c["latency_tuned"] > 0, np.minimum(batch, LATENCY_GRAPH_MAX_BATCH), batch)
        # trtllm-bench leaves chunked prefill off and so makes room for a whole prompt beside the batch
        # (tensorrt_llm/bench/benchmark/utils/general.py get_settings: max(max_num_tokens, max_isl + max_batch_size))
        bench_budget = np.maximum(np.clip(np.ceil(batch / c["pp"] * (1.0 + isl / osl) / 256.0) * 256.0, 2048.0,
                                          32768.0), isl + batch)
        default_budget = d["default_budget"]
        budget = given_or(c["max_num_tokens"], np.where(default_budget > 0, default_budget, bench_budget))
        workspace = budget * 2.0 * d["width"] + np.minimum(batch, budget) * c["vocab_size"] * 4.0
        # the MoE workspace over the tokens gathered from attn_dp ranks: the dry run's max_num_tokens a rank
        # and the largest decode CUDA graph's pool, min(batch, budget) a rank (module doc; 0 off trtllm attention DP)
        workspace = workspace + d["moe_row"] * c["attn_dp"] * (budget + np.minimum(batch, budget))
        weights = d["weights"] + draft
        kv_cap = np.where(d["of_total"], frac * d["hbm"] - weights - workspace - reserved,
                          frac * (hbm_free - workspace))
        kv_cap = np.maximum(kv_cap, 0.0)
        fits = np.floor(kv_cap / np.maximum(kv_request, 1.0))
        limit = batch * c["attn_dp"]
        return {
            "weights_gb": d["weights_gb"] + draft / 1e9,
            "act_workspace_gb": workspace / 1e9,
            "kv_bytes_per_token": d["kv_bytes_per_token"],
            "kv_bytes_per_token_gpu": d["kv_bytes_per_token_gpu"],
            "kv_request_gb": kv_request / 1e9,
            "kv_cache_gb": kv_cap / 1e9,
            "token_budget": budget,
            "batch_limit": limit,
            "max_concurrency": np.minimum(fits * c["attn_dp"], limit),
            "con_kv": (kv_request - kv_cap) / 1e9,
            "con_layout": d["con_layout"],
            "con_precision": d["con_precision"],
        }
