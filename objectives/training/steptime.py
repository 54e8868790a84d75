"""Step time, throughput and utilisation: the pieces put on one critical path.

With m micro-batches per pipeline, each taking t_mb on the slowest stage (compute plus exposed tp, cp
and ep communication), 1F1B or interleaved pipelining costs m·t_mb plus a bubble of
t_mb·(max(p-m, 0) + (min(m, p) - 1)/v): with m >= p the (p-1)/v·t_mb of Narayanan et al. SC'21,
Sec. 2.2.2 (bubble fraction (p-1)/(v·m)); with m < p no micro-batch waits for a device, the last one
finishes after p·v + m - 1 chunks of t_mb/v, so the step is (p + (m-1)/v)·t_mb and interleaving hides
only (m-1)·(1 - 1/v) of the p-1 (for v = 1 both give (p-1)·t_mb), plus pipeline sends, the exposed
data-parallel traffic and the optimizer step. The optimizer (Adam) is bound by HBM bandwidth: it reads
fp32 weights, both moments and gradients and writes weights, moments and 16-bit weights, about 28 bytes
per parameter of the GPU's shard.

MFU = model FLOPs per second per GPU / dense peak at the run's precision (Korthikanti et al. Sec. 6;
Chowdhery et al. 2022, App. B); model FLOPs exclude recomputation. ``mfu`` counts the causal half of the
attention scores (Megatron-LM and Megatron-Bridge today; never above the GPU's GEMM efficiency),
``mfu_full_attn`` all of them (Narayanan et al., NeMo 24.x, MosaicML: compare with those sources'
published MFU); objectives.training.transformer.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["StepTime", "ADAM_BYTES_PER_PARAM"]

ADAM_BYTES_PER_PARAM = 28.0
SECONDS_PER_DAY = 86400.0


class StepTime(Model):
    requires = (
        "n_gpus", "seq_len", "global_batch", "train_tokens", "tp", "pp", "vp", "dp", "cp", "ep", "etp", "zero_stage",
        "n_microbatches", "params_per_gpu", "params_expert_per_gpu", "model_flops_per_token",
        "model_flops_per_token_full_attn", "gpu_hbm_tbyte_s", "peak_flops_per_s",
        "time_compute_mb_s", "time_tp_comm_mb_s", "time_cp_comm_mb_s", "time_ep_comm_mb_s",
        "time_pp_comm_mb_s", "time_dp_comm_exposed_s", "con_memory", "con_layout", "con_precision",
    )
    provides = {
        "time_compute_s": "s; compute of every micro-batch on the slowest stage, per step",
        "time_tp_comm_s": "s; exposed tensor-parallel communication per step",
        "time_cp_comm_s": "s; exposed context-parallel communication per step",
        "time_ep_comm_s": "s; expert-parallel all-to-all per step",
        "time_pp_comm_s": "s; pipeline point-to-point sends per step",
        "time_pp_bubble_s": "s; pipeline fill and drain per step",
        "time_optimizer_s": "s; optimizer step",
        "step_time_s": "s; one training step (sum of the time_*_s breakdown)",
        "tokens_per_s": "tokens/s; whole job",
        "tokens_per_s_per_gpu": "tokens/s; per GPU",
        "model_tflop_s_per_gpu": "TFLOP/s; model FLOPs (causal attention, recompute excluded) per GPU",
        "mfu": "fraction; model FLOPs utilisation against dense peak at the run's precision, causal attention counted",
        "mfu_full_attn": "fraction; mfu with the full s x s attention counted (Narayanan, NeMo 24.x, MosaicML convention)",
        "time_to_train_ideal_days": "days; train_tokens at this throughput, no failures (time_to_train_days adds them)",
        "gpu_hours": "GPU-hours; n_gpus x time_to_train_ideal_days (no failures)",
        "feasible": "bool; every con_* <= 0 and the step time a finite number",
    }

    def compute(self, c, cal):
        m = c["n_microbatches"]
        mb = c["time_compute_mb_s"]
        tp, cp, ep = c["time_tp_comm_mb_s"], c["time_cp_comm_mb_s"], c["time_ep_comm_mb_s"]
        t_mb = mb + tp + cp + ep
        # the optimizer updates the GPU's shard: dense parameters over dp x cp, expert ones over the expert
        # data-parallel group dp x cp x tp / (ep x etp) (as objectives.training.memory shards them)
        expert = c["params_expert_per_gpu"]
        dense_shard = c["dp"] * c["cp"]
        expert_shard = dense_shard * c["tp"] / (c["ep"] * c["etp"])
        updated = np.where(c["zero_stage"] >= 1, (c["params_per_gpu"] - expert) / dense_shard + expert / expert_shard,
                           c["params_per_gpu"])
        optimizer = ADAM_BYTES_PER_PARAM * updated / (c["gpu_hbm_tbyte_s"] * 1e12)
        bubble = t_mb * (np.maximum(c["pp"] - m, 0.0) + (np.minimum(m, c["pp"]) - 1.0) / c["vp"])
        pp_comm = m * c["time_pp_comm_mb_s"]
        step = m * t_mb + bubble + pp_comm + c["time_dp_comm_exposed_s"] + optimizer
        tokens = c["global_batch"] * c["seq_len"]
        tps = tokens / step
        tps_gpu = tps / c["n_gpus"]
        model_tflop_s = c["model_flops_per_token"] * tps_gpu / 1e12
        train_s = c["train_tokens"] / tps
        # a step time that is no number (a nonsense override such as d_head 0) is no design either
        feasible = (c["con_memory"] <= 0) & (c["con_layout"] <= 0) & (c["con_precision"] <= 0) & np.isfinite(step)
        return {
            "time_compute_s": m * mb,
            "time_tp_comm_s": m * tp,
            "time_cp_comm_s": m * cp,
            "time_ep_comm_s": m * ep,
            "time_pp_comm_s": pp_comm,
            "time_pp_bubble_s": bubble,
            "time_optimizer_s": optimizer,
            "step_time_s": step,
            "tokens_per_s": tps,
            "tokens_per_s_per_gpu": tps_gpu,
            "model_tflop_s_per_gpu": model_tflop_s,
            "mfu": model_tflop_s * 1e12 / c["peak_flops_per_s"],
            "mfu_full_attn": c["model_flops_per_token_full_attn"] * tps_gpu / c["peak_flops_per_s"],
            "time_to_train_ideal_days": train_s / SECONDS_PER_DAY,
            "gpu_hours": c["n_gpus"] * train_s / 3600.0,
            "feasible": feasible,
        }
