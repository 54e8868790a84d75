"""A space's ``prices:`` key: a price file of its own, overriding the catalog's prices per GPU-hour.

    prices: my-quotes.yaml               # relative to the space file

The file maps a cloud instance id (``dse catalog instances``) to its prices by pricing, any of
``on_demand``, ``reserved_1y``, ``reserved_3y``, ``spot``, and/or a GPU id (``dse catalog gpus``) to the
``cloud_usd_per_gpu_hr`` a cloud design naming no instance pays (a quote to set beside owning), or to a
mapping that may also give ``server_usd_per_gpu``, the price per GPU of the system bought (gpus.yaml's
field: the server or rack without its scale-out NIC; a quote for a system the catalog prices otherwise or
not at all, e.g. an announced one)::

    aws-p5.48xlarge: {on_demand: 4.10, reserved_1y: 3.00}
    h100-sxm: 2.40
    vera-rubin-nvl72: {server_usd_per_gpu: 95000, usd_per_gpu_hr: 9.0}

USD per GPU-hour (USD per GPU for ``server_usd_per_gpu``), each a finite number >= 0; a price the file does not
give stays the catalog's (NaN where the catalog has none: "no published price"). An unknown id or pricing, or a
price that is negative or not a number, is one line naming the file and the key, exit 2. The designs carry the
result as their ``cloud_usd_per_gpu_hr`` column (:func:`price_column`) and, where the file gives one,
``server_usd_per_gpu`` (:func:`apply_prices`, from dse.space.Space.table and the report's re-scoring), which the
model takes over the catalog's, as any table's own value; a serving design's ``prefill_gpu`` gets the file's quotes
for that GPU as ``prefill_server_usd_per_gpu`` and ``prefill_cloud_usd_per_gpu_hr``
(objectives/serving/prefill_pool.py). The file's path, its sha256 and the
prices it gives are in the resolved space (run.json ``spec.prices``; a changed file is a changed space).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dse.errors import UserError, did_you_mean
from dse.spec.calibration import parse_calibration
from dse.spec.yaml_file import read_yaml

__all__ = ["side_files", "parse_prices", "price_column", "rental_quote_column", "server_price_column", "apply_prices"]

#: what a GPU's mapping in the file may give: the GPU-hour quote and the system's price per GPU
GPU_PRICE_KEYS = ("usd_per_gpu_hr", "server_usd_per_gpu")


def side_files(ck, top: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~dse.spec.schema.Spec` fields of the files a space names beside itself: its calibration
    and its prices (each path from the working directory and its sha256; "" where none)."""
    calibration, calibration_sha256 = parse_calibration(ck, top.get("calibration"))
    prices, prices_sha256, overrides = parse_prices(ck, top.get("prices"), top)
    return {"calibration": calibration, "calibration_sha256": calibration_sha256, "prices": prices,
            "prices_sha256": prices_sha256, "price_overrides": overrides}


