"""Columns renamed so that their unit reads one way only: the old name -> the new one.

``_gbps`` read as gigabits or gigabytes per second and ``_tflops`` as a FLOP count or a rate; every such
column now spells its unit (``_gbyte_s`` GB/s, ``_tbyte_s`` TB/s, ``_tflop_s`` TFLOP/s). A table or a
space that still gives an old name gets one line naming the new one, rather than a column the model
would ignore beside the catalog's value.
"""

from __future__ import annotations

from collections.abc import Iterable

from objectives.table import InputError

__all__ = ["RENAMED_COLUMNS", "renamed_note", "check_renamed"]

#: old column name -> new column name (every input, catalog field and metric that was renamed)
RENAMED_COLUMNS: dict[str, str] = {
    "gpu_hbm_tbps": "gpu_hbm_tbyte_s",
    "scaleup_gbps": "scaleup_gbyte_s",
    "nic_gbps": "nic_gbyte_s",
    "net_port_gbps": "net_port_gbyte_s",
    "net_bw_out_gbps": "net_bw_out_gbyte_s",
    "net_bw_cross_gbps": "net_bw_cross_gbyte_s",
    "storage_unit_read_gbps": "storage_unit_read_gbyte_s",
    "storage_unit_write_gbps": "storage_unit_write_gbyte_s",
    "storage_link_gbps": "storage_link_gbyte_s",
    "storage_write_need_gbps": "storage_write_need_gbyte_s",
    "storage_write_gbps": "storage_write_gbyte_s",
    "storage_read_gbps": "storage_read_gbyte_s",
    "ckpt_host_copy_gbps": "ckpt_host_copy_gbyte_s",
    "gpu_bf16_tflops": "gpu_bf16_tflop_s",
    "gpu_fp8_tflops": "gpu_fp8_tflop_s",
    "gpu_fp4_tflops": "gpu_fp4_tflop_s",
    "model_tflops_per_gpu": "model_tflop_s_per_gpu",
}

#: the unit a new name's suffix spells, longest suffix first
_UNITS = (("_gbyte_s", "GB/s"), ("_tbyte_s", "TB/s"), ("_tflop_s_per_gpu", "TFLOP/s per GPU"), ("_tflop_s", "TFLOP/s"))


def renamed_note(old: str) -> str:
    """``was renamed 'NEW' (UNIT)`` for an old column name (a KeyError for any other name)."""
    new = RENAMED_COLUMNS[old]
    unit = next(u for suffix, u in _UNITS if new.endswith(suffix))
    return f"was renamed '{new}' ({unit})"


def check_renamed(columns: Iterable[str]) -> None:
    """Raise InputError naming the first old column name among ``columns`` and its new name."""
    for name in columns:
        if name in RENAMED_COLUMNS:
            raise InputError(renamed_note(name), column=name)
