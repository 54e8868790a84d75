"""Cloud instances (``instances.yaml``): what a design that rents one gets, and what it pays by ``pricing``.

A row names ``instance: <provider>-<instance>`` (``aws-p5.48xlarge``, ``gcp-a3-megagpu-8g``, ...) to rent,
or ``owned`` (the default; also a blank cell) to buy the cluster. A renting row is the instance's, whatever
the row's own ``gpu``, ``network`` and ``cost_mode`` say (:func:`label_instances`, on the table's labels):
its GPU (a gpus.yaml id), the fabric whose tiers stand in for the cloud's (none: the GPU's natural one),
and ``cost_mode: cloud``. Its numbers (:data:`INSTANCE_FIELDS`, :func:`instance_columns`) are defaults the
table may override, as a catalog id's are: the NVLink domain (``scaleup_size``), the scale-out line rate
per GPU (``nic_gbyte_s``; where the source gives none, the GPU system's NIC stands in), the fabric kind's
efficiency and extra per-message latency (``fabrics`` in instances.yaml, sourced), GPUs billed per
instance, the provider's managed file system and object store per TB-month (where published; else
storage.yaml's price), and ``cloud_usd_per_gpu_hr`` at the row's ``pricing`` (``on_demand``,
``reserved_1y``, ``reserved_3y``, ``spot``: spot, preemptible or AWS Capacity Block). A price the catalog
does not have stays NaN: the row is infeasible with the reason "no published price" (objectives.economics.rental),
never priced by a number the source does not give. ``rental_max_gpus``: the largest cluster the provider
advertises at that pricing (AWS Capacity Blocks: 256 instances; OCI and Azure zettascale fabrics), inf
where none is stated; one instance's GPUs where the source publishes no cluster fabric at all (Lambda:
``one_instance``; objectives.reasons says so). ``preemptible``: 1 where the row's capacity can be reclaimed,
``pricing: spot`` on an instance whose ``spot_kind`` is ``spot`` (GCP, Azure, CoreWeave; an AWS Capacity
Block is reserved, 0), with its provider's preemption figures (:data:`SPOT_FIELDS`, instances.yaml
``providers``; objectives.training.reliability). Each published price has its kind (:data:`PRICE_KINDS`) and the date
its source was read (``prices_read``; None: not stated); gpus.yaml's are market estimates (:data:`GPU_CLOUD_PRICE`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import yaml

from objectives.table import CATEGORIES, Columns, InputError, encode, is_constant

__all__ = ["INSTANCE_FIELDS", "SPOT_FIELDS", "PRICINGS", "PRICE_KINDS", "GPU_CLOUD_PRICE", "instances", "fabrics",
           "providers", "instance_ids", "provider_labels", "label_instances", "instance_columns"]

HERE = Path(__file__).parent
#: the numeric columns an instance sets (a table's own value wins)
INSTANCE_FIELDS = ("scaleup_size", "nic_gbyte_s", "net_eff_rel", "net_transport_latency_s", "instance_gpus",
                   "storage_cloud_usd_per_tb_month", "storage_object_usd_per_tb_month")
#: a provider's spot preemption figures (instances.yaml ``providers``; NaN: it rents nothing preemptible), each
#: with its range's ends; they act on a row's preemptible capacity only (:func:`instance_columns`)
SPOT_FIELDS = tuple(f"{name}{end}" for name in ("spot_preempt_mtbi_h_per_node", "spot_reacquire_s")
                    for end in ("", "_lo", "_hi"))
PRICINGS = CATEGORIES["pricing"]
#: what a catalog price is (instances.yaml ``price_kind``)
PRICE_KINDS = {"list": "the provider's published on-demand or commitment (reserved, savings plan) price",
               "spot": "the provider's published spot or preemptible price",
               "capacity_block": "the provider's published Capacity Block price (reserved ahead, not preempted)",
               "market_estimate": "a third-party market figure or an estimate, not the provider's price"}
#: gpus.yaml's ``cloud_usd_per_gpu_hr`` (a cloud row naming no instance): market figures of specialty clouds
#: and estimates from them, dated by month or year in their sources at best
GPU_CLOUD_PRICE = {"kind": "market_estimate", "read": None}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _value(entry, key="value"):
    v = entry.get(key) if isinstance(entry, dict) else entry
    return np.nan if v is None else float(v)


def _spot(spec: dict) -> dict[str, float]:
    """A provider's :data:`SPOT_FIELDS` (NaN where it gives none)."""
    out = {}
    for name in ("spot_preempt_mtbi_h_per_node", "spot_reacquire_s"):
        entry = spec.get(name)
        for end, key in (("", "value"), ("_lo", "lo"), ("_hi", "hi")):
            out[name + end] = _value(entry, key) if entry is not None else np.nan
    return out