def parse_prices(ck, raw, top: Mapping[str, Any]) -> tuple[str, str, dict]:
    """(the price file's path, relative to the space file, from the working directory; its sha256; the prices:
    {"instances": {id: {pricing: USD}}, "gpus": {id: USD}}); ("", "", {}) without one."""
    if raw is None:
        return "", "", {}
    if not isinstance(raw, str) or not raw.strip():
        ck.fail("prices", "must be the path of a price file (YAML: instance or GPU id -> USD per GPU-hour)")
    for part in ("workload", "cluster"):
        if isinstance(top.get(part), Mapping) and "cloud_usd_per_gpu_hr" in top[part]:
            ck.fail("prices", f"the space also gives {part}.cloud_usd_per_gpu_hr; give prices in one place")
    path = Path(raw.strip()).expanduser()
    if not path.is_absolute() and ck.source not in ("<space>", ""):
        path = Path(ck.source).parent / path
    doc, _ = read_yaml(path, what="price file")
    instances = [i for i in ck.vocab.labels.get("instance", ()) if i != "owned"]
    gpus = list(ck.vocab.catalog_ids.get("gpu", ()))
    pricings = list(ck.vocab.labels.get("pricing", ()))

    def fail(key: str, message: str):
        raise UserError(message, where=f"{path}: {key}")

    if not isinstance(doc, Mapping) or not doc:
        fail("(top)", "must map instance ids to {pricing: USD per GPU-hour} and/or GPU ids to USD per GPU-hour, "
                      "e.g. 'aws-p5.48xlarge: {on_demand: 4.1}' or 'h100-sxm: 2.4'")
    out: dict[str, dict] = {"instances": {}, "gpus": {}, "servers": {}}
    for key, value in doc.items():
        if key in instances:
            if not isinstance(value, Mapping) or not value:
                fail(key, f"must map a pricing ({', '.join(pricings)}) to USD per GPU-hour, e.g. {{on_demand: 4.1}}")
            for pricing, price in value.items():
                if pricing not in pricings:
                    fail(f"{key}.{pricing}", f"unknown pricing; valid: {', '.join(pricings)}")
                out["instances"].setdefault(key, {})[pricing] = _price(price, f"{key}.{pricing}", fail)
        elif key in gpus and isinstance(value, Mapping):
            if not value:
                fail(key, f"must give {' and/or '.join(GPU_PRICE_KEYS)}, e.g. {{server_usd_per_gpu: 95000}}")
            for what, price in value.items():
                if what not in GPU_PRICE_KEYS:
                    fail(f"{key}.{what}", f"unknown price; {did_you_mean(what, GPU_PRICE_KEYS)}valid: "
                                          f"{', '.join(GPU_PRICE_KEYS)}")
                unit = "USD per GPU" if what == "server_usd_per_gpu" else "USD per GPU-hour"
                out["servers" if what == "server_usd_per_gpu" else "gpus"][key] = _price(price, f"{key}.{what}", fail, unit)
        elif key in gpus:
            out["gpus"][key] = _price(value, key, fail)
        else:
            fail(str(key), f"unknown id; {did_you_mean(key, instances + gpus)}valid: an instance "
                           f"({', '.join(instances)}) or a GPU ({', '.join(gpus)})")
    if not out["servers"]:  # (absent otherwise, so that a file of GPU-hour prices keeps its record)
        del out["servers"]
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest(), out


def _price(value, key: str, fail, unit: str = "USD per GPU-hour") -> float:
    if isinstance(value, str):  # YAML 1.1 reads 4e0 as text
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        shown = f"{value:g}" if number else repr(str(value)[:40])
        fail(key, f"{shown} is not a price; valid: a number of {unit}, 0 or more")
    return float(value)


def price_column(table: Mapping[str, Any], overrides: Mapping[str, Mapping], n: int) -> np.ndarray | float:
    """Each design's ``cloud_usd_per_gpu_hr``: a renting row's (a catalog ``instance``) the file's price at its
    ``pricing`` (blank: on_demand), an owned or market row's the file's for its ``gpu``; the catalog's where the
    file gives none. One lookup per distinct design; a scalar where the table's instance, pricing and gpu are."""
    from objectives import catalog
    from objectives.catalog.instances import PRICINGS, instances

    names = ("instance", "pricing", "gpu")
    scalar = not any(np.ndim(table.get(k)) for k in names)
    m = 1 if scalar else n
    cells = np.stack([np.broadcast_to(np.asarray(table.get(k), dtype=object), (m,)).astype(str) for k in names], axis=1)
    keys, inverse = np.unique(cells, axis=0, return_inverse=True)
    rented, owned = overrides.get("instances", {}), overrides.get("gpus", {})

    def price(instance: str, pricing: str, gpu: str) -> float:
        if instance in instances():
            pricing = pricing if pricing in PRICINGS else "on_demand"
            given = rented.get(instance, {}).get(pricing)
            return given if given is not None else float(instances()[instance]["prices"][PRICINGS.index(pricing)])
        if gpu in owned:
            return owned[gpu]
        return float(catalog.gpus().get(gpu, {}).get("cloud_usd_per_gpu_hr", np.nan))

    per = np.array([price(*k) for k in keys], dtype=np.float64)  # per distinct (instance, pricing, gpu)
    return float(per[0]) if scalar else per[inverse.reshape(-1)]


