"""Owning against renting, per owned design: the utilization above which owning is cheaper, and the years of
full use a purchase takes to pay for itself against the rental.

The rental compared with is ``rental_usd_per_gpu_hr``: by default the cheapest published on-demand offer of
the design's GPU in the instance catalog (objectives/catalog/instances.yaml), else the GPU's market figure
(gpus.yaml ``cloud_usd_per_gpu_hr``); a space may name its own (a quote, a reservation).

Per GPU-hour (the standard build-vs-rent comparison: owned cost per *delivered* hour against the rented hour;
objectives.economics.capital): owning costs K / u + E at utilization u, where K is the calendar cost of a GPU-hour at
full use (capital annuity and upkeep, ``owned_usd_per_gpu_hr`` less energy, times ``utilization_frac``) and E
its energy. Against a rental R it wins above u* = K / (R - E), ``breakeven_utilization_frac`` (above 1: owning
never wins; inf: the rental costs less than the energy). ``breakeven_years``: the simple payback of the
purchase (servers, fabric and facility per GPU, as the run's ``capex_usd``) from the rental it saves at full
use, net of energy and upkeep: capex / ((R - E - upkeep) x 8,766 h); inf where the rental does not cover
the running costs. Both NaN on a rented design.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.economics.cost import HOURS_PER_YEAR

__all__ = ["Breakeven"]


class Breakeven(Model):
    requires = ("cost_mode", "n_gpus", "n_gpus_billed", "time_to_train_days", "owned_usd_per_gpu_hr",
                "run_cost_power_usd", "utilization_frac", "rental_usd_per_gpu_hr", "capex_usd", "storage_capex_usd",
                "capex_servers_usd", "net_capex_usd", "upkeep_frac_per_year")
    provides = {
        "breakeven_rental_usd_per_gpu_hr": "USD; the rental an owned design is weighed against, per GPU-hour "
                                           "(rental_usd_per_gpu_hr; the instance is breakeven_rental); NaN rented",
        "breakeven_utilization_frac": "fraction; the utilization above which owning costs less per delivered GPU-hour "
                                      "than renting at rental_usd_per_gpu_hr (> 1: never; NaN rented)",
        "breakeven_years": "years; at full use, how long the rental saved (net of energy and upkeep) takes to pay "
                           "for the purchase (inf: never; NaN rented)",
    }

    def compute(self, c, cal):
        owned = c["cost_mode"] != 1
        gpu_hours = c["n_gpus"] * c["time_to_train_days"] * 24.0
        energy = c["run_cost_power_usd"] / gpu_hours  # E, USD per GPU-hour
        calendar = (c["owned_usd_per_gpu_hr"] - energy) * c["utilization_frac"]  # K, USD per GPU-hour at full use
        rent = c["rental_usd_per_gpu_hr"]
        margin = rent - energy
        u_star = np.where(margin > 0, calendar / np.where(margin > 0, margin, 1.0), np.inf)
        billed = c["n_gpus_billed"]
        upkeep = c["upkeep_frac_per_year"] * (c["capex_servers_usd"] + c["net_capex_usd"]) / billed / HOURS_PER_YEAR
        capex = (c["capex_usd"] - c["storage_capex_usd"]) / billed
        saving = rent - energy - upkeep
        years = np.where(saving > 0, capex / (np.where(saving > 0, saving, 1.0) * HOURS_PER_YEAR), np.inf)
        return {
            "breakeven_rental_usd_per_gpu_hr": np.where(owned, rent, np.nan),
            "breakeven_utilization_frac": np.where(owned, u_star, np.nan),
            "breakeven_years": np.where(owned, years, np.nan),
        }
