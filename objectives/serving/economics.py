"""Serving economics: the deployment's power and cost per hour, and cost and energy per output token.

A deployment is ``replicas_used`` instances of ``n_gpus`` GPUs. Its fabric is the rail-optimized fat tree of
all its GPUs (objectives.training.topology, as for a training cluster), its power that of objectives.economics.power (servers
at ``power_load_frac`` of their maximum, the fabric, PUE; the prices.yaml default is a training load, and a
decode-bound server draws less: a row may set its own), and its cost per hour that of objectives.economics.cost
(the same catalog prices and lives, per hour instead of per run; storage is left out, a model's weights
being a rounding error beside the GPUs):

    owned: servers over server_years, fabric over network_years, facility (IT peak x facility_usd_per_mw)
           over facility_years, each a level annuity at cost_of_capital_frac (servers less their
           residual_value_frac; objectives.economics.capital), plus upkeep at upkeep_frac_per_year of servers and
           fabric, per delivered hour at utilization_frac; energy at power_mw x electricity_usd_per_kwh
    cloud: GPUs x cloud_usd_per_gpu_hr (fabric, power and facility are in that price; a row renting an
           ``instance``, objectives/catalog/instances.yaml, pays its price at its ``pricing`` for whole
           instances of ``instance_gpus``, as objectives.economics.cost bills a training run)

A disaggregated row whose prefill pool runs on another GPU (``prefill_gpu``, objectives/serving/prefill_pool.py)
pays for its prefill GPUs as their own systems: their ``prefill_server_usd_per_gpu`` (and facility per MW
of their peak power) owned, their ``prefill_cloud_usd_per_gpu_hr`` per GPU rented (no cloud instance of
another GPU type is modelled: the decode GPUs alone fill whole instances), their ``prefill_server_w_per_gpu``
(or server_to_gpu_tdp x ``prefill_gpu_tdp_w``) at ``power_load_frac``; its fabric always crosses NVLink
domains (the KV goes over the NICs). Each figure is the decode GPU's plus the prefill GPUs' difference, so a
row on one GPU type is costed bit for bit as before.

usd_per_mtok_out = cost per hour / (output tokens per hour at the operating point) x 1e6, as
inference-measurements.md 3.2 writes it (all of the cost put on the output tokens), and energy per output
token = facility power / output tokens per second.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.economics.capital import annual_capital_usd
from objectives.economics.cost import DAYS_PER_YEAR
from objectives.serving.prefill_pool import PREFILL_GPU_COLUMNS
from objectives.training.topology import Topology

__all__ = ["ServingEconomics", "HOURS_PER_YEAR", "COST_COLUMNS", "deployment_cost"]

HOURS_PER_YEAR = DAYS_PER_YEAR * 24.0
_TOPOLOGY = Topology()
#: the prefill GPU's figures the economics read (objectives/serving/prefill_pool.py)
_PRICED = ("gpu_tdp_w", "server_w_per_gpu", "server_usd_per_gpu", "cloud_usd_per_gpu_hr", "facility_usd_per_mw")
#: the input columns :func:`deployment_cost` reads
COST_COLUMNS = tuple(sorted(set(_TOPOLOGY.requires) | {
    "scaleup_size", "gpu_tdp_w", "server_w_per_gpu", "server_to_gpu_tdp", "power_load_frac",
    "pue", "cost_mode", "server_usd_per_gpu", "cloud_usd_per_gpu_hr", "facility_usd_per_mw", "server_years",
    "network_years", "facility_years", "upkeep_frac_per_year", "electricity_usd_per_kwh", "instance_gpus", "cost_of_capital_frac",
    "utilization_frac", "residual_value_frac", "prefill_gpu_differs"} | {PREFILL_GPU_COLUMNS[f] for f in _PRICED}))


def deployment_cost(c, cal, replicas, prefill_gpus) -> dict[str, np.ndarray]:
    """The deployment's GPUs, fabric, power, capex and cost per hour with ``replicas`` decode (or aggregated)
    instances and ``prefill_gpus`` prefill GPUs (module doc); ``c`` holds :data:`COST_COLUMNS`. Also what
    objectives/serving/pool_size.py prices a prefill pool's size by."""
    pre = prefill_gpus
    gpus = c["n_gpus"] * replicas + pre  # decode (or aggregated) and prefill instances
    other = c["prefill_gpu_differs"] > 0  # the prefill pool on another GPU type (prefill_pool.py)
    fabric = _TOPOLOGY.compute({**c, "n_gpus": gpus}, cal.base)
    # a scale-out fabric only where the deployment's traffic crosses NVLink domains: an instance larger
    # than one, or prefill and decode pools that do not share one (the KV transfer then takes the NICs,
    # objectives/serving/disaggregated.py); replicas inside a domain each talk only to their clients
    crosses = (c["n_gpus"] > c["scaleup_size"]) | ((pre > 0) & (other | (gpus > c["scaleup_size"])))
    fabric = {k: np.where(crosses, fabric[k], 0.0) for k in ("net_capex_usd", "net_power_w")}

    def server_w(w, tdp):
        return np.where(np.isnan(w), c["server_to_gpu_tdp"] * tdp, w)

    def peak(w, tdp):  # the system's peak per GPU (a GPU without a published board power: its system's)
        return np.where(np.isnan(tdp), w, np.maximum(w, tdp))

    def prefill_extra(decode, prefill):  # what the prefill GPUs add beyond the decode GPU's figure (0: same GPU)
        return pre * np.where(other, prefill - decode, 0.0)

    p = {f: c[PREFILL_GPU_COLUMNS[f]] for f in _PRICED}
    w, pw = server_w(c["server_w_per_gpu"], c["gpu_tdp_w"]), server_w(p["server_w_per_gpu"], p["gpu_tdp_w"])
    it = ((gpus * w + prefill_extra(w, pw)) * c["power_load_frac"] + fabric["net_power_w"]) / 1e6
    power = c["pue"] * it
    peak_w, peak_pw = peak(w, c["gpu_tdp_w"]), peak(pw, p["gpu_tdp_w"])
    it_peak = (gpus * np.maximum(w, c["gpu_tdp_w"]) + prefill_extra(peak_w, peak_pw) + fabric["net_power_w"]) / 1e6
    servers = gpus * c["server_usd_per_gpu"] + prefill_extra(c["server_usd_per_gpu"], p["server_usd_per_gpu"])
    network = fabric["net_capex_usd"]
    # each system's facility at its own price per MW of its peak (a liquid-cooled rack's, gpus.yaml)
    # (it_peak holds the prefill GPUs' peak at the decode system's price: the difference of theirs added)
    facility = it_peak * c["facility_usd_per_mw"] + prefill_extra(peak_pw * c["facility_usd_per_mw"],
                                                                  peak_pw * p["facility_usd_per_mw"]) / 1e6
    rate = c["cost_of_capital_frac"]
    per_year = annual_capital_usd(servers, rate, c["server_years"], c["residual_value_frac"]) \
        + annual_capital_usd(network, rate, c["network_years"]) + annual_capital_usd(facility, rate, c["facility_years"]) \
        + c["upkeep_frac_per_year"] * (servers + network)
    owned = per_year / (HOURS_PER_YEAR * c["utilization_frac"]) + power * 1e3 * c["electricity_usd_per_kwh"]
    cloud = c["cost_mode"] == 1
    per_instance = c["instance_gpus"]
    rented = gpus - np.where(other, pre, 0.0)  # another GPU's prefill pool is rented per GPU, not in instances
    billed = np.where(np.isnan(per_instance), rented, np.ceil(rented / per_instance) * per_instance)  # whole instances
    per_hr = np.where(cloud, billed * c["cloud_usd_per_gpu_hr"]
                      + np.where(other, pre * p["cloud_usd_per_gpu_hr"], 0.0), owned)
    return {"deployment_gpus": gpus, "net_capex_usd": network, "power_it_mw": it, "power_mw": power,
            "capex_usd": np.where(cloud, 0.0, servers + network + facility), "usd_per_hr": per_hr,
            "billed_idle_gpus": np.where(cloud, billed - rented, 0.0)}  # NaN instance_gpus: billed per GPU, none idle