def rental_quote_column(table: Mapping[str, Any], overrides: Mapping[str, Mapping], n: int) -> np.ndarray | None:
    """Each design's ``rental_usd_per_gpu_hr``, the rental an owned design is weighed against
    (objectives.economics.breakeven): the file's quote for its ``gpu`` where it gives one, else NaN (the model's choice:
    the cheapest published offer); None where the file quotes no GPU."""
    quotes = overrides.get("gpus", {})
    if not quotes:
        return None
    gpu = np.broadcast_to(np.asarray(table.get("gpu"), dtype=object), (n,)).astype(str)
    ids, inverse = np.unique(gpu, return_inverse=True)  # one lookup per distinct GPU
    return np.array([quotes.get(g, np.nan) for g in ids], dtype=np.float64)[inverse.reshape(-1)]


def server_price_column(table: Mapping[str, Any], overrides: Mapping[str, Mapping], n: int) -> np.ndarray | None:
    """Each design's ``server_usd_per_gpu``: the file's quote for its ``gpu`` where it gives one, else the
    table's own or the catalog's (NaN here: the model fills it from gpus.yaml); None where the file quotes no
    system price."""
    quotes = overrides.get("servers", {})
    if not quotes:
        return None
    gpu = np.broadcast_to(np.asarray(table.get("gpu"), dtype=object), (n,)).astype(str)
    ids, inverse = np.unique(gpu, return_inverse=True)
    return np.array([quotes.get(g, np.nan) for g in ids], dtype=np.float64)[inverse.reshape(-1)]


def apply_prices(out: dict[str, Any], overrides: Mapping[str, Mapping], n: int) -> dict[str, Any]:
    """``out`` (a design table of ``n`` rows) with the price file's prices as its columns: every design's
    ``cloud_usd_per_gpu_hr``, the quoted GPU-hour an owned design is weighed against (``rental_usd_per_gpu_hr``)
    and a quoted system's ``server_usd_per_gpu`` (where it quotes none, the catalog's)."""
    out = dict(out)
    out["cloud_usd_per_gpu_hr"] = price_column(out, overrides, n)
    quote = rental_quote_column(out, overrides, n)
    if quote is not None:  # a quoted GPU-hour is also what owning that GPU is weighed against
        out["rental_usd_per_gpu_hr"] = quote
    server = server_price_column(out, overrides, n)
    if server is not None:
        from objectives import catalog

        given = np.asarray(out.get("server_usd_per_gpu", np.nan), dtype=np.float64)
        gpu = np.broadcast_to(np.asarray(out.get("gpu"), dtype=object), (n,)).astype(str)
        listed = np.array([float(catalog.gpus().get(g, {}).get("server_usd_per_gpu") or np.nan) for g in gpu])
        fallback = np.where(np.isnan(given), listed, given) if np.ndim(given) else (listed if np.isnan(given) else given)
        out["server_usd_per_gpu"] = np.where(np.isnan(server), fallback, server)
    if "prefill_gpu" in out:  # a disaggregated design's prefill pool on another GPU (objectives/serving/prefill_pool.py)
        out.update(_prefill_prices(out, overrides, n))
    return out


def _prefill_prices(out: Mapping[str, Any], overrides: Mapping[str, Mapping], n: int) -> dict[str, np.ndarray]:
    """The file's quotes for each design's ``prefill_gpu`` as ``prefill_server_usd_per_gpu`` and
    ``prefill_cloud_usd_per_gpu_hr`` (NaN where it quotes none or the cell is blank: the model takes the
    catalog's, or the decode GPU's where the prefill GPU is the same); a table's own value wins."""
    label = np.broadcast_to(np.asarray(out["prefill_gpu"], dtype=object), (n,)).astype(str)
    ids, inverse = np.unique(label, return_inverse=True)  # one lookup per distinct prefill GPU
    res = {}
    for column, kind in (("prefill_server_usd_per_gpu", "servers"), ("prefill_cloud_usd_per_gpu_hr", "gpus")):
        quotes = overrides.get(kind, {})
        quoted = np.array([quotes.get(g, np.nan) for g in ids], dtype=np.float64)[inverse.reshape(-1)]
        given = np.broadcast_to(np.asarray(out.get(column, np.nan), dtype=np.float64), (n,))
        res[column] = np.where(np.isnan(given), quoted, given)
    return res