@functools.cache
def _raw() -> dict:
    return yaml.load((HERE / "instances.yaml").read_text(), Loader=_LOADER)


@functools.cache
def fabrics() -> dict[str, dict[str, float]]:
    """Fabric kind -> {net_eff_rel, net_transport_latency_s}."""
    return {k: {f: _value(v[f]) for f in ("net_eff_rel", "net_transport_latency_s")} for k, v in _raw()["fabrics"].items()}


@functools.cache
def providers() -> dict[str, dict]:
    """Provider id -> its name, storage prices per TB-month and spot preemption figures (NaN: not published)."""
    return {k: {"name": v["name"], **{f: _value(v[f]) for f in ("storage_cloud_usd_per_tb_month",
                                                                "storage_object_usd_per_tb_month")},
                **_spot(v)}
            for k, v in _raw()["providers"].items()}


@functools.cache
def instances() -> dict[str, dict]:
    """Instance id -> {gpu, network, provider, fabric, every field of INSTANCE_FIELDS and SPOT_FIELDS, prices:
    per pricing (NaN: not published), max_gpus: per pricing (inf: none stated), preemptible: per pricing (1:
    its spot is reclaimable), one_instance (no cluster fabric published: max_gpus is one instance's),
    price_kind and prices_read: pricing -> a PRICE_KINDS key and an ISO date (None: not published, or no date
    stated), and the entry's text: name, fabric_name, topology, prices_source, spot_kind, confidence}, in the
    catalog's order."""
    out = {}
    for iid, spec in _raw()["instances"].items():
        fabric = fabrics().get(spec["fabric"], dict.fromkeys(("net_eff_rel", "net_transport_latency_s"), np.nan))
        store = providers()[spec["provider"]]
        largest = _value(spec.get("max_cluster_gpus"))
        largest = np.inf if np.isnan(largest) else largest
        spot_max = _value(spec.get("spot_max_gpus"))
        kinds, read = spec.get("price_kind") or {}, spec.get("prices_read") or {}
        row = {
            "gpu": spec["gpu"], "network": spec["network"], "provider": spec["provider"], "fabric": spec["fabric"],
            **{k: spec.get(k) for k in ("name", "fabric_name", "topology", "prices_source", "spot_kind", "confidence")},
            "scaleup_size": _value(spec["scaleup_size"]),
            "nic_gbyte_s": _value(spec["scaleout_gbit_s_per_gpu"]) / 8.0,  # line rate Gbit/s -> GB/s per direction
            **fabric,
            "instance_gpus": float(spec["gpus_per_instance"]),
            **{f: store[f] for f in ("storage_cloud_usd_per_tb_month", "storage_object_usd_per_tb_month")},
            **{f: store[f] for f in SPOT_FIELDS},
            "prices": np.array([_value(spec["prices"][p]) for p in PRICINGS]),
            "max_gpus": np.array([min(largest, spot_max) if p == "spot" and not np.isnan(spot_max) else largest
                                  for p in PRICINGS]),
            "preemptible": np.array([float(p == "spot" and spec.get("spot_kind") == "spot") for p in PRICINGS]),
            "one_instance": bool((spec.get("max_cluster_gpus") or {}).get("one_instance", False)),
            "price_kind": {p: kinds.get(p) for p in PRICINGS},
            "prices_read": {p: None if read.get(p) is None else str(read[p]) for p in PRICINGS},
        }
        out[iid] = row
    return out


def instance_ids() -> list[str]:
    return sorted(instances())


def _luts() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per field (INSTANCE_FIELDS, SPOT_FIELDS), its value by instance code (code 0, owned: NaN); the price,
    largest cluster and preemptible flag by (code, pricing)."""
    rows = [None, *instances().values()]
    fields = {f: np.array([np.nan if r is None else r[f] for r in rows]) for f in INSTANCE_FIELDS + SPOT_FIELDS}
    blank = {"prices": np.nan, "max_gpus": np.inf, "preemptible": 0.0}
    by_pricing = {k: np.array([np.full(len(PRICINGS), v) if r is None else r[k] for r in rows])
                  for k, v in blank.items()}
    return fields, by_pricing


def _codes(values: np.ndarray) -> np.ndarray:
    """An encoded categorical column (float codes, NaN blank) as integer codes, blank as 0; a constant column
    stays a constant view."""
    v = np.asarray(values, dtype=np.float64)
    if is_constant(v):
        return np.broadcast_to(_codes(v[:1]), v.shape)
    return np.where(np.isnan(v), 0, v).astype(np.intp)


def _take(lut: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``lut[codes]``; a constant code column gives a constant view."""
    if is_constant(codes):
        return np.broadcast_to(lut[codes[0]], codes.shape)
    return lut.take(codes, axis=0)


