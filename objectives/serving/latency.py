"""A latency-tuned deployment (``latency_tuned`` 1): the engine as its min-latency guides configure it.

The fitted host time of TensorRT-LLM (``host_step_s`` ~10 ms, objectives/serving/engines.py) comes from
offline throughput benchmarks (trtllm-bench at hundreds of requests a step), and charged on every step it
caps a plain decode near 97 tokens/s per user whatever the GPU. The published min-latency deployments run a
different engine configuration (TensorRT-LLM tech blog 1, "Pushing Latency Boundaries", DeepSeek-R1 on 8
B200, section "CUDA Graph & Programmatic Dependent Launch"; tech blog 6 / NVIDIA's "Blackwell Breaks the
1,000 TPS/User Barrier" for Llama 4 Maverick: CUDA graphs with a ``cuda_graph_config`` max batch of 8, PDL,
AllReduce fused with RMSNorm, the overlap scheduler):

- every decode step is replayed from a CUDA graph and the host's executor work overlaps the GPU
  (``LATENCY_HOST_STEP_S``, beside the device as the overlap scheduler runs it);
- each kernel still costs its launch gap on the GPU, even inside a graph: ``LATENCY_KERNEL_S`` per
  kernel, ``kernels_per_layer`` kernels a layer (below), added to the layer's roofline (bytes through HBM,
  FLOPs) because at batch 1 the kernels are too small to hide it;
- the routed experts' fixed row cost (``gemm_rows_half``) is the touched experts' only (a grouped GEMM runs
  tiles only for experts with rows; objectives/serving/step.py ``_layers``): DeepSeek-R1 at batch 1 touches
  8 of 256 experts a layer;
- tensor-parallel all-reduces are TensorRT-LLM's one-shot NVLink kernel fused with the RMSNorm
  (blog 1 Modules 9 and 13, "Fuse oneshotAR + RMSNorm"): ``LATENCY_ALLREDUCE_S`` each instead of the
  offline fit's ``allreduce_latency_s``, in a tensor-parallel group of at most ``ONE_SHOT_MAX_RANKS``
  (TensorRT-LLM's custom all-reduce kernels, ``customAllReduceKernels.h`` ``MAX_RANKS_PER_NODE = 16``; a
  wider group runs NCCL's, the offline latency).

So a latency-tuned decode step at batch b <= ``LATENCY_GRAPH_MAX_BATCH`` (per attention group) is

    step = roofline(weights + KV bytes / (HBM x hbm_eff), FLOPs) + collectives(LATENCY_ALLREDUCE_S)
           + n_kernels x LATENCY_KERNEL_S,          beside LATENCY_HOST_STEP_S on the host

and above that batch, and in a step with a prefill chunk, the engine's offline step (the fitted host
time): the min-latency configuration captures graphs only up to its max batch (the Maverick guide's
``cuda_graph_config: max_batch_size: 8``; blog 1 runs batch 1), so a latency-tuned row gains nothing at
large batch; the optimizer does not get it for free. No source gives its throughput cost at large batch
beyond that, so none other is modelled.

The numbers (each with its source; none is fitted, none read from the speculative validation rows):

- ``LATENCY_KERNEL_S`` 3.4 us: NVIDIA developer blog "Getting Started with CUDA Graphs" (A. Gray, 2019):
  short kernels launched back to back from a graph take 3.4 us each (2.9 us of execution; 3.8 us launched
  one by one on a stream): a kernel's floor on the GPU inside a graph.
- ``kernels_per_layer``: 9 for a dense GQA layer with TensorRT-LLM's fusions (RMSNorm fused into the
  all-reduce; QKV GEMM, RoPE + KV write, attention, O GEMM, all-reduce + RMSNorm, gate/up GEMM, SwiGLU +
  quantize, down GEMM, all-reduce + RMSNorm), +6 for a routed MoE layer (router GEMM, top-k, permute,
  two grouped GEMMs, finalize; blog 1 Modules 10-12, the shared expert on a second stream), +4 for MLA
  (blog 1 Modules 1-8: Fuse_A GEMM, two RMSNorms, UQ_QR GEMM, UK BMM, UV BMM over GQA's QKV and O): 19 a
  DeepSeek-R1 MoE layer, blog 1's diagram of 13 modules with the sparse experts' 4 kernels and the
  router's 2.
- ``LATENCY_ALLREDUCE_S`` 10 us: aiconfigurator's ``p2p_latency`` for NVLink (its systems/*.yaml, the
  serving calibration's documented prior of ``allreduce_latency_s``), a one-shot all-reduce of a few KB.
- ``LATENCY_HOST_STEP_S`` 1 ms: the overlap scheduler prepares step n+1 while the GPU runs step n and the
  graph replay is one launch, so the host binds only if its work passes the device step; 1 ms is the
  bound the Llama 4 Maverick record leaves (over 1,000 tokens/s per user with EAGLE-3 at 2.8 accepted
  tokens a step: a whole step, draft included, within 2.8 ms), used as a bound only.
- ``LATENCY_GRAPH_MAX_BATCH`` 8: the Maverick guide's ``cuda_graph_config: max_batch_size: 8`` (tech blog 6).

A check against a published point outside the validation (blog 1's "Key Optimizations" table, no MTP,
EP8TP8 with CUDA graphs, before PDL and the fused all-reduce: 89 TPS/user, 11.2 ms a step) is in
docs/serving.md.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LATENCY_KERNEL_S", "LATENCY_ALLREDUCE_S", "LATENCY_HOST_STEP_S", "LATENCY_GRAPH_MAX_BATCH",
           "ONE_SHOT_MAX_RANKS", "kernels_per_layer", "latency_design"]

LATENCY_KERNEL_S = 3.4e-6
LATENCY_ALLREDUCE_S = 10e-6
LATENCY_HOST_STEP_S = 1e-3
LATENCY_GRAPH_MAX_BATCH = 8.0
#: the widest tensor-parallel group TensorRT-LLM's one-shot all-reduce kernels serve (module doc)
ONE_SHOT_MAX_RANKS = 16.0
#: kernels of a dense GQA layer, and more for a routed MoE layer and for MLA (module doc)
KERNELS_DENSE, KERNELS_MOE, KERNELS_MLA = 9.0, 6.0, 4.0


def kernels_per_layer(moe, mla):
    """Kernels one decoder layer launches in a latency-tuned decode step (module doc)."""
    return KERNELS_DENSE + KERNELS_MOE * moe + KERNELS_MLA * mla


def latency_design(c, layers, moe_layers, n_collectives, allreduce_latency_s, comm0, draft_layers=0.0):
    """(the step's collectives at 0 bytes, its kernels' floor) of a latency-tuned decode step over the stage:
    ``comm0`` with each of ``n_collectives`` latencies at LATENCY_ALLREDUCE_S instead of the offline
    ``allreduce_latency_s`` (in a tensor-parallel group of at most ONE_SHOT_MAX_RANKS), and the stage's
    kernels x LATENCY_KERNEL_S."""
    mla = c["kv_lora_rank"] > 0
    kernels = layers * kernels_per_layer(0.0, mla) + moe_layers * KERNELS_MOE
    one_shot = c["tp"] <= ONE_SHOT_MAX_RANKS
    comm = comm0 + n_collectives * np.where(one_shot, LATENCY_ALLREDUCE_S - allreduce_latency_s, 0.0)
    return np.maximum(comm, 0.0), kernels * LATENCY_KERNEL_S


def latency_step(step, gpu, device, host, dec_group, mixed: bool):
    """(device, host seconds, where tuned: overlapped) of a step of StepModel ``step``: where its row is
    latency-tuned and the step decode-only at a batch of at most LATENCY_GRAPH_MAX_BATCH per attention group:
    the GPU's roofline ``gpu`` with the collectives' latencies and the kernels' floor of a latency-tuned step
    (a speculative step's k draft layers too), graphed, beside LATENCY_HOST_STEP_S; the offline step else."""
    if mixed or not np.any(step.latency_tuned > 0):
        return device, host, False
    tuned = (step.latency_tuned > 0) & (dec_group <= LATENCY_GRAPH_MAX_BATCH) & (dec_group > 0)
    layers = 1.0 + (step.draft * step.draft_layers / step.stage_layers if step.spec else 0.0)
    fast = gpu + layers * (step.lat_comm0 - step.comm0 + step.lat_floor)
    return np.where(tuned, fast, device), np.where(tuned, np.minimum(LATENCY_HOST_STEP_S, host), host), tuned
