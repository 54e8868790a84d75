"""Sourced catalogs (GPU systems, models, networks, storage, prices, cloud instances) and their expansion into design-table columns.

Each number in ``gpus.yaml``, ``models.yaml``, ``networks.yaml``, ``storage.yaml`` and ``prices.yaml``
carries its source; ``SOURCES.md`` lists them. A table row names a catalog id (``gpu: h100-sxm``,
``model: llama3-70b``, ``network: ib-ndr-400``, ``storage: pfs-large``) and gets that entry's numeric
columns, except where the table already has the column: that is a what-if override (``gpu_hbm_tbyte_s: 8``).

GPUs are systems: each ``gpus.yaml`` entry is the GPU as sold in one platform (``system``: an HGX/DGX
8-GPU server, a GB200/GB300 NVL72 rack), which fixes its NVLink domain (``scaleup_size``), its NIC
(``nic_gbyte_s``), its price, power and, for liquid-cooled racks, its facility price per MW. A table that
sets ``scaleup_size`` beyond the system's own asks a what-if: NVLink switches that extend the domain
(priced by objectives.training.topology).

Networks: a row that names a network gets its fabric (switches, optics, NICs) and runs each GPU at
min(system NIC, fabric port ``net_port_gbyte_s``), unless the table gives ``nic_gbyte_s``; its one NIC per GPU
costs the dearer of the system's (``nic_usd``) and the fabric's (``net_nic_usd``). A row that names none
(or leaves the cell blank) is costed as its GPU's natural fabric (:func:`natural_network`: InfiniBand at
the GPU's NIC speed) and keeps the training model's calibrated network in the step-time model: its NIC
speed stays the GPU's and its switch-hop latency is 0 (the calibrated NCCL latency stands for the whole
path). A removed id (:data:`REMOVED`) is an InputError that names what to use instead. Storage: a row
that names none gets :data:`DEFAULT_STORAGE`. ``prices.yaml`` holds the defaults of the economic and
operating columns (:func:`operating_defaults`). Cloud instances (``instances.yaml``, :mod:`objectives.catalog.instances`):
a row that rents one gets its GPU, fabric, NVLink domain, line rate and price (:func:`label_instances` on
the table's labels, then :func:`instance_columns` here, before the GPU and the network expand).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import yaml

from objectives.catalog.estimates import RANGE_COLUMNS, RANGE_DEFAULTS, clear_given, range_columns
from objectives.catalog.instances import (
    INSTANCE_FIELDS,
    SPOT_FIELDS,
    instance_columns,
    instance_ids,
    instances,
    label_instances,
    provider_labels,
)
from objectives.catalog.model_names import model_row, with_names
from objectives.catalog.offers import rental_offers
from objectives.table import InputError, factorize, is_constant

__all__ = ["INSTANCE_FIELDS", "SPOT_FIELDS", "instances", "instance_ids", "label_instances", "provider_labels", "GPU_FIELDS",
           "MODEL_FIELDS", "MODEL_FIELD_DEFAULTS", "NETWORK_FIELDS", "STORAGE_FIELDS", "DEFAULT_STORAGE", "REMOVED", "gpus",
           "models", "networks", "storage", "gpu_ids", "model_ids", "network_ids", "storage_ids",
           "operating_defaults", "natural_network", "expand", "RANGE_COLUMNS", "RANGE_DEFAULTS"]

HERE = Path(__file__).parent

GPU_FIELDS = (
    "gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s",
    "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4", "gpu_attn_eff_fa2", "gpu_attn_eff_fa3",
    "gpu_exp_tera_s", "gpu_hbm_gb", "gpu_hbm_tbyte_s", "scaleup_size", "scaleup_gbyte_s", "scaleup_mesh", "host_grace",
    "nic_gbyte_s", "nic_usd", "gpu_tdp_w",
    "server_usd_per_gpu", "server_w_per_gpu", "server_gpus", "cloud_usd_per_gpu_hr", "facility_usd_per_mw",
)
NETWORK_FIELDS = (
    "net_port_gbyte_s", "net_switch_radix", "net_eff_rel", "net_hop_latency_s", "net_switch_usd",
    "net_switch_w", "net_optic_usd", "net_optic_w", "net_cable_usd", "net_nic_usd",
)
STORAGE_FIELDS = (
    "storage_unit_tb", "storage_unit_read_gbyte_s", "storage_unit_write_gbyte_s", "storage_unit_usd", "storage_unit_w",
    "storage_cloud_usd_per_tb_month",
)
#: the storage a row gets when it names none
DEFAULT_STORAGE = "pfs-large"
#: natural fabric by the GPU's NIC speed (GB/s per GPU): up to 25 -> 200G, up to 50 -> 400G, above -> 800G
_NATURAL = ((25.0, "ib-ndr-200"), (50.0, "ib-ndr-400"), (np.inf, "ib-xdr-800"))
#: ids taken out of a catalog -> what to use instead (one InputError line)
REMOVED = {
    "network": {
        "nvl72-ib-xdr-800": "was removed: a 72-GPU NVLink domain belongs to the GPU's system, not to the "
                            "scale-out network; use gpu: gb200 or gb300 with network: ib-xdr-800, or keep the "
                            "GPU and set scaleup_size: 72 as a what-if (NVLink switches priced per GPU)",
    },
}
MODEL_FIELDS = (
    "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind", "vocab_size",
    "seq_len", "moe_experts", "moe_topk", "tied_embeddings",
    # multi-head latent attention (DeepSeek-V2/V3, Kimi K2); 0 = not used
    "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim", "v_head_dim",
    # MoE extras: shared experts, leading dense layers and their width, every k-th layer MoE
    "moe_shared_experts", "moe_dense_layers", "dense_d_ff", "moe_layer_freq",
    # windowed attention: window (or chunk) in tokens, share of layers windowed, sliding or chunked
    "attn_window", "attn_window_frac", "attn_window_kind",
)
#: model fields an entry may leave out, and what that means (0: not used)
MODEL_FIELD_DEFAULTS: dict[str, float] = dict.fromkeys(
    ("moe_experts", "moe_topk", "tied_embeddings", "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim",
     "v_head_dim", "moe_shared_experts", "moe_dense_layers", "dense_d_ff", "moe_layer_freq", "attn_window",
     "attn_window_frac", "attn_window_kind"), 0.0)


#: libyaml's safe loader where PyYAML was built with it (the same safe subset, about 10x faster)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _load(name: str, key: str) -> dict:
    """``key``'s mapping in the catalog file ``name`` (safe YAML: no tags beyond the standard ones)."""
    return yaml.load((HERE / name).read_text(), Loader=_LOADER)[key]


