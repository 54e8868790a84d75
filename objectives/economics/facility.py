"""A facility's limits on an owned design: its power (``facility_mw``) and the power one rack may draw (``rack_kw_max``).

Two input columns, blank (NaN) where there is no limit:

- ``facility_mw``: the power the facility is built for, in MW. A design fits where its
  ``facility_power_peak_mw`` (objectives.economics.power: every server or rack bought, ``n_gpus_billed``, at its
  maximum power, plus the scale-out fabric and storage, x ``pue``, prices.yaml 1.25, S72/S73) is at most
  that: ``con_facility_mw`` = facility_power_peak_mw - facility_mw (MW, <= 0 within). The budget counts
  whole servers or racks, because a rack's supply is built for all its GPUs (objectives.economics.rental), and the
  fabric and storage, because the site powers them too (~100 W per GPU of switches and optics in
  objectives.training.topology: 6-8% of an H100 or GB200 cluster's peak).
- ``rack_kw_max``: the most one rack may draw (a site's rack-density limit: air-cooled halls ~15-40 kW,
  liquid-cooled ~130 kW and up). ``rack_kw`` is the power of the system a vendor sells as one
  (``server_gpus`` x the server's maximum power per GPU, gpus.yaml ``server_w_per_gpu``): a GB200 NVL72
  rack 72 x 1,750 W = 126 kW (S79/S70: 120-132 kW), an HGX H100 server 8 x 1,275 W = 10.2 kW (S76). An
  NVL72 rack is one NVLink domain and cannot be split; 8-GPU servers are racked as many to a rack as its
  limit allows, so such a server breaks the limit only if it alone draws more. ``con_rack_kw`` = rack_kw -
  rack_kw_max (kW, <= 0 within).

Both apply to an owned design (``cost_mode`` owned): a rented one runs in its provider's facility, and its
columns are -inf (within). ``feasible`` is the earlier modules' and both of these; ``facility_budget_frac``
is the share of the budget a design uses (its peak / facility_mw), the figure a planner reads beside the
front. ``objectives.sizing.largest_fitting_gpus`` gives, for designs without a GPU count, the largest count of whole
servers or racks whose facility peak fits (the engine offers it to the search: dse/spec/facility.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.base import Model

__all__ = ["Facility", "FACILITY_DEFAULTS", "server_peak_w_per_gpu", "unit_gpus"]

#: no facility budget and no rack limit, unless the table gives them
FACILITY_DEFAULTS = {"facility_mw": np.nan, "rack_kw_max": np.nan}


def server_peak_w_per_gpu(c: Mapping[str, np.ndarray]) -> np.ndarray:
    """A server's (or NVL rack's) maximum power per GPU, W: gpus.yaml ``server_w_per_gpu``, else
    ``server_to_gpu_tdp`` x TDP (S72 Epoch), at least the GPU's TDP -- the figure objectives.economics.power sizes
    ``facility_power_peak_mw`` on."""
    server_w = np.where(np.isnan(c["server_w_per_gpu"]), c["server_to_gpu_tdp"] * c["gpu_tdp_w"], c["server_w_per_gpu"])
    return np.maximum(server_w, c["gpu_tdp_w"])


def unit_gpus(c: Mapping[str, np.ndarray]) -> np.ndarray:
    """GPUs bought or rented as one (objectives.economics.rental ``n_gpus_billed``): an instance, else a server or rack,
    else one GPU."""
    unit = np.where(np.isnan(c["instance_gpus"]), c["server_gpus"], c["instance_gpus"])
    return np.where(np.isnan(unit) | (unit <= 0), 1.0, unit)


class Facility(Model):
    requires = ("facility_mw", "rack_kw_max", "facility_power_peak_mw", "cost_mode", "server_w_per_gpu",
                "server_to_gpu_tdp", "gpu_tdp_w", "server_gpus", "feasible")
    provides = {
        "rack_kw": "kW; one server or rack as sold (server_gpus GPUs) at its maximum power: a GB200 NVL72 rack 126, "
                   "an 8-GPU HGX H100 server 10.2",
        "con_rack_kw": "kW; rack_kw beyond rack_kw_max (<= 0 within; -inf without a limit or rented)",
        "con_facility_mw": "MW; facility_power_peak_mw beyond facility_mw (<= 0 within; -inf without a budget or rented)",
        "facility_budget_frac": "fraction; facility_power_peak_mw / facility_mw, the share of the facility's power "
                                "the design uses (NaN without a budget)",
        "feasible": "bool; the mapping is feasible, a rented design priced and advertised that large, and an owned "
                    "one within the facility's power and rack limit",
    }

    def compute(self, c, cal):
        owned = c["cost_mode"] == 0
        rack_kw = c["server_gpus"] * server_peak_w_per_gpu(c) / 1e3
        over_rack = rack_kw - c["rack_kw_max"]
        over_rack = np.where(owned & ~np.isnan(over_rack), over_rack, -np.inf)
        over_mw = c["facility_power_peak_mw"] - c["facility_mw"]
        budgeted = owned & ~np.isnan(c["facility_mw"])
        # a budget and no figure to hold to it (an override left the power NaN): not shown to fit
        over_mw = np.where(budgeted, np.where(np.isnan(over_mw), np.inf, over_mw), -np.inf)
        return {
            "rack_kw": rack_kw,
            "con_rack_kw": over_rack,
            "con_facility_mw": over_mw,
            "facility_budget_frac": c["facility_power_peak_mw"] / c["facility_mw"],
            "feasible": c["feasible"] & (over_rack <= 0) & (over_mw <= 0),
        }
