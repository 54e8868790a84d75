"""Inference engines: what each does, fixed from its documentation, and the serving model's fitted factors.

A serving row names its ``engine`` as a training row names its ``stack``. What an engine does is read from
its documentation and code (:data:`ENGINE_TRAITS`); how fast its steps run beside the roofline is fitted
(:class:`ServingCalibration`, ``python -m objectives.serving.fit``, stored in ``serving_calibration.json``).

- ``trtllm``: TensorRT-LLM 1.0, PyTorch backend, as ``trtllm-bench throughput`` runs it (TensorRT-LLM
  docs/source/performance/perf-overview.md, v1.0): in-flight batching of context (prefill) and generation
  requests in one step, chunked context; CUDA graphs for generation-only steps (``cuda_graph_config``,
  batch sizes to 8,192 with padding); the overlap scheduler on by default (the host prepares step n+1 while
  the GPU runs step n: PyTorch backend ``disable_overlap_scheduler`` False); the KV cache takes
  ``kv_cache_free_gpu_mem_fraction`` 0.90 of the memory left after weights and activations (0.95 in the
  published runs); the capacity scheduler GUARANTEED_NO_EVICT reserves ISL + OSL tokens per request;
  ``max_batch_size`` and ``max_num_tokens`` as trtllm-bench sets them (tensorrt_llm/bench/build/tuning.py
  ``finetune_setting``: the batch is what the KV cache holds, at most 4,096 / pp; the token budget
  batch x (1 + ISL/OSL), between 2,048 and 32,768).
- ``trtllm-2024``: TensorRT-LLM 0.14-0.18 with TensorRT engines (C++ executor, ``trtllm-bench build`` then
  ``throughput``; perf-overview.md at v0.17): the same in-flight batching, budget and KV policy, no CUDA
  graphs (the engine's kernels are enqueued from C++) and no overlap scheduler.
- ``vllm``: vLLM V1 (vllm/engine/arg_utils.py ``get_batch_defaults``, ``_set_default_args_v1``; docs
  configuration/optimization.md): chunked prefill always on, ``max_num_batched_tokens`` 8,192 and
  ``max_num_seqs`` 1,024 on GPUs of 70 GiB or more (2,048 and 256 below), ``gpu_memory_utilization`` 0.90
  of the whole HBM for weights, activations and KV; FULL_AND_PIECEWISE CUDA graphs (-O2, the default)
  cover every step; KV pages allocated on demand (preempting when full), so a request holds ISL + OSL/2
  tokens on average; asynchronous scheduling off by default.
- ``sglang``: SGLang (python/sglang/srt/server_args.py): ``chunked_prefill_size`` 8,192 below 160 GB of
  HBM, 16,384 above; ``mem_fraction_static`` about 0.88 of the HBM for weights and KV; CUDA graphs for
  decode batches up to ``cuda_graph_max_bs`` (256 at tp < 4, 512 above, on H100/H200-class GPUs; 512 on
  B200); the overlap scheduler on by default; the KV pool allocated on demand (requests retracted when
  full).

The fitted factors (bounded, few; docs/serving.md says what each stands for and where it sits):
``hbm_eff`` (HBM bandwidth reached streaming weights and KV), ``gemm_eff_scale`` by precision (the
engines' GEMMs and attention against the GPU's measured large-GEMM and flash-attention efficiency),
``gemm_rows_half`` (rows at which a GEMM runs at half rate), ``expert_gemm_scale`` (grouped expert GEMMs
against dense ones),
``allreduce_latency_s`` (one small tensor-parallel all-reduce), per engine ``host_step_s`` and
``host_request_s`` (host time per step, and per request in it: scheduling, sampling, output processing),
and ``host_grace_scale`` (that host time on a Grace host over an x86 one), and ``expert_load_cv`` (the spread of
one expert's routed load, which sets the busiest expert-parallel GPU's load, at most the measured 2.55x;
objectives/serving/balance.py).
No published run measures vLLM or SGLang (objectives/catalog/serving_runs.md): their host factors keep the
priors below, and what they share with TensorRT-LLM (the GPU's rates) is TensorRT-LLM's fit.

Where each engine runs (:data:`ENGINE_VENDORS`): TensorRT-LLM on NVIDIA GPUs only, vLLM and SGLang on NVIDIA
and AMD GPUs. A GPU's vendor is the first word of its catalog name (:func:`gpu_vendors`); a row pairing an
engine with a GPU it does not run on is infeasible (``con_engine_vendor``, objectives/serving/reasons.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from objectives.calibration import Calibration
from objectives.table import CATEGORIES, factorize, is_constant

__all__ = ["ENGINES", "EngineTraits", "ENGINE_TRAITS", "engine_trait", "ServingCalibration", "SERVING_CALIBRATION_PATH",
           "SERVING_FITTED", "LAUNCH_S_PER_LAYER", "VENDORS", "ENGINE_VENDORS", "gpu_vendors", "engines_for",
           "vendor_codes", "engine_runs", "engine_gpu_text"]

ENGINES = CATEGORIES["engine"]
SERVING_CALIBRATION_PATH = Path(__file__).resolve().parent.parent / "serving_calibration.json"
#: host time to launch one decoder layer's kernels where no CUDA graph is replayed: about 12 kernels
#: (norms, QKV, rotary, attention, output, residual, gate/up, activation, down; quantization where fp8)
#: at 3-5 us of launch each (CUDA runtime launch latency; NVIDIA CUDA graphs blog, "Getting Started with
#: CUDA Graphs": a kernel launch costs a few microseconds of CPU time). A step runs no faster than its launches.
LAUNCH_S_PER_LAYER = 12 * 4e-6


class EngineTraits(NamedTuple):
    graphs: int  # CUDA graphs: 0 none, 1 decode-only steps, 2 every step (piecewise capture)
    graph_max_batch: float  # largest decode batch with a captured graph (per attention data-parallel rank)
    overlap: bool  # the host prepares the next step while the GPU runs this one
    kv_free_frac: float  # share of memory given to the KV cache (see kv_of_total)
    kv_of_total: bool  # True: the share is of the whole HBM, weights and activations inside it (vLLM, SGLang);
    #                    False: of the memory left after weights and activations (TensorRT-LLM)
    reserve_full: bool  # True: a request reserves ISL + OSL tokens (no eviction); False: pages on demand
    max_batch: float  # most requests in flight per attention data-parallel rank
    token_budget: float  # tokens one step may process (0: trtllm-bench's batch x (1 + ISL/OSL) in [2,048, 32,768])
    token_budget_big: float  # the same on GPUs of 160 GB and more (SGLang's larger chunk)


#: engine -> what it does (module doc for the sources); indexed by the engine's code
ENGINE_TRAITS: dict[str, EngineTraits] = {
    "trtllm": EngineTraits(1, 8192.0, True, 0.90, False, True, 4096.0, 0.0, 0.0),
    "vllm": EngineTraits(2, 1024.0, False, 0.90, True, False, 1024.0, 8192.0, 8192.0),
    "sglang": EngineTraits(1, 512.0, True, 0.88, True, False, 4096.0, 8192.0, 16384.0),
    "trtllm-2024": EngineTraits(0, 0.0, False, 0.90, False, True, 4096.0, 0.0, 0.0),
}
assert tuple(ENGINE_TRAITS) == ENGINES


#: GPU vendors, by code (``gpu_vendor``, objectives/serving/prepare.py)
VENDORS = ("NVIDIA", "AMD")
#: engine -> the GPU vendors it runs on:
#: - TensorRT-LLM (``trtllm``, ``trtllm-2024``): "optimizations to perform inference efficiently on NVIDIA
#:   GPUs" (its README; docs.nvidia.com/TensorRT-LLM overview), built on CUDA and TensorRT: NVIDIA only;
#: - vLLM: "NVIDIA CUDA, AMD ROCm" (docs getting_started/installation/gpu.md: "vLLM supports AMD GPUs with
#:   ROCm 6.3 or above", MI300 gfx942, MI350 gfx950);
#: - SGLang: NVIDIA GPUs and "AMD GPUs" (docs platforms/amd_gpu.md, run on MI300X with ROCm).
ENGINE_VENDORS: dict[str, tuple[str, ...]] = {
    "trtllm": ("NVIDIA",),
    "vllm": ("NVIDIA", "AMD"),
    "sglang": ("NVIDIA", "AMD"),
    "trtllm-2024": ("NVIDIA",),
}
assert tuple(ENGINE_VENDORS) == ENGINES
#: 1 where the engine (row, by code) runs on the vendor (column, by code)
_RUNS = np.array([[float(v in ENGINE_VENDORS[e]) for v in VENDORS] for e in ENGINES])
_GPUS_YAML = Path(__file__).resolve().parent.parent / "catalog" / "gpus.yaml"


@functools.cache
def gpu_vendors() -> dict[str, str]:
    """Catalog GPU id -> its vendor: the first word of its gpus.yaml ``name`` ("NVIDIA B200 (HGX/DGX B200,
    1000 W)": NVIDIA; "AMD Instinct MI300X (OAM, 750 W)": AMD)."""
    raw = yaml.load(_GPUS_YAML.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["gpus"]
    return {gid: str(spec.get("name", "")).split(" ", 1)[0] for gid, spec in raw.items()}


def engines_for(gpu: str) -> tuple[str, ...]:
    """The engines that run on catalog GPU ``gpu`` (every engine for a GPU the catalog does not know)."""
    vendor = gpu_vendors().get(gpu)
    return tuple(e for e in ENGINES if vendor is None or vendor in ENGINE_VENDORS[e])


def engine_gpu_text(engine: str, gpu: str) -> str:
    """'engine trtllm does not run on mi300x (an AMD GPU); engines for mi300x: vllm, sglang'."""
    vendor = gpu_vendors().get(gpu, "")
    article = "an" if vendor[:1] in ("A", "E", "I", "O", "U") else "a"
    return (f"engine {engine} does not run on {gpu} ({article} {vendor} GPU); engines for {gpu}: "
            f"{', '.join(engines_for(gpu)) or 'none'}")


def vendor_codes(gpu: np.ndarray) -> np.ndarray:
    """Each row's GPU vendor code (:data:`VENDORS`) from a column of catalog GPU ids, NaN where a cell names
    none (blank: the row spells its GPU out) or a vendor outside VENDORS; by distinct label, a constant
    column staying one value."""
    if is_constant(gpu):
        return np.broadcast_to(vendor_codes(np.asarray(gpu[:1]))[0], gpu.shape)
    codes, distinct = factorize(np.asarray(gpu))
    known = {v: float(i) for i, v in enumerate(VENDORS)}
    lut = np.array([known.get(gpu_vendors().get(str(g), ""), np.nan) for g in distinct] + [np.nan])
    return lut.take(codes)  # code -1 (a blank cell) takes the last entry


def engine_runs(engine: np.ndarray, vendor: np.ndarray) -> np.ndarray:
    """1.0 where the engine (code) runs on the GPU's vendor (code; NaN: unknown, taken to run), else 0.0."""
    known = ~np.isnan(vendor)
    at = np.where(known, vendor, 0.0).astype(np.intp)
    return np.where(known, _RUNS[np.asarray(engine, dtype=np.intp), at], 1.0)


def engine_trait(name: str) -> np.ndarray:
    """One trait of every engine as an array indexed by the engine's code."""
    return np.array([float(getattr(ENGINE_TRAITS[e], name)) for e in ENGINES], dtype=np.float64)


SERVING_FITTED = ("hbm_eff", "gemm_eff_scale", "gemm_rows_half", "expert_load_cv", "expert_gemm_scale", "allreduce_latency_s",
                  "host_step_s",
                  "host_request_s", "host_grace_scale")


@dataclasses.dataclass(frozen=True)
class ServingCalibration:
    """The serving model's factors: fitted (:data:`SERVING_FITTED`, defaults are the documented priors) and
    the training calibration's fixed network and memory constants (``base``)."""

    #: HBM efficiency streaming weights and KV: aiconfigurator's ``mem_bw_empirical_scaling_factor`` 0.8
    #: (systems/*.yaml) is the prior; vidur measured 0.80-0.92 on H100 large weights (inference-measurements.md 2.4)
    hbm_eff: float = 0.80
    #: GEMM and attention rate against the catalog's measured large-GEMM / flash-attention efficiency, by
    #: precision code (bf16, fp8, fp4)
    gemm_eff_scale: tuple[float, ...] = (1.0, 1.0, 1.0)
    #: rows at which a GEMM runs at half its large-GEMM rate (few rows fill few output tiles and waves; the
    #: training model's ``gemm_n_half`` is the same idea, objectives/calibration.py)
    gemm_rows_half: float = 64.0
    #: coefficient of variation of one routed expert's load (objectives/serving/balance.py: the busiest of ep GPUs
    #: holding E / ep experts each carries 1 + cv M(ep) / sqrt(E / ep) of the mean, M(ep) the expected largest of
    #: ep standard normals, at most IMBALANCE_MAX). Prior 1.28, measured: DeepSeek-R1 without EPLB, std 164.1 over
    #: a mean of 128 routed tokens per expert slot (TensorRT-LLM tech blog 4, "Scaling Expert Parallelism",
    #: Table 1, EP 32). Its box ends at 2.14, the spread at which the form gives that table's hottest rank
    #: (2.564x the mean, 8 experts a GPU at EP 32)
    expert_load_cv: float = 1.28
    #: routed experts' grouped GEMMs against dense GEMMs at the same precision (one GEMM per expert with
    #: its own rows, a tail of small ones; CUTLASS grouped GEMM in TensorRT-LLM's fused MoE)
    expert_gemm_scale: float = 1.0
    #: latency of one small all-reduce (custom one-shot NVLink kernels of TensorRT-LLM and vLLM; aiconfigurator
    #: p2p_latency 10 us; vidur measured 20-40 us for NCCL without CUDA graphs)
    allreduce_latency_s: float = 10e-6
    #: host time per step, by engine code (trtllm, vllm, sglang, trtllm-2024)
    host_step_s: tuple[float, ...] = (2e-3, 4e-3, 2e-3, 2e-3)
    #: host time per request in the step, by engine code (Python scheduling, sampling and output handling
    #: per request; the C++ executor of trtllm-2024 far less)
    host_request_s: tuple[float, ...] = (20e-6, 20e-6, 20e-6, 2e-6)
    #: host time on a Grace host (gpus.yaml ``host_grace``: GB200, GB300) over an x86 Xeon's, every engine:
    #: the prior 1 (no difference); at most 2.75, PyTorch's measured CPU time per module on GB200 against an
    #: H100 DGX's Xeon 8480C (TransformerEngine issue #2053)
    host_grace_scale: float = 1.0
    base: Calibration = dataclasses.field(default_factory=Calibration.load, compare=False)

    def replace(self, **changes) -> ServingCalibration:
        return dataclasses.replace(self, **changes)

    def fitted(self) -> dict:
        return {k: getattr(self, k) for k in SERVING_FITTED}

    @classmethod
    def load(cls, path: Path = SERVING_CALIBRATION_PATH) -> ServingCalibration:
        """The fitted factors (cached); the priors above where no fit has been written."""
        key = str(path)
        if key not in _CACHE:
            fitted = json.loads(path.read_text())["fitted"] if path.exists() else {}
            _CACHE[key] = cls(**{k: (tuple(v) if isinstance(v, list) else float(v)) for k, v in fitted.items()
                                 if k in SERVING_FITTED})
        return _CACHE[key]


_CACHE: dict[str, ServingCalibration] = {}
