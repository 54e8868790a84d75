"""The model's few efficiency factors: physical, documented, fitted once and reproducibly.

Software stacks differ in kernels and overlap as much as GPUs differ in silicon, so a design row names
its ``stack`` (default ``megatron-core``). What each stack does is fixed from its documentation
(:data:`TRAITS`); how fast its kernels run relative to the roofline is fitted.

Fitted (``python -m objectives.fitting.fit`` against ``catalog/training_runs.csv``, result in ``calibration.json``):

- ``attn_seq_half``: sequence length at which flash attention runs at half its long-sequence rate (its
  plateau is the GPU catalog's measured ``gpu_attn_eff_fa2`` / ``_fa3``); short sequences give each
  thread block little work (Shah et al. 2024, Fig. 5: 497 -> 617 TFLOP/s from 512 to 2k tokens).
- ``kernel_overhead_s[stack]``: fixed time per transformer layer per micro-batch per forward pass (kernel
  launch, synchronisation, small ops the roofline does not see); the backward costs twice this.
- ``attn_kernel_scale[stack]``: the stack's attention kernels relative to the benchmarked kernel of their
  class (its version, head-dimension and masking paths, the work around the kernel: rotary, layouts); for
  unfused attention, its batched QK^T and AV GEMMs (inner width d_head, their scores through HBM counted
  apart) relative to the large-GEMM rate.
- ``moe_expert_overhead_s``: fixed time per *local* expert (``moe_experts / ep`` on a GPU) per MoE layer per
  micro-batch per pass: the grouped expert MLP issues one GEMM, and in fp8 one input cast, per local expert
  (Transformer Engine ``GroupedLinear``, whose grouped GEMM loops over the experts' GEMMs on the host), so the
  launch cost grows with the experts a GPU holds, and falls as expert parallelism spreads them (Megatron-Core
  MoE docs: ``--moe-grouped-gemm``).
- ``tp_comm_exposed``: fraction of tensor-parallel communication not hidden behind GEMMs by Megatron-Core's
  TP-comm overlap (stacks without it expose all of it).
- ``gemm_n_half``: GEMM width at which a GEMM runs at half its large-GEMM rate; small GEMMs fill fewer
  tiles and waves: rate x d / (d + gemm_n_half), once for the narrowest width of the weight (small d_model,
  many-way tp, small experts) and once for its rows (the micro-batch's tokens; for an expert, the tokens
  routed to it).

Factors the fit drives to a bound of their box (``objectives/fitting/fit.py`` BOX), and why the box stays:

- ``kernel_overhead_s`` of ``megatron-core`` at the upper bound, 3e-4 s per layer pass (373 us with the box
  opened to 3e-3, Megatron-Bridge 11.1% there against 11.3%; at 1e-6 it is 12.3%, attn_kernel_scale taking
  it, 0.62 -> 0.52). About 20 kernels a layer forward at a few microseconds of launch each is 50-100 us when
  nothing hides them, and launches are hidden behind these runs' millisecond layers, so 300 us is not launch
  cost: the rows whose recipes replay full-iteration CUDA graphs (Llama 3 8B, 25.11) fit no better with it
  removed on them (Megatron-Bridge 11.3% -> 11.2%, their mean error 5.5% either way), and neither HBM bytes
  per token (fitted to 0) nor per weight (Megatron-Bridge 11.9%) nor a share of the GEMM time (12.4%) takes
  its place (docs/validation.md). It stands for per-layer work the roofline does not see, unidentified; the
  box is not widened, so that this stand-in stays bounded; it marks where the model is thinnest.
- ``kernel_overhead_s`` of ``pytorch-fsdp`` inside its box since FSDP's gradient path is a term
  (objectives/training/fsdp_grads.py, 18 B per weight per micro-batch): with the box opened to 3e-3 it went to
  539 us before, 300 us now, and the fit gives 2.9e-4 s (PyTorch eager dispatch and FSDP's per-layer hooks);
  MosaicML H100 bf16 4.8% -> 3.2%.
- ``kernel_overhead_s`` of ``megatron-2021`` at (within 1e-6 s of) the lower bound, 1e-6 s: launches are asynchronous and the
  2021 runs' layers (GPT-3 class, h >= 1,536, micro-batches of 2,048 tokens) have kernels long enough to
  hide them all; a physical zero.
- A fixed cost per MoE layer (router top-k, the token-count synchronisation of dropless routing) fitted to
  zero beside the per-expert term, on the one source of current-stack MoE runs; it was dropped, so the
  per-expert term carries all of the MoE launch cost.

Fixed, from measurements in the hardware catalog (not fitted):

- ``scaleup_eff`` 0.8: NCCL ring bus bandwidth / NVLink unidirectional line rate, H100 8-GPU all-reduce
  without NVLS ~365 of 450 GB/s (hardware-catalog S25).
- ``scaleout_eff`` 0.93: 46-48 of 50 GB/s per 400G NIC in nccl-tests (hardware-catalog S25).
- ``scaleup_latency_s`` 3e-6 and ``scaleout_latency_s`` 10e-6: NCCL base + per-hop latency, Simple
  protocol (NCCL tuning.cc via nccl#1334, hardware-catalog S28).
- ``hbm_reserved_gb`` 2 and ``hbm_usable_frac`` 0.95: CUDA context, NCCL buffers and allocator
  fragmentation that a training process cannot use (of the HBM's binary capacity: an "80 GB" H100 has
  85.9e9 bytes, 81,559 MiB of which CUDA reports).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import NamedTuple

__all__ = ["Calibration", "CALIBRATION_PATH", "FITTED", "BOUNDS", "REMOVED_FACTORS", "STACKS", "TRAITS", "StackTraits", "trait"]

CALIBRATION_PATH = Path(__file__).with_name("calibration.json")

#: software stacks a design can run on; the code of each is its index
STACKS = ("megatron-core", "megatron-core-2024", "megatron-2021", "pytorch-fsdp")


class StackTraits(NamedTuple):
    attention_kernel: int  # 0 unfused (scores in HBM), 1 FlashAttention-2 class, 2 architecture-tuned (FA3 / cuDNN)
    dp_overlap: bool  # gradient reduce-scatter / weight all-gather overlapped with compute
    tp_overlap: bool  # tensor-parallel collectives overlapped with GEMMs
    ep_overlap: bool  # expert-parallel all-to-all overlapped with compute
    tp_async_dgrad: bool  # column-parallel backward: input-gradient AR/RS (and SP re-gather) behind their GEMMs
    grad_bytes: float  # bytes per gradient, as accumulated and reduce-scattered: 4 in fp32, 2 in 16 bits
    optimizer_bytes: float  # bytes per parameter of optimizer state: fp32 master weights and Adam moments (12),
    #                        plus an fp32 copy of 16-bit gradients where the optimizer makes one (16)
    fp32_shards: bool  # only the fp32 master shard persists; the 16-bit weights are gathered from it, cast, every
    #                    micro-batch (PyTorch FSDP mixed precision; SHARD_GRAD_OP reshards after each backward)
    pp_overlap: bool  # interleaved schedules send and receive behind the next model chunk's compute
    #                   (overlap_p2p_comm); without interleaving the sends stay on the critical path
    low_precision_params: bool = False  # fp8 / fp4 runs keep their weights in that precision and gather them
    #                                     so (fp8_param_gather, fp4_param_gather; objectives.training.quantization)


#: what each stack does, from its documentation. Pipeline sends of interleaved schedules overlap with compute
#: on Megatron-Core stacks: Megatron-Bridge's CommOverlapConfig (and NeMo 2.0's comm-overlap callback before it)
#: sets overlap_p2p_comm = True, batch_p2p_comm = False when vp > 1, and the reverse without interleaving
#: (megatron/training/arguments.py: "Overlap P2P communication is disabled if not using the interleaved schedule")
TRAITS: dict[str, StackTraits] = {
    # Megatron-Core / Megatron-Bridge, 2025+: cuDNN fused attention (TransformerEngine), MoE all-to-all
    # overlap (--overlap-moe-expert-parallel-comm), --overlap-grad-reduce and
    # --overlap-param-gather, --tp-comm-overlap (Megatron-Core and NeMo performance-tuning docs); the
    # column-parallel backward asynchronous (LinearWithGradAccumulationAndAsyncCommunication in
    # megatron/core/tensor_parallel/layers.py; TE's bulk userbuffer overlap under --tp-comm-overlap).
    # As Megatron-Bridge benchmarks it (perf_recipes/_common.py _benchmark_common and _perf_precision, commit
    # 067f987d): gradients accumulated and reduce-scattered in bf16 (ddp.grad_reduce_in_fp32 = False; its
    # performance guide: "validated numerically safe"), so the distributed optimizer adds an fp32 copy of its
    # gradient shard to the fp32 master weights and Adam moments (Megatron-Core distributed optimizer docs,
    # 16-bit parameters and gradients: 4 + 16/d bytes); fp8 and fp4 weights kept and gathered in that
    # precision (training/mixed_precision.py: fp8_param_gather for delayed, current and MX scaling,
    # fp4_param_gather for NVFP4)
    "megatron-core": StackTraits(2, True, True, True, True, 2.0, 16.0, False, True, True),
    # the same in 2024 (Megatron-Core r0.8, NeMo 24.x): TransformerEngine then preferred the flash-attn 2
    # backend over cuDNN fused attention on Hopper (TE attention backend selection, NVTE_FLASH_ATTN); NeMo 24.x
    # ran Apex's DistributedFusedAdam with a 16-bit gradient buffer synchronized in bf16 (NeMo-Framework-Launcher
    # H100 fp8 recipes: optim.grad_sync_dtype=bf16), 4 + 12/d bytes (Megatron-LM r0.8 alone would keep fp32)
    "megatron-core-2024": StackTraits(1, True, True, False, True, 2.0, 12.0, False, True),
    # Megatron-LM as in Narayanan et al. SC'21: fused scale-mask-softmax over materialized scores, gradient
    # all-reduce after the backward pass, no TP overlap (Sec. 4.2 and the 2021 code); fp16 models all-reduce
    # fp16 gradients and the fp16 optimizer holds fp32 copies (distributed optimizer docs: 20, 4 + 16/d bytes).
    # The asynchronous input-gradient all-reduce landed after the paper's runs (Megatron-LM commit cf7efd4,
    # 30 Aug 2021, made the default by 3f65246, 2 Sep 2021: --no-async-tensor-model-parallel-allreduce)
    "megatron-2021": StackTraits(0, False, False, False, False, 2.0, 16.0, False, False),
    # PyTorch FSDP as in MosaicML llm-foundry (2023): FlashAttention-2 / Triton attention, FSDP prefetch; no TP;
    # Composer's FSDP mixed_precision DEFAULT gathers bf16 weights and reduces fp32 gradients
    # (composer get_mixed_precision: param_dtype bf16, reduce_dtype fp32); the sharded flat parameter is the
    # fp32 master copy, cast when gathered (PyTorch FSDP MixedPrecision docs)
    "pytorch-fsdp": StackTraits(1, True, False, False, False, 4.0, 12.0, True, False),
}

def trait(name: str):
    """One trait of every stack as a numpy array indexed by the stack code."""
    import numpy as np

    return np.array([getattr(TRAITS[s], name) for s in STACKS], dtype=np.float64)


#: the fitted factors that have one value per stack
PER_STACK = ("attn_kernel_scale", "kernel_overhead_s")
FITTED = ("attn_seq_half", "attn_kernel_scale", "kernel_overhead_s", "moe_expert_overhead_s", "tp_comm_exposed",
          "gemm_n_half")
#: the physical box of each fitted factor, (lower, upper): the fit searches inside it (objectives.fitting.fit.BOX) and a
#: calibration file's value outside it is refused unless the file says ``"allow_outside_bounds": true``
BOUNDS = {
    "kernel_overhead_s": (1e-6, 3e-4), "attn_kernel_scale": (0.3, 1.5), "attn_seq_half": (16.0, 16384.0),
    "tp_comm_exposed": (0.05, 1.0), "moe_expert_overhead_s": (1e-7, 1e-3), "gemm_n_half": (1.0, 2048.0),
}
#: factors no longer fitted -> why (a calibration file that sets one is told so)
REMOVED_FACTORS = {
    "ep_comm_exposed": "is no longer a factor: the exposed expert all-to-all is derived from the EP A2A overlap "
                       "schedule (objectives/training/communication.py ep_exposed_s); remove it from the file",
}


@dataclasses.dataclass(frozen=True)
class Calibration:
    attn_seq_half: float = 200.0
    attn_kernel_scale: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
    moe_expert_overhead_s: float = 10e-6
    kernel_overhead_s: tuple[float, ...] = (40e-6, 40e-6, 40e-6, 100e-6)
    tp_comm_exposed: float = 0.5
    gemm_n_half: float = 128.0
    scaleup_eff: float = 0.80
    scaleout_eff: float = 0.93
    scaleup_latency_s: float = 3e-6
    scaleout_latency_s: float = 10e-6
    hbm_reserved_gb: float = 2.0
    hbm_usable_frac: float = 0.95
    #: the prediction intervals' parameters for designs under this calibration (objectives.training.intervals; a
    #: calibration file of ``dse calibrate`` carries its own); None: the shipped catalog/intervals.json
    interval_params: dict | None = dataclasses.field(default=None, compare=False, repr=False)

    def replace(self, **changes) -> Calibration:
        return dataclasses.replace(self, **changes)

    def fitted(self) -> dict:
        return {k: getattr(self, k) for k in FITTED}

    @classmethod
    def load(cls, path: Path = CALIBRATION_PATH) -> Calibration:
        """The fitted constants (cached); the defaults above where no fit has been written."""
        key = str(path)
        if key not in _CACHE:
            fitted = json.loads(path.read_text())["fitted"] if path.exists() else {}
            _CACHE[key] = cls(**{k: (tuple(v) if isinstance(v, list) else float(v)) for k, v in fitted.items() if k in FITTED})
        return _CACHE[key]


    @classmethod
    def read(cls, path) -> Calibration:
        """A calibration file (``dse calibrate``'s, or one written by hand): its ``fitted`` factors, the
        shipped value for a factor it leaves out, and its ``intervals`` if it has them. A file that is not
        one is an InputError of one line naming the file and the key."""
        from objectives.table import InputError  # (objectives.table imports this module)

        where = str(path)
        try:
            record = json.loads(Path(path).read_text())
        except OSError as exc:
            raise InputError(f"{where}: cannot read the calibration file ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise InputError(f"{where}: not a calibration file: not valid JSON ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("fitted"), dict):
            raise InputError(f"{where}: not a calibration file: no 'fitted' object of factors "
                             f"(valid factors: {', '.join(FITTED)})")
        values = {}
        for key, value in record["fitted"].items():
            if key in REMOVED_FACTORS:
                raise InputError(f"{where}: key 'fitted.{key}' {REMOVED_FACTORS[key]}")
            if key not in FITTED:
                raise InputError(f"{where}: key 'fitted.{key}' is not a factor; valid: {', '.join(FITTED)}")
            per_stack = key in PER_STACK
            items = value if per_stack and isinstance(value, list) else [value]
            if per_stack and (not isinstance(value, list) or len(value) != len(STACKS)):
                raise InputError(f"{where}: key 'fitted.{key}' must be a list of {len(STACKS)} positive numbers, one "
                                 f"per stack ({', '.join(STACKS)})")
            low, high = BOUNDS[key]
            for v in items:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                    raise InputError(f"{where}: key 'fitted.{key}' must be a positive number, not {json.dumps(v)[:60]}")
                if not low <= v <= high and record.get("allow_outside_bounds") is not True:
                    raise InputError(f"{where}: key 'fitted.{key}' is {v:g}, outside the fit's box [{low:g}, {high:g}] "
                                     "(set \"allow_outside_bounds\": true in the file to use it anyway)")
            values[key] = tuple(float(v) for v in items) if per_stack else float(value)
        intervals = record.get("intervals")
        if intervals is not None and not (isinstance(intervals, dict)
                                          and all(k in intervals for k in ("scale", "quantile", "ground"))):
            raise InputError(f"{where}: key 'intervals' must be an object with 'scale', 'quantile' and 'ground' "
                             "(as objectives/catalog/intervals.json)")
        return cls.load().replace(**values, interval_params=intervals)


_CACHE: dict[str, Calibration] = {}