def _value(entry):
    """A catalog field is {value, source, confidence} or a bare value; None means 'not supported'."""
    v = entry.get("value") if isinstance(entry, dict) else entry
    if v is None:
        return np.nan
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        return v
    return float(v)


@functools.cache
def gpus() -> dict[str, dict[str, float]]:
    """GPU id -> {field: value} (NaN where the GPU lacks a precision), with the ranges of its announced and
    estimated figures and its announced flag (:mod:`objectives.catalog.estimates`)."""
    raw = _load("gpus.yaml", "gpus")
    out = {gid: {**{f: _value(spec.get(f)) for f in GPU_FIELDS}, **range_columns(spec)} for gid, spec in raw.items()}
    for row in out.values():  # no architecture-tuned attention measured: the portable kernel's figure holds
        if np.isnan(row["gpu_attn_eff_fa3"]):
            row["gpu_attn_eff_fa3"] = row["gpu_attn_eff_fa2"]
    return out


@functools.cache
def models() -> dict[str, dict[str, float]]:
    """Model id -> {field: value}; ffn_kind encoded, d_head defaulting to d_model / n_heads."""
    raw = _load("models.yaml", "models")
    out = {}
    for mid, spec in raw.items():  # each entry's {value, source} read, then encoded as a config's (model_names)
        out[mid] = model_row({f: _value(spec.get(f)) for f in MODEL_FIELDS})
    return out


