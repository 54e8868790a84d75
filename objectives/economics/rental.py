"""Whether a rented design can be rented: a published price, and a cluster no larger than the one advertised.

A design with ``cost_mode: cloud`` pays ``cloud_usd_per_gpu_hr``: a renting row's is its instance's at its
``pricing`` (objectives/catalog/instances.py), NaN where the catalog has none (Azure ND H100 v5 publishes
an on-demand price and no reservation, GCP's A4 none at all). Such a row is infeasible, ``con_price`` 1
("price: no published ..."), and its costs are NaN: no number the sources do not give. So is an owned design
on an announced system (``gpu_announced``, objectives/catalog/estimates.py) with no published price
(``server_usd_per_gpu`` blank: a rack nobody has priced yet), ``con_price`` 2, and any design on one with no
published power (``gpu_tdp_w`` blank), ``con_price`` 3: its energy, facility and costs would be NaN. A table may
set the figure as a what-if. (A table of raw GPU figures naming no catalog GPU keeps NaN costs, feasible.) ``con_rental_gpus``:
its GPUs beyond the largest cluster the provider advertises at that pricing (``rental_max_gpus``: AWS
Capacity Blocks hold at most 256 instances, C03; one instance where the provider publishes no cluster
fabric, Lambda's; inf where none is stated). ``feasible`` is the mapping's
(objectives.training.steptime) and both of these: the mapping search ranks a design's mappings on the training
model alone, and this module runs on its winner.

``n_gpus_billed``: the GPUs a design pays for, rented or owned. A cloud bills whole instances
(``instance_gpus``); a vendor sells whole servers or racks (``server_gpus``: an HGX B200 is 8 GPUs, a GB200
NVL72 rack 72, one price and one power supply, gpus.yaml). 1,024 GB200 are 15 racks, 1,080 GPUs: the
capex, the facility's peak power and a rental are sized on those (objectives.economics.power, objectives.economics.cost); an
owned run's cost is its GPUs' share, the rest of the rack serving other work, as the amortization assumes.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Rental"]


class Rental(Model):
    requires = ("cost_mode", "cloud_usd_per_gpu_hr", "n_gpus", "rental_max_gpus", "feasible", "instance_gpus", "server_gpus",
                "server_usd_per_gpu", "gpu_tdp_w", "gpu_announced")
    provides = {
        "con_price": "code; > 0 where a figure the design is costed on is not published: 1 a rented design's price at its "
                     "pricing, 2 an owned system's price (server_usd_per_gpu), 3 its power (gpu_tdp_w) (<= 0 priced)",
        "con_rental_gpus": "GPUs; n_gpus beyond the largest cluster the instance is advertised at with its pricing (<= 0 within)",
        "n_gpus_billed": "count; GPUs paid for: whole instances (instance_gpus) rented, whole servers or racks "
                         "(server_gpus) owned; n_gpus where the catalog gives neither",
        "feasible": "bool; the mapping is feasible (every con_* <= 0, a finite step time) and a rented design has a "
                    "published price and an advertised cluster that large",
    }

    def compute(self, c, cal):
        cloud = c["cost_mode"] == 1
        announced = c["gpu_announced"] > 0  # a table of raw GPU figures keeps its NaN costs, as before
        unpriced = np.where(cloud & np.isnan(c["cloud_usd_per_gpu_hr"]), 1.0,
                            np.where(announced & ~cloud & np.isnan(c["server_usd_per_gpu"]), 2.0,
                                     np.where(announced & np.isnan(c["gpu_tdp_w"]), 3.0, 0.0)))
        beyond = np.where(cloud, c["n_gpus"] - c["rental_max_gpus"], -np.inf)
        n = c["n_gpus"]
        unit = np.where(np.isnan(c["instance_gpus"]), c["server_gpus"], c["instance_gpus"])
        billed = np.where(np.isnan(unit) | (unit <= 0), n, np.ceil(n / np.where(unit > 0, unit, 1.0)) * unit)
        return {
            "n_gpus_billed": billed,
            "con_price": unpriced,
            "con_rental_gpus": beyond,
            "feasible": c["feasible"] & (unpriced <= 0) & (beyond <= 0),
        }
