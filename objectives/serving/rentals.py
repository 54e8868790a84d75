"""A serving deployment on rented instances: the replicas that fill the whole instances it pays for.

A cloud rents whole instances (``instance_gpus`` GPUs each, objectives/catalog/instances.yaml), and the
deployment pays for ceil(GPUs / instance_gpus) of them (objectives/serving/economics.py). A rented row
(``cost_mode`` cloud with an instance's ``instance_gpus``) that does not fix ``replicas`` runs as many
instances of the model as fit in the instances it pays for anyway (:func:`fill_instances`): a 1-GPU
deployment on an 8-GPU instance 8 replicas, a 2-GPU one 4, a 16-GPU one 1 (two whole instances), a 3-GPU
one 2 (6 of the 8 GPUs; 2 idle). The bill is the same; the tokens grow with the replicas. Where the row
fixes ``replicas`` it keeps them and pays for the whole instances all the same: ``billed_idle_gpus`` (GPUs
paid for but serving nothing, objectives/serving/economics.py, beside the bill) says how many. Owned rows pay for their GPUs alone
(0 idle here; a vendor's whole servers are objectives.economics.rental's concern for training).

Disaggregated rows round their decode + prefill total: k decode instances of n GPUs need j = ceil(k x
ratio) prefill instances of p GPUs (objectives/serving/disaggregated.py, ``ratio`` prefill instances per
decode instance), and the deployment is the largest k whose k n + j p fits the instances that the given
(or rate-sized) count is billed for. For j prefill instances, k <= j / ratio and k <= (room - j p) / n;
the first rises with j and the second falls, so the best j is the floor or the ceiling of where they
cross, j* = ratio x room / (n + ratio p). Sized from a request rate, the ratio is the one at the largest
concurrency meeting the targets: more replicas take less of the rate each, decode fewer requests per
second, and need no more prefill per decode instance, so the deployment still fits its instances. The
prefill pool is then objectives/serving/pool_size.py's: the ceiling counted here, or the floor where that
frees a billed instance and costs less per output token.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fill_instances"]


def fill_instances(replicas, n_gpus, ratio, prefill_gpus, instance_gpus) -> np.ndarray:
    """The most decode (or aggregated) instances, at least ``replicas``, whose deployment (with ceil(k x
    ratio) prefill instances of ``prefill_gpus`` GPUs; ratio 0 aggregated) fits the whole cloud instances of
    ``instance_gpus`` GPUs that ``replicas`` of them are billed for (module doc)."""
    ratio = np.where(np.isfinite(ratio) & (ratio > 0), ratio, 0.0)
    need = replicas * n_gpus + np.ceil(replicas * ratio - 1e-9) * prefill_gpus
    room = np.ceil(need / instance_gpus) * instance_gpus  # the GPUs billed (objectives/serving/economics.py)
    cross = ratio * room / (n_gpus + ratio * prefill_gpus)  # 0 aggregated: no prefill instance
    per_prefill = np.where(ratio > 0, ratio, 1.0)
    best = replicas
    for j in (np.floor(cross), np.ceil(cross)):
        # ceil(k ratio - 1e-9) <= j prefill instances (as ServingBatching counts them), and the GPUs fit
        by_prefill = np.where(ratio > 0, np.floor((j + 1e-9) / per_prefill), np.inf)
        k = np.minimum(by_prefill, np.floor((room - j * prefill_gpus) / n_gpus))
        best = np.maximum(best, np.where(np.isfinite(k), k, replicas))
    return best

