"""Network topology: the rail-optimized fat tree that connects n GPUs, what it costs and what it delivers.

Sizing (hardware-catalog 2.4; Leiserson's fat tree as built in NVIDIA's DGX SuperPOD reference
architectures, S44/S45). Each GPU has one NIC (an endpoint); switches have radix k at the GPU's port speed.
A leaf gives d = floor(k*o/(1+o)) ports to GPUs and u = k - d to the layer above, o being the
``oversubscription`` above the leaf (1 = non-blocking; Meta's Llama 3 RoCE cluster ran ~1:7 at its
aggregation layer, hardware-catalog 2.4). Every layer above the leaf is non-blocking: a spine of a 3-tier
tree has k/2 ports down and k/2 up, the top layer k down. So t tiers hold

    1 tier: k endpoints (one switch)      t >= 2 tiers: k * (k/2)^(t-2) * d endpoints

(k=64, o=1: 64, 2,048, 65,536; k=144: 144, 10,368, 746,496). For N endpoints and the fewest tiers t:
leaves = ceil(N/d), uplinks U = leaves*u, each middle layer ceil(U/(k/2)) switches, the top ceil(U/k);
cables are N from GPUs to leaves plus U between each pair of layers above; every cable has a transceiver at
both ends (NVIDIA RA: all optical). This reproduces the SuperPOD B200 table (S44): 512 GPUs -> 16 leaf + 8
spine, 2,048 -> 64 + 32, 4,096 -> 128 + 128 + 64 core, 16,384 -> 512 + 512 + 256, N cables per tier.

Rail-optimized (S45/S46): NIC i of every scale-up domain goes to a leaf of rail i, so one leaf joins d
domains, and same-rail traffic between them takes one switch hop. A job whose ceil(N / scaleup_size)
domains fit under one leaf never crosses the uplinks; a larger one meets the leaf's oversubscription d/u
and 2t-1 hops. That bandwidth and latency feed the collectives (``communication.tiers_of``): bytes/s per GPU
= nic_gbyte_s * scaleout_eff (0.93, S25) * net_eff_rel for ring collectives (reduce-scatter, all-gather and
ring all-reduce pass data to the next domain on the same rail, which mostly shares a leaf: a leaf carries
a couple of a ring's flows over its u uplinks), and that over the oversubscription met for all-to-all and
pipeline sends, which spread over the fabric (``net_bw_cross_gbyte_s``); latency = the calibrated NCCL network
latency (S28) + hops * net_hop_latency_s on every scale-out message (the longest path, conservatively) +
``net_transport_latency_s``, what a cloud's transport adds per message over InfiniBand's (0 unless a rented
instance's fabric kind sets it: EFA's SRD, GCP's GPUDirect-TCPX/TCPXO; objectives/catalog/instances.yaml).

Each GPU's port runs at ``nic_gbyte_s`` = min(its system's NIC, the fabric's port; objectives.catalog): the
fabric sets switches, optics and NICs, the system how fast a GPU can drive them.

Cost and power (networks.yaml; hardware-catalog 2.5): switches, transceivers (two port-ends per cable),
cables and one NIC per GPU (the dearer of the system's, gpus.yaml nic_usd, and the fabric's). The NVLink
domain is the GPU system's (gpus.yaml: an NVL72 rack's price and power already hold its 9 NVLink switch
trays, X13/S66). A design that sets ``scaleup_size`` beyond its system's (``scaleup_size`` >
``server_gpus``: a 72-GPU domain of HGX B200s) is a what-if, not a product:
it pays NVLink switches for the extension at ``scaleup_switch_usd_per_gpu`` and ``_w_per_gpu`` per GPU
(prices.yaml, an NVL72's trays per GPU). Power counts switches and the switch-side transceivers; the NIC
and its transceiver draw from the server's power budget (gpus.yaml server_w_per_gpu).
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Topology", "down_ports", "fat_tree_capacity", "fat_tree", "scaleout_bw", "scaleout_latency_s"]

#: fat trees of up to this many tiers are sized (k=64: 4 tiers hold 2 million endpoints)
MAX_TIERS = 6


def down_ports(radix, oversubscription):
    """Leaf ports facing GPUs: floor(k*o/(1+o)) with o >= 1 (k/2 when non-blocking)."""
    o = np.maximum(np.asarray(oversubscription, dtype=np.float64), 1.0)
    return np.floor(radix * o / (1.0 + o))


def fat_tree_capacity(radix, tiers, oversubscription=1.0):
    """Most endpoints a fat tree of ``tiers`` tiers holds: k for one, k*(k/2)^(t-2)*d for t >= 2."""
    k = np.asarray(radix, dtype=np.float64)
    t = np.asarray(tiers, dtype=np.float64)
    d = down_ports(k, oversubscription)
    return np.where(t <= 1, k, k * (k / 2.0) ** np.maximum(t - 2.0, 0.0) * d)


def fat_tree(endpoints, radix, oversubscription=1.0) -> dict[str, np.ndarray]:
    """Switch and cable counts of the smallest fat tree for ``endpoints`` (see the module doc)."""
    n = np.asarray(endpoints, dtype=np.float64)
    k = np.asarray(radix, dtype=np.float64)
    d = down_ports(k, oversubscription)
    u = k - d
    half = k / 2.0
    tiers = 2.0 - (n <= k)  # one switch, or a leaf layer and more
    cap = k * d
    growing = bool(np.all(k >= 2.0))  # each level holds at least as many endpoints as the one below
    for level in range(2, MAX_TIERS):  # a handful of tree levels, each over whole columns
        more = n > cap
        if growing:  # a row that outgrows this level outgrew every one below: it has `level` tiers so far
            if not more.any():
                break  # every row fits: the larger trees above change nothing
            tiers = tiers + more
        else:
            tiers = np.where(more, level + 1.0, tiers)
        cap = cap * half
    one = tiers <= 1
    three = tiers >= 3
    leaf = np.where(one, 1.0, np.ceil(n / d))
    up = np.where(one, 0.0, leaf * u)
    middle = np.ceil(up / half)
    top = np.ceil(up / k)
    spine = np.where(tiers == 2, top, np.where(three, middle, 0.0))
    core = np.where(three, top + (tiers - 3.0) * middle, 0.0)
    return {
        "tiers": tiers, "down": d, "up": u,
        "leaf": leaf, "spine": spine, "core": core,
        "links_leaf": n, "links_spine": up, "links_core": np.where(three, (tiers - 2.0) * up, 0.0),
    }


def scaleout_bw(c, cal) -> np.ndarray:
    """Bytes/s per GPU per direction a ring collective leaving the scale-up domain sees (no uplink penalty)."""
    return c["nic_gbyte_s"] * 1e9 * cal.scaleout_eff * c["net_eff_rel"]


def scaleout_latency_s(c, cal) -> np.ndarray:
    """Per-message latency across the fabric: NCCL's network latency (S28) plus the switch hops and what the
    transport adds over InfiniBand's (a cloud fabric kind, instances.yaml)."""
    return cal.scaleout_latency_s + c["net_hop_latency_s"] * c["net_hops"] + c["net_transport_latency_s"]