@functools.cache
def networks() -> dict[str, dict[str, float]]:
    """Network id -> {field: value}."""
    raw = _load("networks.yaml", "networks")
    return {nid: {f: _value(spec.get(f)) for f in NETWORK_FIELDS} for nid, spec in raw.items()}


@functools.cache
def storage() -> dict[str, dict[str, float]]:
    """Storage id -> {field: value}."""
    raw = _load("storage.yaml", "storage")
    return {sid: {f: _value(spec.get(f)) for f in STORAGE_FIELDS} for sid, spec in raw.items()}


@functools.cache
def operating_defaults() -> dict[str, float]:
    """prices.yaml: column -> default value (energy, facility, amortization, reliability, checkpoints)."""
    raw = _load("prices.yaml", "defaults")
    return {name: _value(entry) for name, entry in raw.items()}


def _natural_index(nic_gbyte_s: np.ndarray) -> np.ndarray:
    """Index into _NATURAL of each row's natural fabric (by NIC speed; NaN -> the fastest)."""
    nic = np.asarray(nic_gbyte_s, dtype=np.float64)
    index = np.full(nic.shape, len(_NATURAL) - 1, dtype=np.intp)
    for limit, _ in _NATURAL[:-1]:  # a row at or under a limit is at least one fabric slower
        index -= nic <= limit
    return index


def natural_network(nic_gbyte_s: np.ndarray) -> np.ndarray:
    """The fabric a GPU ships for: InfiniBand at its NIC speed (object array of network ids)."""
    return np.array([nid for _, nid in _NATURAL], dtype=object)[_natural_index(nic_gbyte_s)]


def gpu_ids() -> list[str]:
    return sorted(gpus())


def model_ids() -> list[str]:
    return sorted(models())


def network_ids() -> list[str]:
    return sorted(networks())


def storage_ids() -> list[str]:
    return sorted(storage())


def _expand_one(cols: dict, key: str, catalog: dict, fields: tuple[str, ...], strict: bool,
                distinct: dict | None = None) -> dict:
    if is_constant(cols[key]):  # one id for every row: expand once, broadcast
        n = len(cols[key])
        one = _expand_one({k: np.asarray(v[:1]) for k, v in cols.items() if k == key or (k in fields and is_constant(v))},
                          key, catalog, fields, strict)
        return {f: (np.broadcast_to(v, (n,)) if f not in cols or is_constant(cols[f]) else
                    np.where(np.isnan(np.asarray(cols[f], dtype=np.float64)), v[0], cols[f]))
                for f, v in one.items()}
    codes, uniq = factorize(cols[key])  # by distinct labels: fast on 1M repeated labels; a blank cell gets -1
    uniq = [str(u) for u in uniq] + ["(blank)"]  # code -1 indexes the last entry
    present = uniq if (codes < 0).any() else uniq[:-1]
    unknown = [u for u in present if u not in catalog]
    nan_row = dict.fromkeys(fields, np.nan)
    if unknown and strict:
        row = int(np.argmax(codes == (uniq.index(unknown[0]) if unknown[0] != "(blank)" else -1)))
        raise InputError(f"unknown {key} '{unknown[0]}'; known: {', '.join(sorted(catalog))}", column=key, row=row)
    luts = np.array([[catalog.get(u, nan_row)[f] for u in uniq] for f in fields], dtype=np.float64)
    values = _gather(luts, codes, len(present))
    if distinct is not None:
        distinct.update((f, (v, lut[:len(present)])) for f, v, lut in zip(fields, values, luts) if f not in cols)
    return _override(values, fields, cols)


def _gather(luts: np.ndarray, codes: np.ndarray, used: int) -> list[np.ndarray]:
    """Each row of ``luts`` (a field's value per distinct id) by row of the table, every field in one pass;
    a field that takes one value over the ids in use (``luts[:, :used]``) stays a constant view."""
    first = luts[:, :1]
    same = ((luts[:, :used] == first) | (np.isnan(luts[:, :used]) & np.isnan(first))).all(axis=1)
    varying = iter(luts[~same].take(codes, axis=1))
    return [np.broadcast_to(lut[0], codes.shape) if one else next(varying) for lut, one in zip(luts, same)]