class ServingEconomics(Model):
    requires = tuple(sorted(set(COST_COLUMNS) | {"replicas_used", "prefill_gpus", "output_tokens_per_s"}))
    provides = {
        "deployment_gpus": "count; GPUs of the deployment, n_gpus x replicas_used (+ prefill_gpus, disaggregated)",
        "net_capex_usd": ("USD; the deployment's scale-out fabric (objectives.training.topology), 0 where no traffic crosses "
                          "an NVLink domain"),
        "power_it_mw": "MW; IT power of the deployment at load (GPUs, hosts, fabric)",
        "power_mw": "MW; facility power of the deployment at load, PUE x IT power",
        "capex_usd": "USD; purchase price of an owned deployment: servers, fabric, facility (0 rented)",
        "usd_per_hr": "USD; the deployment's cost per hour (owned: amortized, upkeep, energy; cloud: GPU-hours)",
        "usd_per_mtok_out": "USD; cost per million output tokens at the operating point",
        "energy_j_per_tok_out": "J; facility energy per output token",
        "billed_idle_gpus": "count; GPUs paid for and serving nothing: a rented deployment's whole instances "
                            "(instance_gpus) beyond its GPUs (0 owned, or priced per GPU; objectives/serving/rentals.py)",
    }

    def compute(self, c, cal):
        cost = deployment_cost(c, cal, c["replicas_used"], c["prefill_gpus"])
        per_hr, power, tokens = cost["usd_per_hr"], cost["power_mw"], c["output_tokens_per_s"]
        return cost | {"usd_per_mtok_out": per_hr / (tokens * 3600.0) * 1e6, "energy_j_per_tok_out": power * 1e6 / tokens}
