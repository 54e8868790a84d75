"""Storage and checkpointing: how big a checkpoint is, where it goes, and how long the job waits for it.

Checkpoint size: every parameter's mixed-precision Adam state, 14 bytes (bf16 weights 2 + fp32 master
weights, momentum and variance 4 each; hardware-catalog 3, S56/S57; ``ckpt_bytes_per_param``). Gradients
are not saved. Llama-3.1 405B: 405.85e9 x 14 = 5.68 TB (hardware-catalog: "405B -> ~5.7-6.5 TB").

Storage (storage.yaml): a shared file system of ``storage_units`` building blocks, enough to hold
``ckpt_keep`` checkpoints plus the tokenized dataset (``train_tokens`` x 2 bytes per token for vocabularies
under 65,500, else 4: Megatron-Core's indexed dataset stores uint16 or int32 tokens, X15), or more when a
space sets ``storage_units_min`` (more units buy bandwidth).

Write and read time: every GPU writes its shard at once (Megatron-Core distributed checkpointing, PyTorch
DCP), so the checkpoint moves at the lesser of the file system's aggregate bandwidth (units x per-unit
bandwidth) and the nodes' (n_gpus x ``storage_link_gbps``, GPUDirect Storage 40 GB/s per DGX H100, S45).

Synchronous checkpointing (``ckpt_mode: sync``, Megatron's default) stalls training for the whole write
("minute-level stalls", ByteCheckpoint S60). Asynchronous checkpointing stalls only for the copy of each
GPU's shard to host memory (``ckpt_host_copy_gbps``); the write then runs in the background and the
checkpoint is durable ``ckpt_lag_s`` later (MegaScale, Nebula, NeMo, PyTorch DCP async save; S56).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Checkpoint", "dataset_bytes_per_token", "UINT16_VOCAB_LIMIT"]

#: Megatron-Core DType.optimal_dtype: uint16 tokens below this vocabulary size, int32 at or above (X15)
UINT16_VOCAB_LIMIT = 65500


def dataset_bytes_per_token(vocab_size):
    """Bytes per stored token of a tokenized dataset (Megatron-Core indexed dataset, X15)."""
    return 4.0 - 2.0 * (np.asarray(vocab_size) < UINT16_VOCAB_LIMIT)  # np.where(v < limit, 2, 4), branch-free


class Checkpoint(Model):
    requires = (
        "n_gpus", "n_params", "vocab_size", "train_tokens", "dataset_tb", "ckpt_bytes_per_param", "ckpt_keep",
        "ckpt_mode", "ckpt_host_copy_gbps", "storage_link_gbps", "storage_units_min", "storage_unit_tb",
        "storage_unit_read_gbps", "storage_unit_write_gbps", "storage_unit_usd", "storage_unit_w",
    )
    provides = {
        "ckpt_size_gb": "GB; one checkpoint: weights and optimizer states of every parameter",
        "storage_dataset_tb": "TB; tokenized training data on the file system (0 without train_tokens)",
        "storage_need_tb": "TB; checkpoints kept plus the dataset",
        "storage_units": "count; file-system building blocks installed",
        "storage_capacity_tb": "TB; usable capacity installed",
        "storage_write_gbps": "GB/s; checkpoint write bandwidth, storage or nodes, whichever is less",
        "storage_read_gbps": "GB/s; checkpoint read bandwidth, storage or nodes, whichever is less",
        "ckpt_write_s": "s; writing one checkpoint to the file system",
        "ckpt_read_s": "s; reading one checkpoint back on restart",
        "ckpt_stall_s": "s; training stalled per checkpoint (the write if sync, the GPU-to-host copy if async)",
        "ckpt_lag_s": "s; after the stall, until the checkpoint is durable (0 if sync)",
        "storage_capex_usd": "USD; file-system units",
        "storage_power_w": "W; file-system units",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        size_gb = c["n_params"] * c["ckpt_bytes_per_param"] / 1e9
        derived = np.where(np.isnan(c["train_tokens"]), 0.0,
                           c["train_tokens"] * dataset_bytes_per_token(c["vocab_size"]) / 1e12)
        dataset = np.where(np.isnan(c["dataset_tb"]), derived, c["dataset_tb"])
        need = c["ckpt_keep"] * size_gb / 1e3 + dataset
        units = np.maximum(np.maximum(np.ceil(need / c["storage_unit_tb"]), np.nan_to_num(c["storage_units_min"])), 1.0)
        links = n * c["storage_link_gbps"]  # the nodes' own bandwidth to storage
        write = np.minimum(units * c["storage_unit_write_gbps"], links)
        read = np.minimum(units * c["storage_unit_read_gbps"], links)
        write_s = size_gb / write
        asynchronous = c["ckpt_mode"] == 1
        return {
            "ckpt_size_gb": size_gb,
            "storage_dataset_tb": dataset,
            "storage_need_tb": need,
            "storage_units": units,
            "storage_capacity_tb": units * c["storage_unit_tb"],
            "storage_write_gbps": write,
            "storage_read_gbps": read,
            "ckpt_write_s": write_s,
            "ckpt_read_s": size_gb / read,
            "ckpt_stall_s": np.where(asynchronous, size_gb / n / c["ckpt_host_copy_gbps"], write_s),
            "ckpt_lag_s": np.where(asynchronous, write_s, 0.0),
            "storage_capex_usd": units * c["storage_unit_usd"],
            "storage_power_w": units * c["storage_unit_w"],
        }