def _override(values: list[np.ndarray], fields: tuple[str, ...], cols: dict) -> dict:
    """Catalog values where the table gives none: a table value is a what-if override of its row."""
    new = dict(zip(fields, values))
    for f in fields:
        if f in cols:
            given = np.asarray(cols[f], dtype=np.float64)
            new[f] = np.where(np.isnan(given), new[f], given)
    return new


def _id_codes(cols: dict, key: str, catalog: dict) -> np.ndarray:
    """Index into list(catalog) of each row's id, -1 where the cell is blank or the column absent.

    Works on the distinct labels only (pandas factorize), and keeps a constant column constant.
    """
    n = len(next(iter(cols.values())))
    given = cols.get(key)
    if given is None:
        return np.broadcast_to(np.intp(-1), (n,))
    names = list(catalog)
    if is_constant(given):
        one = _id_codes({key: np.asarray(given[:1])}, key, catalog)
        return np.broadcast_to(one, (n,))
    inverse, uniq = factorize(np.asarray(given))  # blank (None/NaN) cells get -1
    lut = np.full(len(uniq) + 1, -1, dtype=np.intp)  # the last entry serves code -1
    for i, u in enumerate(uniq):  # distinct labels, not rows
        label = str(u).strip()
        if label in ("", "nan", "None"):
            continue
        if label not in catalog:
            row = int(np.argmax(inverse == i))
            if label in REMOVED.get(key, {}):
                raise InputError(f"{key} '{label}' {REMOVED[key][label]}", column=key, row=row)
            raise InputError(f"unknown {key} '{label}'; known: {', '.join(sorted(catalog))}", column=key, row=row)
        lut[i] = names.index(label)
    return lut.take(inverse)


def _lookup(codes: np.ndarray, catalog: dict, fields: tuple[str, ...], cols: dict) -> dict:
    """Each field's catalog value by row (codes index list(catalog)); a table value overrides it."""
    luts = np.array([[entry[f] for entry in catalog.values()] for f in fields], dtype=np.float64)
    if is_constant(codes):
        return _override([np.broadcast_to(lut[codes[0]], codes.shape) for lut in luts], fields, cols)
    return _override(list(luts.take(codes, axis=1)), fields, cols)  # every field in one gather


def _rowwise(fn, n: int, *columns) -> np.ndarray:
    """``fn`` over n-row columns (or scalars); a constant result stays a constant view when every input is one."""
    arrays = [np.broadcast_to(np.asarray(c), (n,)) for c in columns]
    if all(is_constant(a) or n <= 1 for a in arrays):
        return np.broadcast_to(fn(*(a[:1] for a in arrays)), (n,))
    return fn(*arrays)


def _expand_network(cols: dict, out: dict) -> dict:
    """Network columns of every row: the named fabric, or the GPU's natural one (see the module doc); a
    named fabric runs each GPU at min(system NIC, fabric port) unless the table gives ``nic_gbyte_s``."""
    n = len(next(iter(cols.values())))
    catalog = networks()
    codes = _id_codes(cols, "network", catalog)
    named = codes >= 0
    if not named.all():
        if "nic_gbyte_s" not in out:
            return {}  # no GPU and no NIC speed: prepare() reports the missing nic_gbyte_s
        names = list(catalog)
        to_catalog = np.array([names.index(nid) for _, nid in _NATURAL], dtype=np.intp)
        nic = out["nic_gbyte_s"]
        if is_constant(nic) and is_constant(codes):
            natural = np.broadcast_to(to_catalog[_natural_index(nic[:1])], (n,))
            codes = natural if not named[0] else codes
        else:
            natural = to_catalog.take(_natural_index(nic))
            codes = np.where(named, codes, natural) if named.any() else natural
    hop_latency = cols.get("net_hop_latency_s")
    keep = named | (np.isfinite(np.asarray(hop_latency, dtype=np.float64)) if hop_latency is not None else False)
    fields = NETWORK_FIELDS if keep.any() else tuple(f for f in NETWORK_FIELDS if f != "net_hop_latency_s")
    res = _lookup(codes, catalog, fields, cols)
    if named.any():  # the lesser of the system's NIC and the fabric's port (a missing one defers to the other)
        system = out["nic_gbyte_s"] if "nic_gbyte_s" in out else np.nan
        given = np.isfinite(np.asarray(cols["nic_gbyte_s"], dtype=np.float64)) if "nic_gbyte_s" in cols else False
        res["nic_gbyte_s"] = _rowwise(lambda s, p, code, g: np.where((code >= 0) & ~g, np.fmin(s, p), s), n, system,
                                   res["net_port_gbyte_s"], codes, given)
    if "nic_usd" in out:  # one NIC per GPU: the dearer of the system's own and the fabric's; a table's stays
        given = np.isfinite(np.asarray(cols["net_nic_usd"], dtype=np.float64)) if "net_nic_usd" in cols else False
        res["net_nic_usd"] = _rowwise(lambda f, s, g: np.where(g, f, np.fmax(f, s)), n, res["net_nic_usd"],
                                      out["nic_usd"], given)
    if not keep.all():  # unnamed rows: the calibrated NCCL latency covers the path
        res["net_hop_latency_s"] = np.where(keep, res["net_hop_latency_s"], 0.0) if keep.any() \
            else np.broadcast_to(0.0, (n,))
    return {f: res[f] for f in NETWORK_FIELDS + ("nic_gbyte_s",) if f in res}  # in catalog order