def provider_labels(instance: np.ndarray) -> np.ndarray:
    """The provider of each row (``aws``, ``gcp``, ``azure``, ``oci``, ``coreweave``, ``lambda``; ``owned``
    for a row that rents none) from the encoded ``instance`` column, as text."""
    lut = np.array(["owned", *(r["provider"] for r in instances().values())], dtype=object)
    return _take(lut, _codes(instance))


def label_instances(user: Columns) -> Columns:
    """The table with each renting row's ``gpu``, ``network`` and ``cost_mode`` those of its instance, and
    each owned row's ``pricing`` blank (it rents nothing; a space that sweeps both gives owned designs no
    pricing to tell them apart by). A new dict; raises InputError for an instance id the catalog does not have."""
    if "instance" not in user:
        return user
    n = len(user["instance"])
    codes = _codes(encode("instance", user["instance"]))
    rented = codes > 0
    if "gpu" not in user and "gpu_bf16_tflop_s" not in user and not rented.all():  # an owned design buys its GPU
        raise InputError("is required for a design that owns its cluster (instance 'owned' or blank); a renting "
                         "design takes its instance's", column="gpu", row=int(np.argmin(rented)))
    if not rented.any():
        return user
    entries = [None, *instances().values()]
    out = dict(user)
    if "pricing" in user:
        out["pricing"] = np.where(rented, np.broadcast_to(np.asarray(user["pricing"], dtype=object), (n,)), None)
    for name, key in (("gpu", "gpu"), ("network", "network")):
        lut = np.array([None if e is None else e[key] for e in entries], dtype=object)
        given = np.broadcast_to(np.asarray(user[name], dtype=object), (n,)) if name in user else np.full(n, None, dtype=object)
        out[name] = np.where(rented, _take(lut, codes), given)
    if "cost_mode" in user and np.asarray(user["cost_mode"]).dtype.kind in "iuf":
        out["cost_mode"] = np.where(rented, 1.0, user["cost_mode"])
    else:
        given = np.broadcast_to(np.asarray(user["cost_mode"], dtype=object), (n,)) if "cost_mode" in user \
            else np.full(n, "owned", dtype=object)
        out["cost_mode"] = np.where(rented, "cloud", given)
    return out


def instance_columns(cols: dict) -> dict:
    """The numeric columns a renting row gets (:data:`INSTANCE_FIELDS`, :data:`SPOT_FIELDS`,
    ``rental_max_gpus``, ``preemptible``), each the table's own value where it gives one; and
    ``instance_usd_per_gpu_hr``, the price at its ``pricing`` (NaN: not published). A table that gives a spot
    figure without its range's ends gets that value as both ends (its what-if is a point). ``cols``: the table
    with ``instance`` and ``pricing`` encoded. Empty without an ``instance`` column."""
    if "instance" not in cols:
        return {}
    codes = _codes(cols["instance"])
    n = len(codes)
    pricing = _codes(cols["pricing"]) if "pricing" in cols else np.broadcast_to(np.intp(0), (n,))
    fields, by_pricing = _luts()
    out = {}
    for name, lut in fields.items():
        value = _take(lut, codes)
        base = name.removesuffix("_lo").removesuffix("_hi")
        given = cols.get(name, cols.get(base) if name in SPOT_FIELDS and base != name else None)
        if given is not None:  # the table's own value wins (a what-if), the instance's fills its blanks
            given = np.asarray(given, dtype=np.float64)
            value = np.where(np.isnan(given), value, given)
        out[name] = value
    if is_constant(codes) and is_constant(pricing):
        per = {k: np.broadcast_to(lut[codes[0], pricing[0]], (n,)) for k, lut in by_pricing.items()}
    else:
        codes, pricing = np.broadcast_to(codes, (n,)), np.broadcast_to(pricing, (n,))
        per = {k: lut[codes, pricing] for k, lut in by_pricing.items()}
    out["instance_usd_per_gpu_hr"] = per["prices"]
    for name, key in (("rental_max_gpus", "max_gpus"), ("preemptible", "preemptible")):
        out[name] = per[key]
        if name in cols:
            given = np.asarray(cols[name], dtype=np.float64)
            out[name] = np.where(np.isnan(given), out[name], given)
    return out
