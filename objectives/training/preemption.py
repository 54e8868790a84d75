"""Spot preemption: how often a preemptible job loses capacity, and what each loss costs beyond a failure.

A row is ``preemptible`` (1) where its capacity can be reclaimed: ``pricing: spot`` on GCP Spot VMs, Azure Spot
VMs or CoreWeave Spot Node Pools (objectives/catalog/instances.py; an AWS Capacity Block is reserved, 0). Its
job runs on ``n_gpus / instance_gpus`` nodes (whole instances; a design that rents none, forced preemptible by
its table: its servers, ``server_gpus``), each preempted once per ``spot_preempt_mtbi_h_per_node`` hours,
independently, so the job is preempted that many times as often:

    job preemptions per second = preemptible x nodes / (spot_preempt_mtbi_h_per_node x 3600)

The per-node figure is node-hours per preemption event measured on GPU spot fleets of 1 to 32 nodes (AWS p3,
X21 X22; nodes lost in one sampling tick count as one event, which a synchronous job restarts once for); no
provider publishes one. A preemption costs what a failure costs, the restart, the checkpoint read and the
work since the last durable checkpoint (CoreWeave: "jobs that checkpoint lose only the work since their last
checkpoint", X25; the 30 s notice of GCP and Azure, X23 X24, reaches the one VM being reclaimed, best effort,
and the model takes no checkpoint on it), plus ``spot_reacquire_s``: the wait until the lost capacity runs
again, a job of fixed size waiting whole, as the traces' fleets did (X21 X22).

Failures (rate lf, restart R) and preemptions (rate lp, restart R + D) are independent exponential kinds: the
job is interrupted at lf + lp, and the restart term of Daly's exponent, R / M, becomes lf R + lp (R + D), an
effective restart R + D lp / (lf + lp) (exact in that term; objectives.training.reliability, objectives.training.checkpoint).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PREEMPT_COLUMNS", "job_preempt_rate_per_s", "SECONDS_PER_HOUR"]

SECONDS_PER_HOUR = 3600.0
#: the columns :func:`job_preempt_rate_per_s` reads, besides the per-node figure it is given
PREEMPT_COLUMNS = ("n_gpus", "instance_gpus", "server_gpus", "preemptible")


def job_preempt_rate_per_s(c, mtbi_h_per_node) -> np.ndarray:
    """Preemptions of the whole job per second (0 where the row is not preemptible; module doc)."""
    node_gpus = np.where(np.isnan(c["instance_gpus"]), c["server_gpus"], c["instance_gpus"])
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = c["n_gpus"] / (node_gpus * mtbi_h_per_node * SECONDS_PER_HOUR)
    return np.where(c["preemptible"] > 0, rate, 0.0)
