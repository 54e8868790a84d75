"""Storage and checkpointing: how big a checkpoint is, how often it is taken, the file system that takes it.

Checkpoint size: every parameter's mixed-precision Adam state, 14 bytes (bf16 weights 2 + fp32 master
weights, momentum and variance 4 each; hardware-catalog 3, S56/S57; ``ckpt_bytes_per_param``). Gradients
are not saved. Llama-3.1 405B: 405.85e9 x 14 = 5.68 TB (hardware-catalog: "405B -> ~5.7-6.5 TB").

Write and read time: every GPU writes its shard at once (Megatron-Core distributed checkpointing, PyTorch
DCP), so the checkpoint moves at the lesser of the file system's aggregate bandwidth (units x per-unit
bandwidth) and the nodes' (n_gpus x ``storage_link_gbyte_s``, GPUDirect Storage 40 GB/s per DGX H100, S45).

Stall: synchronous checkpointing (``ckpt_mode: sync``, Megatron's default) stalls training for the whole
write ("minute-level stalls", ByteCheckpoint S60). Asynchronous checkpointing stalls for a fixed
``ckpt_async_fixed_s`` (planning, barrier and staging setup; PyTorch DCP async save, X16) plus the copy of
each GPU's shard to host memory (``ckpt_host_copy_gbyte_s``); the write then runs in the background and the
checkpoint is durable ``ckpt_lag_s`` later (MegaScale, Nebula, NeMo, PyTorch DCP async save; S56).

Interval (S100): Young (1974) T = sqrt(2 delta M); Daly (2006)
T = sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + delta/(18 M)] - delta for delta < 2M, else M, with delta the
stall and M the job's mean time between unexpected interruptions, failures (``gpu_mtbi_h`` / n_gpus) and, on a
preemptible spot row, preemptions (objectives.training.preemption), as objectives.training.reliability: a spot fleet's far
shorter M checkpoints far more often. ``ckpt_every_s`` fixes T instead. Whatever sets it, the interval is at least
``INTERVAL_OVER_WRITE`` = 3 write times and one training step:

    ckpt_interval_s = max(Daly T or ckpt_every_s, 3 x ckpt_write_s, step_time_s)

The factor 3 is a design rule, not Young's or Daly's: an asynchronous write must finish before the next
checkpoint starts (T >= write: one checkpoint in flight), and a margin of 3 keeps the file system at most a
third busy with checkpoints, for the spread of thousands of writers, the dataset's reads and a restart's
read. For synchronous checkpoints Daly's own optimum is 3 writes exactly when the write is 0.151 M (then
the stalls already take a quarter of the time, :func:`sync_write_limit_s`).

Storage (storage.yaml): a shared file system of ``storage_units`` building blocks. The model buys enough
units to hold ``ckpt_keep`` checkpoints plus the tokenized dataset (``train_tokens`` x 2 bytes per token for
vocabularies under 65,500, else 4: Megatron-Core's indexed dataset, X15) AND to write a checkpoint within a
third of its interval (``ckpt_write_budget_s``: the Young/Daly or fixed interval / 3; for sync, where the
write is the stall, :func:`sync_write_limit_s`), but no more bandwidth than the nodes can push (n_gpus x
``storage_link_gbyte_s``); ``storage_units_min`` raises the count (more units buy bandwidth, a shorter sync
stall). Where even the nodes' bandwidth is too slow, the interval stretches to 3 writes and goodput pays
(objectives.training.reliability).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.training.preemption import PREEMPT_COLUMNS, job_preempt_rate_per_s

__all__ = ["Checkpoint", "dataset_bytes_per_token", "young_interval_s", "daly_interval_s", "sync_write_limit_s",
           "UINT16_VOCAB_LIMIT", "INTERVAL_OVER_WRITE"]

#: Megatron-Core DType.optimal_dtype: uint16 tokens below this vocabulary size, int32 at or above (X15)
UINT16_VOCAB_LIMIT = 65500
#: design rule: a checkpoint interval is at least this many write times (module doc)
INTERVAL_OVER_WRITE = 3.0
SECONDS_PER_HOUR = 3600.0


def dataset_bytes_per_token(vocab_size):
    """Bytes per stored token of a tokenized dataset (Megatron-Core indexed dataset, X15)."""
    return 4.0 - 2.0 * (np.asarray(vocab_size) < UINT16_VOCAB_LIMIT)  # np.where(v < limit, 2, 4), branch-free


def young_interval_s(delta_s, mtbf_s):
    """Young (1974): first-order optimum compute time between checkpoints, sqrt(2 delta M)."""
    return np.sqrt(2.0 * np.asarray(delta_s, dtype=np.float64) * mtbf_s)


def daly_interval_s(delta_s, mtbf_s):
    """Daly (2006) higher-order optimum: sqrt(2dM)[1 + sqrt(d/2M)/3 + (d/2M)/9] - d for d < 2M, else M."""
    d = np.asarray(delta_s, dtype=np.float64)
    m = np.asarray(mtbf_s, dtype=np.float64)
    x = d / (2.0 * m)
    return np.where(d < 2.0 * m, np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d, m)


def sync_write_limit_s(mtbf_s, ratio=INTERVAL_OVER_WRITE):
    """Longest synchronous write W whose own Daly interval is ``ratio`` x W.

    With W = 2 M s^2, Daly's T = 2M s (1 + s/3 + s^2/9) - 2M s^2 = ratio x 2M s^2 gives
    s^2 - (9 ratio + 6) s + 9 = 0; the small root. Ratio 3: s = (33 - sqrt(1053)) / 2 = 0.27502, W = 0.15127 M.
    """
    b = 9.0 * ratio + 6.0
    s = (b - np.sqrt(b * b - 36.0)) / 2.0
    return 2.0 * s * s * np.asarray(mtbf_s, dtype=np.float64)


class Checkpoint(Model):
    requires = (
        "n_gpus", "n_params", "vocab_size", "train_tokens", "dataset_tb", "ckpt_bytes_per_param", "ckpt_keep",
        "ckpt_mode", "ckpt_every_s", "ckpt_async_fixed_s", "ckpt_host_copy_gbyte_s", "storage_link_gbyte_s",
        "storage_units_min", "storage_unit_tb", "storage_unit_read_gbyte_s", "storage_unit_write_gbyte_s",
        "storage_unit_usd", "storage_unit_w", "gpu_mtbi_h", "step_time_s", *PREEMPT_COLUMNS,
        "spot_preempt_mtbi_h_per_node",
    )
    provides = {
        "ckpt_size_gb": "GB; one checkpoint: weights and optimizer states of every parameter",
        "storage_dataset_tb": "TB; tokenized training data on the file system (0 without train_tokens)",
        "storage_need_tb": "TB; checkpoints kept plus the dataset",
        "ckpt_write_budget_s": "s; longest write the interval allows: a third of the Young/Daly or fixed interval",
        "storage_write_need_gbyte_s": "GB/s; write bandwidth that budget asks for (ckpt_size_gb / ckpt_write_budget_s)",
        "storage_units": "count; file-system building blocks: for capacity and the write budget, at least storage_units_min",
        "storage_capacity_tb": "TB; usable capacity installed",
        "storage_write_gbyte_s": "GB/s; checkpoint write bandwidth, storage or nodes, whichever is less",
        "storage_read_gbyte_s": "GB/s; checkpoint read bandwidth, storage or nodes, whichever is less",
        "ckpt_write_s": "s; writing one checkpoint to the file system",
        "ckpt_read_s": "s; reading one checkpoint back on restart",
        "ckpt_stall_s": "s; training stalled per checkpoint (the write if sync; setup and GPU-to-host copy if async)",
        "ckpt_lag_s": "s; after the stall, until the checkpoint is durable (0 if sync)",
        "ckpt_interval_s": "s; compute time between checkpoints: Young/Daly or ckpt_every_s, >= 3 writes and a step",
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
        # the job's, failures and preemptions, as objectives.training.reliability
        mtbf_s = 1.0 / (n / (c["gpu_mtbi_h"] * SECONDS_PER_HOUR) + job_preempt_rate_per_s(c, c["spot_preempt_mtbi_h_per_node"]))
        asynchronous = c["ckpt_mode"] == 1
        stall_async = c["ckpt_async_fixed_s"] + size_gb / n / c["ckpt_host_copy_gbyte_s"]
        fixed = c["ckpt_every_s"]
        budget = np.where(np.isnan(fixed),
                          np.where(asynchronous, daly_interval_s(stall_async, mtbf_s) / INTERVAL_OVER_WRITE,
                                   sync_write_limit_s(mtbf_s)),
                          fixed / INTERVAL_OVER_WRITE)
        want_gbyte_s = size_gb / budget
        links = n * c["storage_link_gbyte_s"]  # the nodes' own bandwidth to storage: more units buy nothing
        for_bandwidth = np.ceil(np.minimum(want_gbyte_s, links) / c["storage_unit_write_gbyte_s"])
        for_capacity = np.ceil(need / c["storage_unit_tb"])
        floor = np.fmax(c["storage_units_min"], 1.0)  # a blank (NaN) minimum is 1
        units = np.maximum(np.maximum(for_capacity, for_bandwidth), floor)
        write = np.minimum(units * c["storage_unit_write_gbyte_s"], links)
        read = np.minimum(units * c["storage_unit_read_gbyte_s"], links)
        write_s = size_gb / write
        stall = np.where(asynchronous, stall_async, write_s)
        optimum = np.where(np.isnan(fixed), daly_interval_s(stall, mtbf_s), fixed)
        interval = np.maximum(np.maximum(optimum, INTERVAL_OVER_WRITE * write_s), c["step_time_s"])
        return {
            "ckpt_size_gb": size_gb,
            "storage_dataset_tb": dataset,
            "storage_need_tb": need,
            "ckpt_write_budget_s": budget,
            "storage_write_need_gbyte_s": want_gbyte_s,
            "storage_units": units,
            "storage_capacity_tb": units * c["storage_unit_tb"],
            "storage_write_gbyte_s": write,
            "storage_read_gbyte_s": read,
            "ckpt_write_s": write_s,
            "ckpt_read_s": size_gb / read,
            "ckpt_stall_s": stall,
            "ckpt_lag_s": np.where(asynchronous, write_s, 0.0),
            "ckpt_interval_s": interval,
            "storage_capex_usd": units * c["storage_unit_usd"],
            "storage_power_w": units * c["storage_unit_w"],
        }
