"""Compute time of one micro-batch on one pipeline stage: a roofline per kernel class.

- GEMMs (the linear layers, Narayanan et al. SC'21 Sec. 5.1) run at the GPU's *measured* achievable GEMM
  rate at the run's precision (peak x MAMF efficiency, hardware-catalog Sec. 1.2), or at HBM bandwidth
  where their weights and activations take longer to stream (a roofline, Williams et al. 2009).
- The attention core runs in 16-bit. Fused flash attention does half the s x s work (causal) at the GPU's
  measured flash-attention efficiency for the stack's kernel class (FlashAttention-2, or FA3 / cuDNN;
  Dao 2023, Shah et al. 2024), and its backward costs 2.5x the forward (five matmuls against two);
  unfused attention does all of it as narrow batched GEMMs and streams the scores through HBM.
- Small GEMMs run below the large-GEMM rate: x d / (d + gemm_n_half) for the narrowest width d of the
  weight, and again for the rows (the micro-batch's tokens; an expert's GEMM, the tokens routed to it):
  fewer output tiles fill fewer waves of the GPU's SMs. The projections (QKV, output) and the MLP each
  have their own widths. The batched QK^T and AV GEMMs of unfused attention run at the large-GEMM rate on
  rows of s (x the stack's ``attn_kernel_scale``), their scores' HBM traffic counted apart.
- Windowed layers (objectives/training/transformer.py): flash attention does a sliding window's band of W keys plus
  the partly masked key tile at its edge (W + ATTN_TILE/2 keys per query, at most s/2), or a chunked layer's
  aligned chunks (C/2 keys per query); unfused attention masks the full s x s and saves nothing.
- MLA: its down projections run duplicated on every tp rank on the sequence shard, as one GEMM of width
  q_lora + kv_lora + rope; its up projections and output are tensor parallel; QK^T runs over
  qk_nope + qk_rope per head and AV over v_head_dim.
- A stage mixing MoE and dense layers, full and windowed attention (objectives/training/layout.py) sums each kind's
  layer time over the layers of that kind it holds; ``time_layer_*`` are the busiest stage's mean layer.
- Element-wise work (norms, residual adds fused with bias and dropout, activation functions, rotary on q
  and k, the cross-entropy over fp32 logits) is bound by HBM bandwidth; sequence parallelism splits the
  h-wide part over tp ranks (Korthikanti et al. Sec. 4.2.2), without it each tp rank repeats it.
- fp8 and fp4 GEMMs pay for quantizing their inputs in the forward and their output gradients in the
  backward (with the transposed copy the other GEMM needs), and their weights every micro-batch, at the
  bytes of the run's recipe (``fp8_recipe``; NVFP4's own: objectives/training/quantization.py).
- MoE layers stream the token permutation (dispatch and combine) through HBM.
- Context parallelism (ring attention, Transformer Engine ``AttnFuncWithCPAndKVP2P``): the core runs as cp
  kernel calls per pass, each over s/(2 cp) keys per query (causal load balancing: 2 cp chunks), so the
  kernel's own short-sequence rolloff is paid per call (ATTN_CALL_HALF_KEYS); each call writes a partial
  output the forward merges by its log-sum-exp, and the backward adds each call's dQ, dK and dV into its
  accumulators, all through HBM (CP_MERGE_BYTES).
- The flash-attention forward's softmax exponentials run on the special-function units, which on Blackwell
  the kernel waits on for about half its time (EXP_WAIT_SHARE); Blackwell Ultra doubles their rate, so its
  forward takes (1 - share) + share x EXP_REF_TERA_S / gpu_exp_tera_s of the Blackwell time (no term where
  the catalog gives no rate). The backward, bound by shared memory, is unchanged.
- PyTorch FSDP's post-backward hook streams every weight's gradient through HBM in each micro-batch's backward
  (concatenated, cast to fp32, pre-divided: objectives/training/fsdp_grads.py), the output layer's too.
- Each layer pass pays the stack's ``kernel_overhead_s`` (and an MoE layer ``moe_expert_overhead_s`` per
  expert the GPU holds, moe_experts / ep) of launch and synchronisation the roofline does not see.

- The output layer runs in bf16 in every recipe (Megatron-Core's output layer is a plain
  ColumnParallelLinear, outside Transformer Engine's fp8 autocast), at the bf16 GEMM rate.
- No kernel runs faster than the GPU's large-GEMM rate at its precision: the attention kernels' rate is
  capped there, so that utilisation never exceeds what the GPU's GEMMs reach.

Backward costs 2x forward for GEMMs and element-wise work. Full recompute adds one forward. Selective
recompute re-runs the attention core (QK^T, softmax, dropout, AV; Korthikanti Sec. 4.2.2): on unfused
stacks that is one more forward of the core; flash attention's backward recomputes its scores anyway
(Dao 2023) and keeps no s x s activations, so there it adds nothing. On MLA it also re-runs the up
projections and their rotary embedding (Megatron-Core ``recompute_modules`` mla_up_proj).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, as_codes, lookup, select
from objectives.calibration import trait
from objectives.training.fsdp_grads import grad_path_bytes
from objectives.training.quantization import block_scaled, cast_bytes, low_precision_weights, weight_cast_bytes
from objectives.training.transformer import attended_keys

__all__ = ["ComputeTime", "ELEMENTWISE_BYTES_PER_TOKEN", "ATTN_TILE", "DROPOUT_ATTN_RATE", "ATTN_CALL_HALF_KEYS",
           "CP_MERGE_BYTES", "EXP_REF_TERA_S", "EXP_WAIT_SHARE"]

#: HBM bytes per token per layer forward of the element-wise kernels of a Megatron-Core layer with
#: Transformer Engine's fusions, per element of the width named: "h": 2 norms (r+w: 2 x 4 B) and 2
#: residual adds fused with bias and dropout (Megatron bias_dropout_add: 2r+1w, 2 x 6 B); "h_dropout":
#: with dropout, its two 1-byte masks; "qk": rotary embedding on q and k (TE fused RoPE: r+w, 4 B);
#: "f_gelu" / "f_swiglu": the activation over d_ff (r+w 4 B; SwiGLU reads two halves: 6 B)
ELEMENTWISE_BYTES_PER_TOKEN = {"h": 20.0, "h_dropout": 2.0, "qk": 4.0, "f_gelu": 4.0, "f_swiglu": 6.0}
#: unfused attention, HBM bytes per score forward: QK^T writes it (2), the fused scale-mask-softmax reads
#: and writes it (4), dropout reads it and writes its output and 1-byte mask (5), AV reads it (2)
#: (Korthikanti Sec. 4.1: the 5as^2b term is what is kept of this traffic)
UNFUSED_SCORE_BYTES = 13.0
BYTES_PER_ELEMENT = (2.0, 1.0, 0.5)  # bf16, fp8, fp4 GEMM operands
#: tokens per key tile of the flash-attention kernels (FlashAttention-2 and -3 forward: 128 x 128 tiles for
#: head dimensions 64-256; Dao 2023 Sec. 3.1, Shah et al. 2024 Sec. 3)
ATTN_TILE = 128.0
_ATTN_KERNEL = trait("attention_kernel")
_LOW_PARAMS = trait("low_precision_params")
_GRAD_PATH = grad_path_bytes(trait("fp32_shards"), trait("grad_bytes"))  # bytes per weight per micro-batch, by stack
_ATTN_WORK = np.where(_ATTN_KERNEL > 0, 0.5, 1.0)  # share of the s x s work done (flash skips the masked half)
_ATTN_BWD = np.where(_ATTN_KERNEL > 0, 2.5, 2.0)  # backward / forward of the attention core
#: share of its no-dropout rate a fused flash-attention kernel keeps with attention dropout, forward and
#: backward: it draws a Philox random number per score in the forward and draws the same ones again in the
#: backward to rebuild the mask it does not store (FlashAttention-2's design, Dao 2023 Sec. 3.1; Philox4x32-7
#: per 16 scores), integer work beside the matmuls and the exponentials. Measured with FA2-aligned dropout
#: (p 0.125, bf16, head dims 64-128, ~32K tokens): forward 75-85%, backward 60-70% of the no-dropout TFLOP/s,
#: "roughly constant across seqlen", for both FA4 and cuDNN (Dao-AILab/flash-attention PR #2597, GB200);
#: the midpoints. Megatron's GPT recipes train with attention dropout 0.1 (tools/build_training_runs.py);
#: unfused attention's dropout is its score traffic (UNFUSED_SCORE_BYTES)
DROPOUT_ATTN_RATE = {"fwd": 0.80, "bwd": 0.65}
#: keys per query at which one flash-attention kernel call runs at half its long-sequence rate: the fixed
#: work of each query tile (loading Q, the softmax epilogue, writing O) over its loop along the keys.
#: Least squares of rate = P x L / (L + K) on H100 forward, head dim 128, no causal mask (L keys per query):
#: FlashAttention-2 309-370 TFLOP/s at 512-16K, K = 102; FlashAttention-3 467-648, K = 202 (Shah et al.
#: 2024, Fig. 5; PyTorch benchmark PR #2391, FA3 at the paper's shapes, 430-621, K = 233), by the stack's
#: kernel class (unfused, FA2 class, FA3 / cuDNN). The fitted ``attn_seq_half`` carries this rolloff at
#: cp 1 with the block's per-token work; ring attention's cp calls of s/(2 cp) keys add (cp - 1) x 2K
#: sequence tokens to it (module doc)
ATTN_CALL_HALF_KEYS = (0.0, 100.0, 200.0)
#: HBM bytes per element of the rank's attention tensors that ring attention adds over one call (TE
#: context_parallel.py, 16-bit): forward, each of the cp calls writes a partial output (2 B) that
#: flash_attn_fwd_out_correction merges into the output (read it 2 B, read and write the output 4 B; the
#: first step's initialising merge 4 B): 8 cp - 4 B per output element, against 2 B without cp; backward,
#: each call writes its dQ (dK, dV) and the step adds it to the accumulator (dq.add_: 6 B), 8 B per step
#: after the first, per element of Q and of the K/V chunk
CP_MERGE_BYTES = {"fwd_per_step": 8.0, "fwd_first": 4.0, "bwd_per_step": 8.0}
#: the exponential rate (10^12 exp2 per s) of the GPUs whose flash-attention efficiency the catalog gives for
#: Blackwell (B200, GB200: 5; gpus.yaml gpu_exp_tera_s)
EXP_REF_TERA_S = 5.0
#: share of a Blackwell flash-attention forward that waits on the exponentials: NVIDIA measured the fp8
#: attention forward of DeepSeek-V3 about 1.35x faster on GB300 than on GB200 with 2.14x the exponential rate
#: (10.7 against 5.0 TeraExponentials/s; "Making Softmax More Efficient with Blackwell Ultra", 2025, X29), so
#: 1 / 1.35 = (1 - share) + share / 2.14: share = (1 - 1/1.35) / (1 - 1/2.14) = 0.487, as FlashAttention-4's
#: analysis finds the B200 forward co-bound by tensor cores and exponentials (1,024 cycles each a tile)
EXP_WAIT_SHARE = (1.0 - 1.0 / 1.35) / (1.0 - 5.0 / 10.7)
_F_BYTES = (ELEMENTWISE_BYTES_PER_TOKEN["f_gelu"], ELEMENTWISE_BYTES_PER_TOKEN["f_swiglu"])  # by ffn_kind


def _fill(width: np.ndarray, n_half: float) -> np.ndarray:
    """Share of the large-GEMM rate a GEMM dimension of ``width`` leaves: width / (width + n_half)."""
    return width / (width + n_half)


class ComputeTime(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "ffn_kind", "vocab_size",
        "seq_len", "moe_experts", "moe_topk", "params_attn_layer", "params_attn_replicated_layer",
        "params_expert_layer", "params_ffn_layer", "params_ffn_dense_layer", "attn_qk_dim", "attn_v_dim",
        "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "moe_shared_experts", "dense_d_ff",
        "attn_window", "attn_window_kind", "layers_per_stage", "layers_last_stage", "moe_layers_per_stage",
        "moe_layers_last_stage", "full_attn_layers_per_stage", "full_attn_layers_last_stage",
        "etp", "precision", "fp8_recipe", "tp", "pp", "cp", "ep",
        "micro_batch", "recompute", "dropout",
        "sequence_parallel", "gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16",
        "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa2", "gpu_attn_eff_fa3", "gpu_exp_tera_s", "gpu_hbm_tbyte_s",
        "tied_embeddings", "stack",
    )
    provides = {
        "gemm_flops_per_s": "FLOP/s; achievable GEMM rate at the run's precision (peak x measured efficiency)",
        "peak_flops_per_s": "FLOP/s; dense peak at the run's precision (the MFU denominator)",
        "time_layer_fwd_s": "s; one layer's forward pass for one micro-batch (the busiest stage's mean layer)",
        "time_layer_bwd_s": "s; one layer's backward pass (plus recompute) for one micro-batch (the busiest stage's mean "
                            "layer)",
        "time_attn_fwd_s": "s; the attention core's forward in one layer for one micro-batch (the busiest stage's mean layer)",
        "time_qkv_gemm_s": "s; one layer's column-parallel attention GEMMs (QKV; MLA: the up projections) for one "
                           "micro-batch (its input- and weight-gradient GEMMs each take as long)",
        "time_fc1_gemm_s": "s; one layer's first feed-forward GEMM (gate and up) for one micro-batch, likewise (the busiest "
                           "stage's mean layer)",
        "time_logits_s": "s; output projection and cross-entropy, forward and backward, one micro-batch",
        "time_compute_mb_s": "s; compute of one micro-batch on the slowest pipeline stage",
        "con_precision": "flag; 1 where the GPU has no tensor cores for the precision, 2 where an fp8 run asks for "
                         "MXFP8 on tensor cores without block scaling (<= 0 supported)",
    }

    def compute(self, c, cal):
        prec = c["precision"]
        peak = select(prec, (c["gpu_bf16_tflop_s"], c["gpu_fp8_tflop_s"], c["gpu_fp4_tflop_s"])) * 1e12
        eff = select(prec, (c["gpu_gemm_eff_bf16"], c["gpu_gemm_eff_fp8"], c["gpu_gemm_eff_fp4"]))
        unsupported = ~((peak > 0) & (eff > 0))
        # the fp8 recipe (objectives.training.quantization; a blank is the GPU's, objectives.pipeline); MXFP8 needs
        # tensor cores that scale blocks
        recipe = c["fp8_recipe"]
        no_mx = (prec == 1) & (recipe == 3) & ~block_scaled(c["gpu_fp4_tflop_s"])
        bf16_rate = c["gpu_bf16_tflop_s"] * 1e12
        bf16_gemm = bf16_rate * c["gpu_gemm_eff_bf16"]
        gemm_rate = np.where(unsupported, bf16_gemm, peak * eff)
        hbm = c["gpu_hbm_tbyte_s"] * 1e12
        bpe = lookup(BYTES_PER_ELEMENT, prec)

        t, h = c["tp"], c["d_model"]
        stack = as_codes(c["stack"])
        tokens = c["micro_batch"] * c["seq_len"] / c["cp"]  # tokens one GPU processes per micro-batch
        moe = c["moe_experts"] > 0
        mla = c["kv_lora_rank"] > 0
        q = c["n_heads"] * c["attn_qk_dim"]  # queries; keys n_kv_heads wide (MLA: n_kv_heads = n_heads)
        k = c["n_kv_heads"] * c["attn_qk_dim"]
        vals = c["n_kv_heads"] * c["attn_v_dim"]
        ctx = c["n_heads"] * c["attn_v_dim"]
        n_mats = 2.0 + c["ffn_kind"]
        two_h = 2.0 * h
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        n_half = cal.gemm_n_half
        e = ELEMENTWISE_BYTES_PER_TOKEN

        # --- attention projections, the same in every layer. Tensor parallel Q/K/V (MLA: the up
        # projections) and O; MLA's down projections are duplicated on every tp rank (Megatron-Core
        # multi_latent_attention.py: TELinear parallel_mode 'duplicated'), run on the sequence-parallel shard
        # (all tokens without sequence parallelism) as one GEMM of width q_lora + kv_lora + rope (its fused
        # form, linear_qkv_down_proj). Small GEMMs fill fewer tiles and waves: rate x d / (d + n_half) on the
        # narrowest width of the weight (N, K) and again on the rows (M: the tokens)
        repl = c["params_attn_replicated_layer"]
        down_width = np.where(c["q_lora_rank"] > 0, c["q_lora_rank"], 0.0) + c["kv_lora_rank"] + c["qk_rope_dim"]
        proj_rate = gemm_rate * _fill(np.minimum(h, q / t), n_half) * _fill(tokens, n_half)
        down_rate = gemm_rate * _fill(np.minimum(h, np.maximum(down_width, 1.0)), n_half) * _fill(tokens / sp_split, n_half)
        attn_split = c["params_attn_layer"] - repl
        t_proj = 2.0 * tokens * attn_split / t / proj_rate + np.where(mla, 2.0 * tokens / sp_split * repl / down_rate, 0.0)
        flops_proj = 2.0 * tokens * attn_split / t + 2.0 * tokens / sp_split * repl
        attn_weights = attn_split / t + repl  # this GPU's attention weights, streamed once
        latents = np.where(mla, np.where(c["q_lora_rank"] > 0, c["q_lora_rank"], 0.0) + c["kv_lora_rank"], 0.0)
        # 16-bit activations in and out of every GEMM: QKV (MLA: down and up) input h and outputs, O input
        # ctx and output h; MLA's latents written by the down GEMM and read by the up GEMMs
        attn_io = 2.0 * tokens * ((two_h + q + k + vals + ctx) / t + (2.0 * latents + c["qk_rope_dim"]) / sp_split)

        # --- feed-forward, by layer kind: an MoE layer (top-k routed experts on the tokens routed to each,
        # shared experts and the router on every token) and a dense layer (width dense_d_ff; d_ff in a dense model)
        experts = np.maximum(c["moe_experts"], 1.0)
        topk = np.where(moe, c["moe_topk"], 0.0)
        shared = np.where(moe, c["moe_shared_experts"], 0.0)
        rows_expert = tokens * topk * c["ep"] / experts
        routed_rate = gemm_rate * _fill(np.minimum(h, c["d_ff"] / t), n_half) * _fill(np.maximum(rows_expert, 1.0), n_half)
        shared_rate = gemm_rate * _fill(np.minimum(h, np.maximum(shared, 1.0) * c["d_ff"] / t), n_half) * _fill(tokens, n_half)
        dense_width = np.where(moe & (c["dense_d_ff"] > 0), c["dense_d_ff"], c["d_ff"])
        dense_rate = gemm_rate * _fill(np.minimum(h, dense_width / t), n_half) * _fill(tokens, n_half)
        one_expert = n_mats * h * c["d_ff"]
        flops_routed = 2.0 * tokens * (topk * one_expert + h * c["moe_experts"]) / t  # the router at the experts' rate
        flops_shared = 2.0 * tokens * shared * one_expert / t
        flops_dense = 2.0 * tokens * c["params_ffn_dense_layer"] / t
        t_ffn_moe = flops_routed / routed_rate + flops_shared / shared_rate
        t_ffn_dense = flops_dense / dense_rate
        moe_weights = c["params_expert_layer"] / (c["ep"] * c["etp"]) + (c["params_ffn_layer"] - c["params_expert_layer"]) / t
        dense_weights = c["params_ffn_dense_layer"] / t
        widths_moe = c["d_ff"] * (topk + shared)  # FFN interior widths a token passes through
        moe_io = 2.0 * tokens * (topk + shared) * (two_h + n_mats * c["d_ff"]) / t
        dense_io = 2.0 * tokens * (two_h + n_mats * dense_width) / t
        # roofline of each layer kind's GEMMs: their FLOPs at their rates, or their weights and activations
        # through HBM where that takes longer (Williams et al. 2009)
        t_mm_moe = np.maximum(t_proj + t_ffn_moe, (bpe * (attn_weights + moe_weights) + attn_io + moe_io) / hbm)
        t_mm_dense = np.maximum(t_proj + t_ffn_dense, (bpe * (attn_weights + dense_weights) + attn_io + dense_io) / hbm)

        # attention core. Flash attention (fused) skips fully masked tiles (Dao 2023) and keeps the scores on
        # chip, at the GPU's measured flash-attention efficiency for the stack's kernel class, rolling off
        # for short sequences: a full causal layer does s/2 keys per query; a sliding-window layer the band of
        # its window plus the partly masked tiles at the band's edge, W + ATTN_TILE/2 (a query tile's band of W
        # keys crosses W/B + 1 key tiles of B where the causal diagonal crosses one, whose half the measured
        # efficiency already carries; FlashAttention-2, Dao 2023, Sec. 3.1.1); chunked layers their chunks
        # (tiles align with them). Unfused attention runs QK^T and AV over the full s x s as batched GEMMs and
        # streams the scores through HBM (UNFUSED_SCORE_BYTES per score forward), windowed layers too (the
        # mask is applied to the scores, nothing skipped); the stack's attn_kernel_scale scales that GEMM rate
        # as it scales the flash kernels' efficiency
        kernel = lookup(_ATTN_KERNEL, stack)
        fused = kernel > 0
        # ring attention's cp calls of s/(2 cp) keys per query each pay the kernel's rolloff (ATTN_CALL_HALF_KEYS):
        # 1 + H/s + 2K (cp - 1)/s over the cp = 1 rolloff H, which carries one call's
        ring_half = 2.0 * lookup(np.array(ATTN_CALL_HALF_KEYS), kernel) * (c["cp"] - 1.0)
        flash_eff = select(kernel, (c["gpu_attn_eff_fa2"], c["gpu_attn_eff_fa2"], c["gpu_attn_eff_fa3"])) \
            * lookup(cal.attn_kernel_scale, stack) * c["seq_len"] / (c["seq_len"] + cal.attn_seq_half + ring_half)
        flash_rate = np.minimum(bf16_rate * flash_eff, bf16_gemm)  # no faster than the GPU's large GEMMs
        s = c["seq_len"]
        window = c["attn_window"]
        chunked = c["attn_window_kind"] > 0
        band = np.where(chunked, attended_keys(s, window, 1.0), np.minimum(window + 0.5 * ATTN_TILE, 0.5 * s))
        keys_win = np.where((window > 0) & (window < s), band, 0.5 * s)
        flops_per_key = 2.0 * tokens * c["n_heads"] * (c["attn_qk_dim"] + c["attn_v_dim"]) / t
        if fused.all():  # every row's stack runs flash attention
            t_attn_full = flops_per_key * 0.5 * s / flash_rate
            t_attn_win = flops_per_key * keys_win / flash_rate
        else:
            unfused_rate = bf16_gemm * _fill(s, n_half) * lookup(cal.attn_kernel_scale, stack)
            attn_rate = np.where(fused, flash_rate, unfused_rate)
            scores_bytes = np.where(fused, 0.0, UNFUSED_SCORE_BYTES * tokens * s * c["n_heads"] / t)
            t_attn_full = flops_per_key * np.where(fused, 0.5 * s, s) / attn_rate + scores_bytes / hbm
            t_attn_win = flops_per_key * np.where(fused, keys_win, s) / attn_rate + scores_bytes / hbm
        attn_bwd = lookup(_ATTN_BWD, stack)  # flash backward: 5 matmuls against 2; unfused: 2x forward
        # attention dropout in a fused kernel: the forward (and a recomputed one) at DROPOUT_ATTN_RATE fwd of its
        # rate, the backward at bwd (its ratio to the slowed forward)
        dropped = fused & (c["dropout"] > 0)
        drop_fwd = np.where(dropped, 1.0 / DROPOUT_ATTN_RATE["fwd"], 1.0)
        t_attn_full, t_attn_win = t_attn_full * drop_fwd, t_attn_win * drop_fwd
        attn_bwd = attn_bwd * np.where(dropped, DROPOUT_ATTN_RATE["fwd"] / DROPOUT_ATTN_RATE["bwd"], 1.0)
        # the fused forward's exponentials at the GPU's rate against the Blackwell one its efficiency describes
        # (EXP_WAIT_SHARE); the backward keeps its own time (attn_bwd is relative to the forward)
        exp_rate = c["gpu_exp_tera_s"]
        exp_fwd = np.where(fused & (exp_rate > 0),
                           1.0 - EXP_WAIT_SHARE + EXP_WAIT_SHARE * EXP_REF_TERA_S / np.where(exp_rate > 0, exp_rate, 1.0), 1.0)
        t_attn_full, t_attn_win = t_attn_full * exp_fwd, t_attn_win * exp_fwd
        attn_bwd = attn_bwd / exp_fwd

        # ring attention's merges through HBM (CP_MERGE_BYTES): the forward's partial outputs (per element of
        # the rank's output, n_heads / tp x v wide), the backward's dQ and dK/dV accumulation (Q and the K/V chunk)
        ring = c["cp"] > 1
        steps = c["cp"] - 1.0
        m_b = CP_MERGE_BYTES
        kv_width = c["n_kv_heads"] * (c["attn_qk_dim"] + c["attn_v_dim"]) / np.minimum(t, c["n_kv_heads"])
        t_ring_fwd = np.where(ring, (m_b["fwd_per_step"] * steps + m_b["fwd_first"]) * tokens * ctx / t, 0.0) / hbm
        t_ring_bwd = np.where(ring, m_b["bwd_per_step"] * steps * tokens * (q / t + kv_width), 0.0) / hbm

        # element-wise work through HBM: norms and residual adds (h, split over tp with sequence
        # parallelism), rotary on q and k (MLA: the rotary part only, its shared key on every tp rank),
        # MLA's latent norms, the activation function over each layer kind's FFN widths; MoE token
        # permutation: dispatch reads h and writes k copies, combine the reverse (16-bit)
        f_bytes = lookup(_F_BYTES, c["ffn_kind"])
        rope = np.where(mla, c["n_heads"] * c["qk_rope_dim"] / t + c["qk_rope_dim"], (q + k) / t)
        h_bytes = e["h"] + e["h_dropout"] * (c["dropout"] > 0)
        elem_common = tokens * (h_bytes * h / sp_split + e["qk"] * rope + 4.0 * latents / sp_split)
        permute = np.where(moe, 2.0 * 2.0 * h * (1.0 + topk) / sp_split, 0.0)
        t_elem_moe = (elem_common + tokens * (f_bytes * widths_moe / t + permute)) / hbm
        t_elem_dense = (elem_common + tokens * f_bytes * dense_width / t) / hbm
        # fp8/fp4 GEMMs quantize their inputs (CAST_BYTES per element; NVIDIA Transformer Engine FP8 primer,
        # cast_transpose): forward, each GEMM's input (QKV and FC1 inputs on the rank's sequence shard,
        # before the all-gather of sequence parallelism; MLA's latents likewise; the out-projection's and
        # FC2's inputs split over tp); backward, each GEMM's output gradient (QKV's, FC1's split over tp, MLA's
        # down projection's on the shard, the out-projection's and FC2's full h); the weights once per micro-batch
        cast = cast_bytes(prec, recipe, c["gpu_fp4_tflop_s"]) * tokens / hbm
        cast_attn_fwd = cast * (h / sp_split + latents / sp_split + ctx / t)
        cast_attn_bwd = cast * (h + (q + k + vals) / t + np.where(mla, down_width / sp_split, 0.0))
        cast_ffn_fwd_moe, cast_ffn_fwd_dense = cast * (h / sp_split + widths_moe / t), cast * (h / sp_split + dense_width / t)
        cast_ffn_bwd_moe = cast * (h + (n_mats - 1.0) * widths_moe / t)
        cast_ffn_bwd_dense = cast * (h + (n_mats - 1.0) * dense_width / t)
        # weights a stack keeps in low precision were quantized in the optimizer step: none per micro-batch
        kept_low = low_precision_weights(prec, recipe, lookup(_LOW_PARAMS, stack))
        cast_weights = np.where(kept_low, 0.0, weight_cast_bytes(prec, recipe, c["gpu_fp4_tflop_s"])) / hbm
        cast_w_moe, cast_w_dense = cast_weights * (attn_weights + moe_weights), cast_weights * (attn_weights + dense_weights)

        # launch and synchronisation: per layer pass; an MoE layer adds one grouped-GEMM launch set per local
        # expert (Transformer Engine GroupedLinear; calibration.py)
        overhead = lookup(cal.kernel_overhead_s, stack)
        overhead_moe = overhead + cal.moe_expert_overhead_s * c["moe_experts"] / np.maximum(c["ep"], 1.0)

        # the column-parallel attention GEMMs (QKV; MLA: the up projections), whose backward collectives can
        # hide behind them (objectives.training.communication); selective recompute re-runs MLA's up projections and
        # their rotary embedding (Megatron-Core recompute_modules mla_up_proj, as every Megatron-Bridge
        # DeepSeek-V3 recipe sets), whose per-head queries, keys and values it does not keep (objectives.training.memory)
        t_qkv = 2.0 * tokens * (attn_split - ctx * h) / t / proj_rate
        up_rerun = np.where(mla & (c["recompute"] == 1), t_qkv + tokens * e["qk"] * rope / hbm, 0.0)

        def passes(t_mm, t_elem, t_cast_fwd, t_cast_bwd, t_cast_w, ov):
            """(forward, backward, recompute) of one layer of a kind, its attention core aside: backward 2x
            the GEMMs and element-wise work, full recompute one more forward, selective MLA's up projections."""
            fwd = t_mm + t_elem + t_cast_fwd + ov + t_cast_w
            return fwd, 2.0 * (t_mm + t_elem + ov) + t_cast_bwd, np.where(c["recompute"] == 2, fwd, up_rerun)

        # PyTorch FSDP's gradient path (fsdp_grads.py): its bytes per weight of the layer, in the backward
        grad_path = lookup(_GRAD_PATH, stack) / hbm
        f_moe, b_moe, r_moe = passes(t_mm_moe, t_elem_moe, cast_attn_fwd + cast_ffn_fwd_moe, cast_attn_bwd + cast_ffn_bwd_moe
                                     + grad_path * (attn_weights + moe_weights), cast_w_moe, overhead_moe)
        f_dense, b_dense, r_dense = passes(t_mm_dense, t_elem_dense, cast_attn_fwd + cast_ffn_fwd_dense, cast_attn_bwd
                                           + cast_ffn_bwd_dense + grad_path * (attn_weights + dense_weights), cast_w_dense,
                                           overhead)
        # the attention core: its backward, and again where recomputed (full recompute; selective on unfused
        # stacks, whose scores it drops; flash attention's backward recomputes them anyway, Dao 2023)
        rerun = (c["recompute"] == 2) | ((c["recompute"] == 1) & ~fused)

        def stage(n, n_moe, n_full):
            """Compute of a stage of n layers, n_moe of them MoE and n_full with full attention."""
            ffn = n_moe * (f_moe + b_moe + r_moe) + (n - n_moe) * (f_dense + b_dense + r_dense)
            core = (n_full * t_attn_full + (n - n_full) * t_attn_win) * (1.0 + attn_bwd + rerun)
            return ffn + core + n * (t_ring_fwd * (1.0 + rerun) + t_ring_bwd)

        n, m, full = c["layers_per_stage"], c["moe_layers_per_stage"], c["full_attn_layers_per_stage"]
        per = 1.0 / np.maximum(n, 1.0)
        t_attn = (full * t_attn_full + (n - full) * t_attn_win) * per  # the busiest stage's mean layer
        fwd = (m * f_moe + (n - m) * f_dense) * per + t_attn + t_ring_fwd
        bwd = (m * (b_moe + r_moe) + (n - m) * (b_dense + r_dense)) * per + t_attn * (attn_bwd + rerun) \
            + t_ring_fwd * rerun + t_ring_bwd

        # vocabulary projection in bf16 (GEMM, 3 passes; its own narrowest width) and fp32 cross-entropy
        # (read/write logits, 3 passes); FSDP's gradient path of the output layer and the input embedding (one
        # matrix where tied)
        v_local = c["vocab_size"] / t
        narrow_v = np.minimum(h, v_local)
        logits_rate = bf16_gemm * _fill(narrow_v, n_half) * _fill(tokens, n_half)
        t_logits = 3.0 * np.maximum(2.0 * tokens * h * v_local / logits_rate, 2.0 * h * v_local / hbm) \
            + 3.0 * 8.0 * tokens * v_local / hbm + grad_path * (2.0 - c["tied_embeddings"]) * h * v_local

        f1 = (n_mats - 1.0) / n_mats  # gate and up: the FC1 share of an FFN's matrices
        t_fc1 = f1 * (m * t_ffn_moe + (n - m) * t_ffn_dense) * per
        flops_ffn = (m * (flops_routed + flops_shared) + (n - m) * flops_dense) * per
        t_ffn = (m * t_ffn_moe + (n - m) * t_ffn_dense) * per
        mean_rate = (flops_proj + flops_ffn) / (t_proj + t_ffn)  # the mean rate of the busiest stage's GEMMs

        return {
            "gemm_flops_per_s": mean_rate,
            "peak_flops_per_s": np.where(unsupported, np.nan, peak),
            "time_layer_fwd_s": fwd,
            "time_layer_bwd_s": bwd,
            "time_attn_fwd_s": t_attn + t_ring_fwd,
            "time_qkv_gemm_s": t_qkv,
            "time_fc1_gemm_s": t_fc1,
            "time_logits_s": t_logits,
            # the slowest stage: the busiest, or the last with the output layer and loss (objectives/training/divisibility.py)
            "time_compute_mb_s": np.maximum(stage(n, m, full),
                                            stage(c["layers_last_stage"], c["moe_layers_last_stage"],
                                                  c["full_attn_layers_last_stage"]) + t_logits),
            "con_precision": np.where(unsupported, 1.0, np.where(no_mx, 2.0, 0.0)),
        }