class Topology(Model):
    requires = (
        "n_gpus", "scaleup_size", "oversubscription", "nic_gbyte_s", "net_switch_radix", "net_eff_rel",
        "net_hop_latency_s", "net_transport_latency_s", "net_switch_usd", "net_switch_w", "net_optic_usd", "net_optic_w", "net_cable_usd",
        "net_nic_usd", "server_gpus", "scaleup_switch_usd_per_gpu", "scaleup_switch_w_per_gpu",
    )
    provides = {
        "net_tiers": "count; switch tiers of the scale-out fat tree (1 = one switch)",
        "net_leaf_switches": "count; leaf switches",
        "net_spine_switches": "count; second-tier switches",
        "net_core_switches": "count; switches above the spine (third tier and up)",
        "net_switches": "count; all scale-out switches",
        "net_switch_ports": "count; switch ports installed (switches x radix)",
        "net_links": "count; cables (GPU-leaf plus every inter-switch layer)",
        "net_transceivers": "count; optical port-ends (two per cable)",
        "net_oversub": "ratio; leaf down/up ports as built (>= 1)",
        "net_oversub_seen": "ratio; oversubscription the job's scale-out traffic meets (1 inside one leaf)",
        "net_hops": "count; switch hops on the job's longest scale-out path",
        "net_bw_out_gbyte_s": "GB/s; scale-out bandwidth per GPU per direction a ring collective sees",
        "net_bw_cross_gbyte_s": "GB/s; scale-out bandwidth per GPU per direction all-to-all and pipeline sends see",
        "net_latency_s": "s; scale-out latency per message a collective sees",
        "net_capex_switch_usd": "USD; scale-out switches",
        "net_capex_optics_usd": "USD; transceivers and cables",
        "net_capex_nic_usd": "USD; one NIC per GPU",
        "net_capex_scaleup_usd": "USD; what-if NVLink switches where scaleup_size exceeds the system's",
        "net_capex_usd": "USD; the fabric (sum of net_capex_*)",
        "net_power_w": "W; switches, switch-side transceivers and any what-if NVLink switches",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        k = c["net_switch_radix"]
        tree = fat_tree(n, k, c["oversubscription"])
        tiers, d, u = tree["tiers"], tree["down"], tree["up"]
        switches = tree["leaf"] + tree["spine"] + tree["core"]
        above = tree["links_spine"] + tree["links_core"]
        links = n + above
        single = tiers <= 1
        oversub = np.where(single, 1.0, d / u)
        # rail-optimized: one leaf joins d scale-up domains of one rail (S45/S46)
        domains = np.ceil(n / np.maximum(c["scaleup_size"], 1.0))
        in_leaf = single | (domains <= d)
        seen = np.where(in_leaf, 1.0, oversub)
        hops = np.where(in_leaf, 1.0, 2.0 * tiers - 1.0)
        feed = {"nic_gbyte_s": c["nic_gbyte_s"], "net_eff_rel": c["net_eff_rel"],
                "net_hop_latency_s": c["net_hop_latency_s"], "net_hops": hops,
                "net_transport_latency_s": c["net_transport_latency_s"]}
        ring = scaleout_bw(feed, cal) / 1e9
        extend = c["scaleup_size"] > c["server_gpus"]  # NaN server_gpus compares False: nothing added
        two_links = 2.0 * links  # a transceiver at both ends of every cable
        cap_switch = switches * c["net_switch_usd"]
        cap_optics = two_links * c["net_optic_usd"] + links * c["net_cable_usd"]
        cap_nic = n * c["net_nic_usd"]
        cap_scaleup = np.where(extend, n * c["scaleup_switch_usd_per_gpu"], 0.0)
        power = (switches * c["net_switch_w"] + (n + 2.0 * above) * c["net_optic_w"]
                 + np.where(extend, n * c["scaleup_switch_w_per_gpu"], 0.0))
        return {
            "net_tiers": tiers,
            "net_leaf_switches": tree["leaf"],
            "net_spine_switches": tree["spine"],
            "net_core_switches": tree["core"],
            "net_switches": switches,
            "net_switch_ports": switches * k,
            "net_links": links,
            "net_transceivers": two_links,
            "net_oversub": oversub,
            "net_oversub_seen": seen,
            "net_hops": hops,
            "net_bw_out_gbyte_s": ring,
            "net_bw_cross_gbyte_s": ring / seen,
            "net_latency_s": scaleout_latency_s(feed, cal),
            "net_capex_switch_usd": cap_switch,
            "net_capex_optics_usd": cap_optics,
            "net_capex_nic_usd": cap_nic,
            "net_capex_scaleup_usd": cap_scaleup,
            "net_capex_usd": cap_switch + cap_optics + cap_nic + cap_scaleup,
            "net_power_w": power,
        }
