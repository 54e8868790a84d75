"""Whether a rented design can be rented: a published price, and a cluster no larger than the one advertised.

A design with ``cost_mode: cloud`` pays ``cloud_usd_per_gpu_hr``: a renting row's is its instance's at its
``pricing`` (objectives/catalog/instances.py), NaN where the catalog has none (Azure ND H100 v5 publishes
an on-demand price and no reservation, GCP's A4 none at all). Such a row is infeasible, ``con_price`` 1
("price: no published ..."), and its costs are NaN: no number the sources do not give. ``con_rental_gpus``:
its GPUs beyond the largest cluster the provider advertises at that pricing (``rental_max_gpus``: AWS
Capacity Blocks hold at most 256 instances, C03; inf where none is stated). ``feasible`` is the mapping's
(objectives.steptime) and both of these: the mapping search ranks a design's mappings on the training
model alone, and this module runs on its winner.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Rental"]


class Rental(Model):
    requires = ("cost_mode", "cloud_usd_per_gpu_hr", "n_gpus", "rental_max_gpus", "feasible")
    provides = {
        "con_price": "flag; 1 where a rented design has no published price at its pricing (<= 0 priced)",
        "con_rental_gpus": "GPUs; n_gpus beyond the largest cluster the instance is advertised at with its pricing (<= 0 within)",
        "feasible": "bool; the mapping is feasible (every con_* <= 0, a finite step time) and a rented design has a "
                    "published price and an advertised cluster that large",
    }

    def compute(self, c, cal):
        cloud = c["cost_mode"] == 1
        unpriced = (cloud & np.isnan(c["cloud_usd_per_gpu_hr"])).astype(np.float64)
        beyond = np.where(cloud, c["n_gpus"] - c["rental_max_gpus"], -np.inf)
        return {
            "con_price": unpriced,
            "con_rental_gpus": beyond,
            "feasible": c["feasible"] & (unpriced <= 0) & (beyond <= 0),
        }
