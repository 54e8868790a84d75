"""Cost of the training run, owned or rented (``cost_mode``), and per million tokens trained.

Capital cost of the cluster as designed (``capex_usd``, reported in both modes so designs compare):
servers (``server_usd_per_gpu``, gpus.yaml, quoted without the scale-out NIC: HGX H100 ~$310k / 8, S47;
DGX B200 ~$515k / 8, S65; GB200 NVL72 ~$3.1M / 72, S66), the fabric (``net_capex_usd``, objectives.topology),
storage (``storage_capex_usd``, objectives.checkpoint) and the facility, built for the IT equipment's
maximum power at ``facility_usd_per_mw`` ($10.7M per MW, CBRE via S68).

Owned (Epoch's amortized-hardware method, S24; X12): the run pays each asset's capital over its life for
the run's wall-clock time (servers ``server_years`` 5, network 5, storage 5, facility 14), upkeep at
``upkeep_frac_per_year`` of the hardware's price (4-8% a year, X11), and energy at PUE x IT power x
``electricity_usd_per_kwh`` ($0.08, EIA via S72). Owned cost assumes the cluster is dedicated to the run.

Cloud: GPU-hours of the wall-clock run at ``cloud_usd_per_gpu_hr`` (gpus.yaml, date-stamped in its
source; network, power and facility are in that price) plus the file system at
``storage_cloud_usd_per_tb_month`` for the capacity needed (checkpoints kept plus the dataset).

tco_usd = tco_compute_usd + tco_network_usd + tco_storage_usd + tco_power_usd + tco_facility_usd, over
``time_to_train_days`` (failures included, objectives.reliability); usd_per_mtok = tco_usd per million
``train_tokens``.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Cost", "DAYS_PER_YEAR"]

DAYS_PER_YEAR = 365.25
DAYS_PER_MONTH = DAYS_PER_YEAR / 12.0


class Cost(Model):
    requires = (
        "cost_mode", "n_gpus", "train_tokens", "time_to_train_days", "server_usd_per_gpu", "cloud_usd_per_gpu_hr",
        "net_capex_usd", "storage_capex_usd", "storage_need_tb", "storage_cloud_usd_per_tb_month",
        "power_mw", "power_it_peak_mw", "facility_usd_per_mw", "server_years", "network_years", "storage_years",
        "facility_years", "upkeep_frac_per_year", "electricity_usd_per_kwh",
    )
    provides = {
        "capex_servers_usd": "USD; GPU servers (or racks) without scale-out NICs",
        "capex_facility_usd": "USD; data-centre shell, power and cooling for the IT peak",
        "capex_usd": "USD; purchase price of the cluster as designed: servers, fabric, storage, facility",
        "tco_compute_usd": "USD; servers over the run (owned: amortization + upkeep; cloud: GPU-hours)",
        "tco_network_usd": "USD; fabric over the run (owned: amortization + upkeep; cloud: in the GPU-hour)",
        "tco_storage_usd": "USD; file system over the run (owned: amortization + upkeep; cloud: TB-months)",
        "tco_power_usd": "USD; facility energy over the run (owned; cloud: in the GPU-hour)",
        "tco_facility_usd": "USD; facility amortized over the run (owned; cloud: in the GPU-hour)",
        "tco_usd": "USD; cost of the training run (sum of the tco_*_usd breakdown)",
        "usd_per_mtok": "USD; tco_usd per million training tokens",
        "usd_per_gpu_hr": "USD; tco_usd per GPU-hour of the wall-clock run",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        days = c["time_to_train_days"]
        years = days / DAYS_PER_YEAR
        servers = n * c["server_usd_per_gpu"]
        facility = c["power_it_peak_mw"] * c["facility_usd_per_mw"]
        upkeep = c["upkeep_frac_per_year"] * years

        def owned(price, life_years):
            return price * (years / life_years + upkeep)

        cloud = c["cost_mode"] == 1
        gpu_hours = n * days * 24.0
        compute = np.where(cloud, gpu_hours * c["cloud_usd_per_gpu_hr"], owned(servers, c["server_years"]))
        network = np.where(cloud, 0.0, owned(c["net_capex_usd"], c["network_years"]))
        storage = np.where(cloud, c["storage_need_tb"] * c["storage_cloud_usd_per_tb_month"] * days / DAYS_PER_MONTH,
                           owned(c["storage_capex_usd"], c["storage_years"]))
        power = np.where(cloud, 0.0, c["power_mw"] * 1e3 * days * 24.0 * c["electricity_usd_per_kwh"])
        fac = np.where(cloud, 0.0, facility * years / c["facility_years"])
        tco = compute + network + storage + power + fac
        return {
            "capex_servers_usd": servers,
            "capex_facility_usd": facility,
            "capex_usd": servers + c["net_capex_usd"] + c["storage_capex_usd"] + facility,
            "tco_compute_usd": compute,
            "tco_network_usd": network,
            "tco_storage_usd": storage,
            "tco_power_usd": power,
            "tco_facility_usd": fac,
            "tco_usd": tco,
            "usd_per_mtok": tco / c["train_tokens"] * 1e6,
            "usd_per_gpu_hr": tco / gpu_hours,
        }
