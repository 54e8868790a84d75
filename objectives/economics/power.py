"""Power at training load: GPUs, the rest of the servers, the fabric, storage, and the facility around them.

Servers: the vendor's maximum server (or NVL rack) power per GPU (gpus.yaml ``server_w_per_gpu``: DGX H100
10.2 kW / 8, S76; DGX B200 14.3 kW / 8, S78; NVL72 ~126 kW / 72, S79), or, where the catalog has none,
``server_to_gpu_tdp`` (1.8, S72 Epoch) x the GPU's TDP. A training job draws ``power_load_frac`` (0.75,
S72 Epoch; measured 0.66-0.82 of the DGX H100 maximum, S49/S77) of that on average; the GPUs' share is their
TDP at the same fraction, the host's (CPUs, memory, fans, NICs) the rest.

Fabric and storage draw their full figure (switches, optics and disks run near constant power;
``net_power_w`` from objectives.training.topology, ``storage_power_w`` from objectives.training.checkpoint). The facility
adds cooling and power distribution: power_mw = PUE x IT power (``pue`` 1.25, S72/S73).

Two powers, named once: ``power_mw``, the average a facility draws at training load (what energy is billed
on: ``energy_mwh``, objectives.economics.cost), and ``facility_power_peak_mw``, the peak it is built for: every server
at its maximum (the vendor's system power, or ``server_to_gpu_tdp`` x TDP) plus fabric and storage, x PUE
(S72/S73) -- the figure a site's power limit bounds; sized on the whole servers or racks bought
(``n_gpus_billed``, objectives.economics.rental: a rack's supply is built for all its GPUs).
``power_it_peak_mw`` is that peak before PUE (the IT load the facility is priced by, objectives.economics.cost).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Power"]


class Power(Model):
    requires = (
        "n_gpus", "gpu_tdp_w", "server_w_per_gpu", "server_to_gpu_tdp", "power_load_frac", "pue",
        "net_power_w", "storage_power_w", "time_to_train_days", "n_gpus_billed",
    )
    provides = {
        "power_gpu_mw": "MW; GPUs at training load",
        "power_host_mw": "MW; the rest of the servers (CPUs, memory, fans, NICs) at training load",
        "power_network_mw": "MW; scale-out switches, their transceivers and any NVLink switch trays",
        "power_storage_mw": "MW; file-system units",
        "power_it_mw": "MW; IT power at training load (gpu + host + network + storage)",
        "power_overhead_mw": "MW; cooling and power distribution, (PUE - 1) x IT power",
        "power_mw": "MW; average facility power at training load, PUE x IT power (sum of the power_*_mw breakdown)",
        "power_it_peak_mw": "MW; IT power at the servers' maximum (TDP), before PUE: the IT load the facility is priced by",
        "facility_power_peak_mw": "MW; the peak the facility is built for: IT at the servers' maximum (TDP) x PUE",
        "energy_mwh": "MWh; facility energy over time_to_train_days",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        server_w = np.where(np.isnan(c["server_w_per_gpu"]), c["server_to_gpu_tdp"] * c["gpu_tdp_w"], c["server_w_per_gpu"])
        load = c["power_load_frac"]
        gpu = n * c["gpu_tdp_w"] * load / 1e6
        host = n * np.maximum(server_w - c["gpu_tdp_w"], 0.0) * load / 1e6
        network = c["net_power_w"] / 1e6
        storage = c["storage_power_w"] / 1e6
        it = gpu + host + network + storage
        facility = c["pue"] * it
        peak = (c["n_gpus_billed"] * np.maximum(server_w, c["gpu_tdp_w"]) + c["net_power_w"] + c["storage_power_w"]) / 1e6
        return {
            "power_gpu_mw": gpu,
            "power_host_mw": host,
            "power_network_mw": network,
            "power_storage_mw": storage,
            "power_it_mw": it,
            "power_overhead_mw": facility - it,
            "power_mw": facility,
            "power_it_peak_mw": peak,
            "facility_power_peak_mw": c["pue"] * peak,
            "energy_mwh": facility * c["time_to_train_days"] * 24.0,
        }
