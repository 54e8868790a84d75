"""What a design costs, owned or rented (``cost_mode``): what the buyer pays up front, for the run, and in all.

Three figures, named once:

- ``capex_usd``: the purchase price of an owned cluster as designed (0 for a rented one): whole servers
  or racks (``n_gpus_billed``, objectives.economics.rental) at ``server_usd_per_gpu`` (gpus.yaml, quoted without the
  scale-out NIC: HGX H100 ~$310k / 8, S47; DGX B200 ~$515k / 8, S65; GB200 NVL72 ~$3.1M / 72, S66), the fabric
  (``net_capex_usd``, objectives.training.topology), storage (``storage_capex_usd``, objectives.training.checkpoint) and the
  facility, built for the IT equipment's maximum power at ``facility_usd_per_mw`` ($10.7M per MW of IT, CBRE
  via S68).
- ``run_cost_usd``: the training run's cost over ``time_to_train_days`` (failures included,
  objectives.training.reliability), the sum of the ``run_cost_*_usd`` breakdown. Owned: each asset's capital
  recovered as a level annuity over its life at ``cost_of_capital_frac`` (servers ``server_years`` 5,
  network 5, storage 5, facility 14; objectives.economics.capital), the servers less ``residual_value_frac`` of their
  price resold at the end, and upkeep at ``upkeep_frac_per_year`` of the hardware's price (4-8% a year, X11): these accrue
  by the calendar, so a cluster doing paid work ``utilization_frac`` of its hours charges the run's hours
  1 / utilization_frac of them (the idle hours are paid by the busy ones); energy is the run's own, PUE x IT
  power x ``electricity_usd_per_kwh`` ($0.08, EIA via S72). ``cost_of_capital_frac: 0``,
  ``utilization_frac: 1`` and no residual is Epoch's straight-line method (S24; X12), to the cent.
  Rented: whole instances (``instance_gpus`` GPUs each) for the run's hours at ``cloud_usd_per_gpu_hr`` (the
  instance's at its ``pricing``, objectives/catalog/instances.py; network, power and facility are in that
  price; a reservation's rate charged for the hours used, the rest of the term serving other work, as an
  owned cluster's), plus the checkpoints on the provider's managed file system and the dataset in its
  object store (``storage_cloud_usd_per_tb_month``, ``storage_object_usd_per_tb_month``; without an
  object-store price the dataset sits on the file system). ``tco_usd`` is the same figure under its old
  name, kept for one release.
- ``owned_usd_per_gpu_hr``: an owned design's cost per delivered GPU-hour, everything a rental's price
  covers (servers, fabric, facility, upkeep, energy; storage aside, which clouds bill apart), the figure to
  set beside a rental's ``cloud_usd_per_gpu_hr``.
- ``lifetime_cost_usd``: what the buyer commits to, undiscounted. Owned: the capex and the cluster's
  running costs over its servers' life (``server_years``, or the run if longer; Epoch's hardware life,
  S24/X12), at training load all along: energy at ``power_mw`` (PUE included) x ``electricity_usd_per_kwh``
  and upkeep at ``upkeep_frac_per_year`` of servers, network and storage (X11); the facility is in the capex
  whole (it outlives the servers, 14 years, and nothing is credited for that). Rented: the rental the
  pricing commits to, the run's hours (on demand, spot) or the whole term of a reservation (1 or 3 years,
  or the run if longer), plus the run's storage.

usd_per_mtok = run_cost_usd per million ``train_tokens``; usd_per_gpu_hr = run_cost_usd per GPU-hour of the
wall-clock run.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, lookup
from objectives.economics.capital import annual_capital_usd

__all__ = ["Cost", "DAYS_PER_YEAR"]

DAYS_PER_YEAR = 365.25
DAYS_PER_MONTH = DAYS_PER_YEAR / 12.0
HOURS_PER_YEAR = DAYS_PER_YEAR * 24.0
#: years each pricing (objectives.table CATEGORIES) commits to beyond the run: on demand 0, 1 and 3 years, spot 0
_TERM_YEARS = (0.0, 1.0, 3.0, 0.0)


class Cost(Model):
    requires = (
        "cost_mode", "instance", "pricing", "n_gpus", "n_gpus_billed", "train_tokens", "time_to_train_days",
        "server_usd_per_gpu", "cloud_usd_per_gpu_hr", "net_capex_usd", "storage_capex_usd", "storage_need_tb",
        "storage_dataset_tb", "storage_cloud_usd_per_tb_month", "storage_object_usd_per_tb_month",
        "power_mw", "power_it_peak_mw", "facility_usd_per_mw", "server_years", "network_years", "storage_years",
        "facility_years", "upkeep_frac_per_year", "electricity_usd_per_kwh", "cost_of_capital_frac",
        "utilization_frac", "residual_value_frac",
    )
    provides = {
        "capex_servers_usd": "USD; GPU servers (or racks) without scale-out NICs (owned; 0 rented)",
        "capex_facility_usd": "USD; data-centre shell, power and cooling for the IT peak (owned; 0 rented)",
        "capex_usd": "USD; purchase price of an owned cluster as designed: servers, fabric, storage, facility (0 rented)",
        "run_cost_compute_usd": "USD; servers over the run (owned: amortization + upkeep; rented: GPU-hours of whole instances)",
        "run_cost_network_usd": "USD; fabric over the run (owned: amortization + upkeep; rented: in the GPU-hour)",
        "run_cost_storage_usd": "USD; storage over the run (owned: amortization + upkeep; rented: TB-months)",
        "run_cost_power_usd": "USD; facility energy over the run (owned; rented: in the GPU-hour)",
        "run_cost_facility_usd": "USD; facility amortized over the run (owned; rented: in the GPU-hour)",
        "run_cost_usd": "USD; cost of the training run, owned (capital recovered at cost_of_capital_frac over each asset's "
                        "life, per delivered hour at utilization_frac, + upkeep and energy) or rented (sum of run_cost_*_usd)",
        "owned_usd_per_gpu_hr": "USD; an owned design's cost per delivered GPU-hour: capital, upkeep and energy of servers, "
                                "fabric and facility (storage aside, as a rental bills it); NaN rented",
        "tco_usd": "USD; run_cost_usd under its old name (kept for one release; read run_cost_usd)",
        "lifetime_cost_usd": "USD; what the buyer commits to: owned, capex + energy and upkeep over server_years at "
                             "training load; rented, the pricing's commitment (the run, or a reservation's whole term)",
        "usd_per_mtok": "USD; run_cost_usd per million training tokens",
        "usd_per_gpu_hr": "USD; run_cost_usd per GPU-hour of the wall-clock run",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        days = c["time_to_train_days"]
        years = days / DAYS_PER_YEAR
        billed = c["n_gpus_billed"]  # whole instances rented, whole servers or racks owned (objectives.economics.rental)
        servers = billed * c["server_usd_per_gpu"]  # what is bought
        share = n * c["server_usd_per_gpu"]  # what the run uses: the rest of a rack serves other work
        facility = c["power_it_peak_mw"] * c["facility_usd_per_mw"]
        rate, busy = c["cost_of_capital_frac"], c["utilization_frac"]

        def owned(price, life_years, resale_frac=0.0):
            """An asset's calendar cost over the run (capital annuity + upkeep), per delivered hour (objectives.economics.capital)."""
            per_year = annual_capital_usd(price, rate, life_years, resale_frac) + c["upkeep_frac_per_year"] * price
            return per_year * years / busy

        cloud = c["cost_mode"] == 1
        gpu_hours = n * days * 24.0
        rental = billed * c["cloud_usd_per_gpu_hr"]  # USD per hour
        compute = np.where(cloud, rental * days * 24.0, owned(share, c["server_years"], c["residual_value_frac"]))
        network = np.where(cloud, 0.0, owned(c["net_capex_usd"], c["network_years"]))
        dataset = c["storage_dataset_tb"]
        object_price = c["storage_object_usd_per_tb_month"]
        per_month = (c["storage_need_tb"] - dataset) * c["storage_cloud_usd_per_tb_month"] \
            + dataset * np.where(np.isnan(object_price), c["storage_cloud_usd_per_tb_month"], object_price)
        cloud_storage = per_month * days / DAYS_PER_MONTH
        storage = np.where(cloud, cloud_storage, owned(c["storage_capex_usd"], c["storage_years"]))
        energy_usd_per_year = c["power_mw"] * 1e3 * HOURS_PER_YEAR * c["electricity_usd_per_kwh"]
        power = np.where(cloud, 0.0, energy_usd_per_year * years)
        fac = np.where(cloud, 0.0, annual_capital_usd(facility, rate, c["facility_years"]) * years / busy)
        run = compute + network + storage + power + fac
        hardware = servers + c["net_capex_usd"] + c["storage_capex_usd"]
        capex = hardware + facility
        life = np.maximum(c["server_years"], years)
        owned_life = capex + (c["upkeep_frac_per_year"] * hardware + energy_usd_per_year) * life
        term = np.where(c["instance"] > 0, lookup(_TERM_YEARS, c["pricing"]), 0.0)
        rented_life = rental * np.maximum(term, years) * HOURS_PER_YEAR + cloud_storage
        return {
            "capex_servers_usd": np.where(cloud, 0.0, servers),
            "capex_facility_usd": np.where(cloud, 0.0, facility),
            "capex_usd": np.where(cloud, 0.0, capex),
            "run_cost_compute_usd": compute,
            "run_cost_network_usd": network,
            "run_cost_storage_usd": storage,
            "run_cost_power_usd": power,
            "run_cost_facility_usd": fac,
            "run_cost_usd": run,
            "tco_usd": run,
            "lifetime_cost_usd": np.where(cloud, rented_life, owned_life),
            "usd_per_mtok": run / c["train_tokens"] * 1e6,
            "usd_per_gpu_hr": run / gpu_hours,
            "owned_usd_per_gpu_hr": np.where(cloud, np.nan, (run - storage) / gpu_hours),
        }
