"""Serving economics: the deployment's power and cost per hour, and cost and energy per output token.

A deployment is ``replicas_used`` instances of ``n_gpus`` GPUs. Its fabric is the rail-optimized fat tree of
all its GPUs (objectives.topology, as for a training cluster), its power that of objectives.power (servers
at ``power_load_frac`` of their maximum, the fabric, PUE; the prices.yaml default is a training load, and a
decode-bound server draws less: a row may set its own), and its cost per hour that of objectives.cost
(the same catalog prices and lives, per hour instead of per run; storage is left out, a model's weights
being a rounding error beside the GPUs):

    owned: servers over server_years, fabric over network_years, facility (IT peak x facility_usd_per_mw)
           over facility_years, each a level annuity at cost_of_capital_frac (servers less their
           residual_value_frac; objectives.capital), plus upkeep at upkeep_frac_per_year of servers and
           fabric, per delivered hour at utilization_frac; energy at power_mw x electricity_usd_per_kwh
    cloud: GPUs x cloud_usd_per_gpu_hr (fabric, power and facility are in that price; a row renting an
           ``instance``, objectives/catalog/instances.yaml, pays its price at its ``pricing`` for whole
           instances of ``instance_gpus``, as objectives.cost bills a training run)

usd_per_mtok_out = cost per hour / (output tokens per hour at the operating point) x 1e6, as
inference-measurements.md 3.2 writes it (all of the cost put on the output tokens), and energy per output
token = facility power / output tokens per second.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.capital import annual_capital_usd
from objectives.cost import DAYS_PER_YEAR
from objectives.topology import Topology

__all__ = ["ServingEconomics", "HOURS_PER_YEAR"]

HOURS_PER_YEAR = DAYS_PER_YEAR * 24.0
_TOPOLOGY = Topology()


class ServingEconomics(Model):
    requires = tuple(sorted(set(_TOPOLOGY.requires) | {
        "scaleup_size", "replicas_used", "prefill_gpus", "output_tokens_per_s", "gpu_tdp_w", "server_w_per_gpu",
        "server_to_gpu_tdp", "power_load_frac",
        "pue", "cost_mode", "server_usd_per_gpu", "cloud_usd_per_gpu_hr", "facility_usd_per_mw", "server_years",
        "network_years", "facility_years", "upkeep_frac_per_year", "electricity_usd_per_kwh", "instance_gpus", "cost_of_capital_frac",
        "utilization_frac", "residual_value_frac"}))
    provides = {
        "deployment_gpus": "count; GPUs of the deployment, n_gpus x replicas_used (+ prefill_gpus, disaggregated)",
        "net_capex_usd": "USD; the deployment's scale-out fabric (objectives.topology), 0 where no traffic crosses an NVLink domain",
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
        gpus = c["n_gpus"] * c["replicas_used"] + c["prefill_gpus"]  # decode (or aggregated) and prefill instances
        fabric = _TOPOLOGY.compute({**c, "n_gpus": gpus}, cal.base)
        # a scale-out fabric only where the deployment's traffic crosses NVLink domains: an instance larger
        # than one, or prefill and decode pools that do not share one (the KV transfer then takes the NICs,
        # objectives/serving/disaggregated.py); replicas inside a domain each talk only to their clients
        crosses = (c["n_gpus"] > c["scaleup_size"]) | \
            ((c["prefill_gpus"] > 0) & (c["n_gpus"] * c["replicas_used"] + c["prefill_gpus"] > c["scaleup_size"]))
        fabric = {k: np.where(crosses, fabric[k], 0.0) for k in ("net_capex_usd", "net_power_w")}
        server_w = np.where(np.isnan(c["server_w_per_gpu"]), c["server_to_gpu_tdp"] * c["gpu_tdp_w"], c["server_w_per_gpu"])
        it = (gpus * server_w * c["power_load_frac"] + fabric["net_power_w"]) / 1e6
        power = c["pue"] * it
        it_peak = (gpus * np.maximum(server_w, c["gpu_tdp_w"]) + fabric["net_power_w"]) / 1e6
        servers = gpus * c["server_usd_per_gpu"]
        network = fabric["net_capex_usd"]
        facility = it_peak * c["facility_usd_per_mw"]
        rate = c["cost_of_capital_frac"]
        per_year = annual_capital_usd(servers, rate, c["server_years"], c["residual_value_frac"]) \
            + annual_capital_usd(network, rate, c["network_years"]) + annual_capital_usd(facility, rate, c["facility_years"]) \
            + c["upkeep_frac_per_year"] * (servers + network)
        owned = per_year / (HOURS_PER_YEAR * c["utilization_frac"]) + power * 1e3 * c["electricity_usd_per_kwh"]
        cloud = c["cost_mode"] == 1
        per_instance = c["instance_gpus"]
        billed = np.where(np.isnan(per_instance), gpus, np.ceil(gpus / per_instance) * per_instance)  # whole instances
        per_hr = np.where(cloud, billed * c["cloud_usd_per_gpu_hr"], owned)
        tokens = c["output_tokens_per_s"]
        return {
            "deployment_gpus": gpus,
            "net_capex_usd": network,
            "power_it_mw": it,
            "power_mw": power,
            "capex_usd": np.where(cloud, 0.0, servers + network + facility),
            "usd_per_hr": per_hr,
            "usd_per_mtok_out": per_hr / (tokens * 3600.0) * 1e6,
            "energy_j_per_tok_out": power * 1e6 / tokens,
            "billed_idle_gpus": np.where(cloud, billed - gpus, 0.0),  # NaN instance_gpus: billed per GPU, none idle
        }
