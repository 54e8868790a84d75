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
- Element-wise work (norms, residual adds fused with bias and dropout, activation functions, rotary on q
  and k, the cross-entropy over fp32 logits) is bound by HBM bandwidth; sequence parallelism splits the
  h-wide part over tp ranks (Korthikanti et al. Sec. 4.2.2), without it each tp rank repeats it.
- fp8 and fp4 GEMMs pay for quantizing their inputs in the forward and their output gradients in the
  backward (with the transposed copy the other GEMM needs), and their weights every micro-batch.
- MoE layers stream the token permutation (dispatch and combine) through HBM.
- Each layer pass pays the stack's ``kernel_overhead_s`` (and an MoE layer ``moe_expert_overhead_s`` per
  expert the GPU holds, moe_experts / ep) of launch and synchronisation the roofline does not see.

- The output layer runs in bf16 in every recipe (Megatron-Core's output layer is a plain
  ColumnParallelLinear, outside Transformer Engine's fp8 autocast), at the bf16 GEMM rate.
- No kernel runs faster than the GPU's large-GEMM rate at its precision: the attention kernels' rate is
  capped there, so that utilisation never exceeds what the GPU's GEMMs reach.

Backward costs 2x forward for GEMMs and element-wise work. Full recompute adds one forward. Selective
recompute re-runs the attention core (QK^T, softmax, dropout, AV; Korthikanti Sec. 4.2.2): on unfused
stacks that is one more forward of the core; flash attention's backward recomputes its scores anyway
(Dao 2023) and keeps no s x s activations, so there it adds nothing.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, as_codes, lookup, select
from objectives.calibration import trait

__all__ = ["ComputeTime", "ELEMENTWISE_BYTES_PER_TOKEN"]

#: HBM bytes per token per layer forward of the element-wise kernels of a Megatron-Core layer with
#: Transformer Engine's fusions, per element of the width named: "h": 2 norms (r+w: 2 x 4 B) and 2
#: residual adds fused with bias and dropout (Megatron bias_dropout_add: 2r+1w, 2 x 6 B); "h_dropout":
#: with dropout, its two 1-byte masks; "qk": rotary embedding on q and k (TE fused RoPE: r+w, 4 B);
#: "f_gelu" / "f_swiglu": the activation over d_ff (r+w 4 B; SwiGLU reads two halves: 6 B)
ELEMENTWISE_BYTES_PER_TOKEN = {"h": 20.0, "h_dropout": 2.0, "qk": 4.0, "f_gelu": 4.0, "f_swiglu": 6.0}
#: fp8/fp4 quantisation, HBM bytes per element: read 16-bit, write the low-precision copy and its transpose
#: for the other GEMM of the backward (TE cast_transpose; delayed scaling takes the amax in the same pass)
CAST_BYTES = 4.0
#: unfused attention, HBM bytes per score forward: QK^T writes it (2), the fused scale-mask-softmax reads
#: and writes it (4), dropout reads it and writes its output and 1-byte mask (5), AV reads it (2)
#: (Korthikanti Sec. 4.1: the 5as^2b term is what is kept of this traffic)
UNFUSED_SCORE_BYTES = 13.0
BYTES_PER_ELEMENT = (2.0, 1.0, 0.5)  # bf16, fp8, fp4 GEMM operands
_ATTN_KERNEL = trait("attention_kernel")
_ATTN_WORK = np.where(_ATTN_KERNEL > 0, 0.5, 1.0)  # share of the s x s work done (flash skips the masked half)
_ATTN_BWD = np.where(_ATTN_KERNEL > 0, 2.5, 2.0)  # backward / forward of the attention core
_F_BYTES = (ELEMENTWISE_BYTES_PER_TOKEN["f_gelu"], ELEMENTWISE_BYTES_PER_TOKEN["f_swiglu"])  # by ffn_kind


def _fill(width: np.ndarray, n_half: float) -> np.ndarray:
    """Share of the large-GEMM rate a GEMM dimension of ``width`` leaves: width / (width + n_half)."""
    return width / (width + n_half)


class ComputeTime(Model):
    requires = (
        "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind", "vocab_size",
        "seq_len", "moe_experts", "moe_topk", "params_attn_layer", "params_ffn_layer",
        "params_ffn_active_layer", "layers_per_stage", "layers_last_stage", "etp", "precision", "tp", "pp", "cp", "ep",
        "micro_batch", "recompute", "dropout",
        "sequence_parallel", "gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16",
        "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa2", "gpu_attn_eff_fa3", "gpu_hbm_tbyte_s", "stack",
    )
    provides = {
        "gemm_flops_per_s": "FLOP/s; achievable GEMM rate at the run's precision (peak x measured efficiency)",
        "peak_flops_per_s": "FLOP/s; dense peak at the run's precision (the MFU denominator)",
        "time_layer_fwd_s": "s; one layer's forward pass for one micro-batch",
        "time_layer_bwd_s": "s; one layer's backward pass (plus recompute) for one micro-batch",
        "time_attn_fwd_s": "s; the attention core's forward in one layer for one micro-batch",
        "time_qkv_gemm_s": "s; one layer's QKV projection GEMM for one micro-batch (its input- and weight-gradient GEMMs each "
                           "take as long)",
        "time_fc1_gemm_s": "s; one layer's first feed-forward GEMM (gate and up) for one micro-batch, likewise",
        "time_logits_s": "s; output projection and cross-entropy, forward and backward, one micro-batch",
        "time_compute_mb_s": "s; compute of one micro-batch on the slowest pipeline stage",
        "con_precision": "flag; 1 where the GPU has no tensor cores for the precision (<= 0 supported)",
    }

    def compute(self, c, cal):
        prec = c["precision"]
        peak = select(prec, (c["gpu_bf16_tflop_s"], c["gpu_fp8_tflop_s"], c["gpu_fp4_tflop_s"])) * 1e12
        eff = select(prec, (c["gpu_gemm_eff_bf16"], c["gpu_gemm_eff_fp8"], c["gpu_gemm_eff_fp4"]))
        unsupported = ~((peak > 0) & (eff > 0))
        bf16_rate = c["gpu_bf16_tflop_s"] * 1e12
        bf16_gemm = bf16_rate * c["gpu_gemm_eff_bf16"]
        gemm_rate = np.where(unsupported, bf16_gemm, peak * eff)
        hbm = c["gpu_hbm_tbyte_s"] * 1e12
        bpe = lookup(BYTES_PER_ELEMENT, prec)

        t, h = c["tp"], c["d_model"]
        stack = as_codes(c["stack"])
        tokens = c["micro_batch"] * c["seq_len"] / c["cp"]  # tokens one GPU processes per micro-batch
        moe = c["moe_experts"] > 0
        q = c["n_heads"] * c["d_head"]
        kv = c["n_kv_heads"] * c["d_head"]
        active = np.where(moe, c["moe_topk"], 1.0)
        n_mats = 2.0 + c["ffn_kind"]
        two_h = 2.0 * h

        # linear layers: FLOPs of the active parameters; bytes = weights this GPU holds and streams once
        # plus every GEMM's activation input and output (16-bit)
        # small GEMMs fill fewer tiles and waves: rate x d / (d + n_half) on the narrowest width of the
        # weight (N, K) and again on the rows (M: the tokens of the micro-batch, or those one expert gets)
        n_half = cal.gemm_n_half
        rows_expert = np.where(moe, tokens * active * c["ep"] / np.maximum(c["moe_experts"], 1.0), tokens)
        proj_rate = gemm_rate * _fill(np.minimum(h, q / t), n_half) * _fill(tokens, n_half)
        ffn_rate = gemm_rate * _fill(np.minimum(h, c["d_ff"] / t), n_half) * _fill(rows_expert, n_half)
        flops_proj_mm = 2.0 * tokens * c["params_attn_layer"] / t  # QKV and output projections
        flops_ffn_mm = 2.0 * tokens * c["params_ffn_active_layer"] / t
        weights_local = c["params_attn_layer"] + c["params_ffn_layer"] / np.where(moe, c["ep"] * c["etp"] / t, 1.0)
        act_io = 2.0 * tokens * (two_h + 2.0 * q + 2.0 * kv + active * (two_h + n_mats * c["d_ff"]))
        bytes_mm = (bpe * weights_local + act_io) / t
        t_mm = np.maximum(flops_proj_mm / proj_rate + flops_ffn_mm / ffn_rate, bytes_mm / hbm)
        gemm_rate = (flops_proj_mm + flops_ffn_mm) / (flops_proj_mm / proj_rate + flops_ffn_mm / ffn_rate)  # their mean rate

        # attention core. Flash attention (fused) skips the masked half (Dao 2023) and keeps the scores on
        # chip, at the GPU's measured flash-attention efficiency for the stack's kernel class, rolling off
        # for short sequences. Unfused attention runs QK^T and AV over the full s x s as batched GEMMs of
        # inner width d_head and streams the scores through HBM (UNFUSED_SCORE_BYTES per score forward); the
        # stack's attn_kernel_scale scales that GEMM rate as it scales the flash kernels' efficiency
        kernel = lookup(_ATTN_KERNEL, stack)
        fused = kernel > 0
        flash_eff = select(kernel, (c["gpu_attn_eff_fa2"], c["gpu_attn_eff_fa2"], c["gpu_attn_eff_fa3"])) \
            * lookup(cal.attn_kernel_scale, stack) * c["seq_len"] / (c["seq_len"] + cal.attn_seq_half)
        flash_rate = np.minimum(bf16_rate * flash_eff, bf16_gemm)  # no faster than the GPU's large GEMMs
        flops_attn = lookup(_ATTN_WORK, stack) * 4.0 * tokens * c["seq_len"] * q / t
        if fused.all():  # every row's stack runs flash attention
            t_attn = flops_attn / flash_rate
        else:
            unfused_rate = bf16_gemm * _fill(c["seq_len"], n_half) * lookup(cal.attn_kernel_scale, stack)
            attn_rate = np.where(fused, flash_rate, unfused_rate)
            scores_bytes = np.where(fused, 0.0, UNFUSED_SCORE_BYTES * tokens * c["seq_len"] * c["n_heads"] / t)
            t_attn = flops_attn / attn_rate + scores_bytes / hbm
        attn_bwd = lookup(_ATTN_BWD, stack)  # flash backward: 5 matmuls against 2; unfused: 2x forward

        f_bytes = lookup(_F_BYTES, c["ffn_kind"])
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        # MoE token permutation: dispatch reads h and writes k copies, combine the reverse (16-bit)
        permute = np.where(moe, 2.0 * 2.0 * h * (1.0 + active) / sp_split, 0.0)
        e = ELEMENTWISE_BYTES_PER_TOKEN
        h_bytes = e["h"] + e["h_dropout"] * (c["dropout"] > 0)
        bytes_elem = tokens * (h_bytes * h / sp_split + e["qk"] * (q + kv) / t + f_bytes * c["d_ff"] * active / t
                               + permute)
        # fp8/fp4 GEMMs quantize their inputs (CAST_BYTES per element; NVIDIA Transformer Engine FP8 primer,
        # cast_transpose): forward, each GEMM's input (QKV and FC1 inputs on the rank's sequence shard,
        # before the all-gather of sequence parallelism; the out-projection's and FC2's inputs split over
        # tp); backward, each GEMM's output gradient (QKV's and FC1's split over tp, the out-projection's
        # and FC2's full h); the weights once per micro-batch
        quantized = prec > 0
        f1 = (n_mats - 1.0) * c["d_ff"] * active  # FC1 output width (gate and up for SwiGLU)
        cast_fwd = np.where(quantized, CAST_BYTES * tokens * (two_h / sp_split + (q + c["d_ff"] * active) / t), 0.0)
        cast_bwd = np.where(quantized, CAST_BYTES * tokens * (two_h + (q + 2.0 * kv + f1) / t), 0.0)
        cast_weights = np.where(quantized, 3.0 * weights_local / t, 0.0)
        t_elem = bytes_elem / hbm
        t_cast_fwd, t_cast_bwd = cast_fwd / hbm, cast_bwd / hbm
        t_cast_weights = cast_weights / hbm

        # launch and synchronisation: per layer pass; an MoE layer adds one grouped-GEMM launch set per local
        # expert (Transformer Engine GroupedLinear; calibration.py)
        local_experts = c["moe_experts"] / np.maximum(c["ep"], 1.0)
        overhead = lookup(cal.kernel_overhead_s, stack) \
            + np.where(moe, cal.moe_expert_overhead_s * local_experts, 0.0)
        fwd = t_mm + t_attn + t_elem + t_cast_fwd + overhead + t_cast_weights
        # full recompute: one more forward; selective: the attention core again where it is unfused
        selective_rerun = np.where(fused, 0.0, t_attn)
        recompute = np.where(c["recompute"] == 2, fwd, np.where(c["recompute"] == 1, selective_rerun, 0.0))
        bwd = 2.0 * (t_mm + t_elem + overhead) + t_cast_bwd + attn_bwd * t_attn + recompute

        # vocabulary projection in bf16 (GEMM, 3 passes; its own narrowest width) and fp32 cross-entropy
        # (read/write logits, 3 passes)
        v_local = c["vocab_size"] / t
        narrow_v = np.minimum(h, v_local)
        logits_rate = bf16_gemm * _fill(narrow_v, n_half) * _fill(tokens, n_half)
        t_logits = 3.0 * np.maximum(2.0 * tokens * h * v_local / logits_rate, 2.0 * h * v_local / hbm) \
            + 3.0 * 8.0 * tokens * v_local / hbm

        # the column-parallel GEMMs whose backward collectives can hide behind them (objectives.communication)
        t_qkv = 2.0 * tokens * h * (q + 2.0 * kv) / t / proj_rate
        t_fc1 = 2.0 * tokens * h * (n_mats - 1.0) * c["d_ff"] * active / t / ffn_rate

        return {
            "gemm_flops_per_s": gemm_rate,
            "peak_flops_per_s": np.where(unsupported, np.nan, peak),
            "time_layer_fwd_s": fwd,
            "time_layer_bwd_s": bwd,
            "time_attn_fwd_s": t_attn,
            "time_qkv_gemm_s": t_qkv,
            "time_fc1_gemm_s": t_fc1,
            "time_logits_s": t_logits,
            # the slowest stage: the busiest, or the last with the output layer and loss (objectives/divisibility.py)
            "time_compute_mb_s": np.maximum(c["layers_per_stage"] * (fwd + bwd),
                                            c["layers_last_stage"] * (fwd + bwd) + t_logits),
            "con_precision": unsupported.astype(np.float64),
        }