def expand(cols: dict, distinct: dict | None = None) -> dict:
    """Columns with every catalog id (``gpu``, ``model``, ``network``, ``storage``) expanded; returns a new
    dict, input untouched. Rows without a network or storage get their defaults (module doc).

    ``distinct``, if given, receives ``field -> (column, values)`` for each model and GPU column gathered
    from the catalog: the few values its rows take (checking those checks every row)."""
    out = dict(cols)
    if not cols:
        return out
    rented = instance_columns(cols)  # an instance's numbers, as if the table gave them (its own values win)
    instance_price = rented.pop("instance_usd_per_gpu_hr", None)
    if rented:
        cols = {**cols, **rented}
        out.update(rented)
    if "model" in cols:
        # a model name outside the catalog is fine when the row spells out its architecture
        spelled_out = all(f in cols for f in ("n_layers", "d_model", "n_heads", "d_ff", "vocab_size"))
        known = with_names(cols["model"], models(), strict=not spelled_out)  # aliases, config.json paths (model_names)
        out.update(_expand_one(cols, "model", known, MODEL_FIELDS, strict=not spelled_out, distinct=distinct))
    if "gpu" in cols:  # the fields, their ranges (a row giving a field fixes it: no range there)
        gpu = _expand_one(cols, "gpu", gpus(), GPU_FIELDS + RANGE_COLUMNS, strict=True, distinct=distinct)
        out.update(gpu)
        out.update(clear_given(gpu, cols))
    if instance_price is not None:  # a renting row pays its instance's price (NaN: none published), not the GPU's
        given = np.asarray(cols.get("cloud_usd_per_gpu_hr", np.nan), dtype=np.float64)
        price = np.where(np.isnan(given), instance_price, given)
        fallback = out.get("cloud_usd_per_gpu_hr", np.nan)
        out["cloud_usd_per_gpu_hr"] = _rowwise(lambda code, p, f: np.where(code > 0, p, f), len(instance_price),
                                               cols["instance"], price, fallback)
    if "gpu" in cols:  # the rental an owned design is weighed against (objectives.economics.breakeven)
        out.update(rental_offers(cols["gpu"], cols.get("n_gpus"), out["cloud_usd_per_gpu_hr"],
                                 cols.get("rental_instance"), cols.get("rental_usd_per_gpu_hr")))
    out.update(_expand_network(cols, out))
    codes = _id_codes(cols, "storage", storage())
    if not (codes >= 0).all():
        default = np.intp(list(storage()).index(DEFAULT_STORAGE))
        codes = np.broadcast_to(default, codes.shape) if is_constant(codes) or "storage" not in cols \
            else np.where(codes >= 0, codes, default)
    out.update(_lookup(codes, storage(), STORAGE_FIELDS, cols))
    return out
