"""The model's few efficiency factors: physical, documented, fitted once and reproducibly.

Fitted (``python -m objectives.fit`` against ``catalog/training_runs.csv``; result in
``calibration.json``):

- ``attn_eff``: fraction of the GPU's dense bf16 peak that fused (flash) attention reaches, forward and
  backward; FlashAttention-2 reports 50-73% of A100 peak forward, less backward (Dao 2023, Fig. 4-6).
- ``kernel_overhead_s``: fixed time per transformer layer per micro-batch per forward pass (kernel launch,
  synchronisation, small ops the roofline does not see); the backward pass costs twice this.
- ``tp_comm_exposed``: fraction of tensor-parallel communication not hidden behind GEMMs (Megatron's
  TP-comm overlap hides part; 1.0 = none hidden).

Fixed, from measurements in the hardware catalog (not fitted):

- ``scaleup_eff`` 0.8: NCCL ring bus bandwidth / NVLink unidirectional line rate, H100 8-GPU all-reduce
  without NVLS ~365 of 450 GB/s (hardware-catalog S25).
- ``scaleout_eff`` 0.93: 46-48 of 50 GB/s per 400G NIC in nccl-tests (hardware-catalog S25).
- ``scaleup_latency_s`` 3e-6 and ``scaleout_latency_s`` 10e-6: NCCL base + per-hop latency, Simple
  protocol (NCCL tuning.cc via nccl#1334, hardware-catalog S28).
- ``hbm_reserved_gb`` 3 and ``hbm_usable_frac`` 0.95: CUDA context, NCCL buffers and allocator
  fragmentation that a training process cannot use.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

__all__ = ["Calibration", "CALIBRATION_PATH", "FITTED"]

CALIBRATION_PATH = Path(__file__).with_name("calibration.json")
FITTED = ("attn_eff", "kernel_overhead_s", "tp_comm_exposed")


@dataclasses.dataclass(frozen=True)
class Calibration:
    attn_eff: float = 0.55
    kernel_overhead_s: float = 40e-6
    tp_comm_exposed: float = 0.7
    scaleup_eff: float = 0.80
    scaleout_eff: float = 0.93
    scaleup_latency_s: float = 3e-6
    scaleout_latency_s: float = 10e-6
    hbm_reserved_gb: float = 3.0
    hbm_usable_frac: float = 0.95

    def replace(self, **changes: float) -> "Calibration":
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(cls, path: Path = CALIBRATION_PATH) -> "Calibration":
        """The fitted constants (cached); the defaults above where no fit has been written."""
        key = str(path)
        if key not in _CACHE:
            fitted = json.loads(path.read_text())["fitted"] if path.exists() else {}
            _CACHE[key] = cls(**{k: float(v) for k, v in fitted.items() if k in FITTED})
        return _CACHE[key]


_CACHE: dict[str, Calibration] = {}
