"""A disaggregated row's prefill pool on another GPU than its decode pool (``prefill_gpu``).

Long-context prefill is compute-bound and decode bandwidth- and capacity-bound (DistServe, OSDI'24;
Splitwise, ISCA'24), so a deployment may run its prefill pool on a part built for compute: NVIDIA's Rubin CPX
(GDDR7, no NVLink; gpus.yaml rubin-cpx, X41) is announced for exactly this role beside Vera Rubin decode
racks (the Vera Rubin NVL144 CPX rack). ``prefill_gpu`` names the prefill pool's catalog GPU; blank, or the
row's own ``gpu``, the pool runs on the decode pool's GPU, the row's own columns (bit for bit the model
without the column).

Columns (:func:`prefill_gpu_columns`, at the boundary, objectives/serving/prepare.py): every catalog GPU field
``f`` (objectives.catalog.GPU_FIELDS) as ``prefill_<f>`` (``prefill_gpu_bf16_tflop_s``, ``prefill_scaleup_size``,
``prefill_server_usd_per_gpu``, ...): the prefill GPU's catalog value where it differs from ``gpu``, the
row's own (catalog, instance, price file or what-if) where it does not; a table's own ``prefill_<f>`` is a
what-if override as ``gpu``'s fields are. A differing prefill GPU's NIC runs at min(its NIC, the fabric's
port) as the decode GPU's does (objectives.catalog._expand_network). ``prefill_gpu_differs`` (1 / 0) and
``prefill_gpu_vendor`` (objectives.serving.engines.VENDORS code) go with them.

What reads them: the prefill instance's step and memory (objectives/serving/disaggregated.py: peaks, GEMM and
attention efficiencies, memory bandwidth and capacity, scale-up domain and bandwidth, host); its mapping
search (objectives/serving/prefill_search.py: tp inside the *prefill* GPU's NVLink domain, so tp 1 on a
Rubin CPX, whose domain is one GPU; a tp the row gives beyond it runs its all-reduces over the NICs,
objectives.training.collectives.Tiers, the path a CPX has: PCIe Gen6 to its ConnectX-9, X41); the KV transfer, over
the scale-out NICs at the slower side's speed, never NVLink (two GPU types share no NVLink domain: a
Rubin CPX has none, X41, and NVLink domains of one system hold one GPU type, gpus.yaml ``system``); and the
economics (objectives/serving/economics.py: the prefill GPUs priced and powered as their own systems).

``con_prefill_gpu`` (:func:`prefill_gpu_constraint`), a code, > 0 infeasible: 1 an aggregated row naming a
prefill GPU other than its own (it has no prefill pool: ``serving: disaggregated`` runs one; the choice
made here, rather than ignoring the cell, so that a sweep never shows an aggregated design labelled with a
GPU it does not pay for); 2 the engine does not run on the prefill GPU's vendor; 3 the prefill GPU has no
tensor cores for the precision or no format for the KV precision; 4 no published price for it (owned: its
``server_usd_per_gpu``; rented: its ``cloud_usd_per_gpu_hr``: objectives/economics/rental.py's con_price 1 and 2, a
price file may quote one, dse/spec/prices.py); 5 no published power (neither ``server_w_per_gpu`` nor
``gpu_tdp_w``; rental.py's con_price 3). Codes 4 and 5 are checked only on an announced prefill GPU, as
rental.py checks them.
"""

from __future__ import annotations

import numpy as np

from objectives import catalog
from objectives.columns import bad_row
from objectives.serving.engines import engine_runs, vendor_codes
from objectives.table import Columns, InputError, factorize, is_constant

__all__ = ["PREFILL_GPU_COLUMNS", "PREFILL_GPU_EXTRA", "prefill_gpu_columns", "prefill_gpu_constraint",
           "prefill_gpu_text"]

#: each catalog GPU field -> its prefill pool's column
PREFILL_GPU_COLUMNS: dict[str, str] = {f: f"prefill_{f}" for f in catalog.GPU_FIELDS}
#: the derived prefill columns beside them
PREFILL_GPU_EXTRA = ("prefill_gpu_differs", "prefill_gpu_vendor", "prefill_gpu_announced")
_BLANK = ("", "nan", "none", "null")


def prefill_gpu_columns(user: Columns, floats: Columns, n: int, defaults: dict | None = None) -> Columns:
    """The prefill pool's GPU columns (module doc) from the table's ``prefill_gpu`` labels and the row's own
    expanded columns (``floats``); a field the prefill GPU's catalog entry leaves blank takes its default
    (``defaults``: the serving table's, e.g. prices.yaml's facility_usd_per_mw for an air-cooled HGX server), as
    the row's own GPU's does. New columns only, inputs untouched. InputError for an unknown id."""
    defaults = defaults or {}
    nan = np.broadcast_to(np.nan, (n,))
    own_vendor = floats.get("gpu_vendor", nan)
    mine = {f: floats.get(f, nan) for f in PREFILL_GPU_COLUMNS}  # the row's own GPU's (a spelled-out GPU: NaN)
    out: Columns = {}
    label = user.get("prefill_gpu")
    if label is None:  # no such column: the decode GPU's columns themselves (no copy)
        for f, name in PREFILL_GPU_COLUMNS.items():
            out[name] = mine[f] if name not in floats else np.where(np.isnan(floats[name]), mine[f], floats[name])
        out.update(prefill_gpu_differs=np.broadcast_to(0.0, (n,)), prefill_gpu_vendor=own_vendor,
                   prefill_gpu_announced=floats.get("gpu_announced", np.broadcast_to(0.0, (n,))))
        return out
    label = np.broadcast_to(np.asarray(label, dtype=object), (n,))
    codes, distinct = factorize(np.asarray(label[:1]) if is_constant(label) else label)
    names = [str(d).strip() for d in distinct]
    known = catalog.gpus()
    for i, name in enumerate(names):  # by distinct label, never by row
        if name.lower() not in _BLANK and name not in known:
            raise InputError(f"unknown prefill_gpu '{name}'; known: {', '.join(sorted(known))} (blank: the row's gpu)",
                             column="prefill_gpu", row=int(np.argmax(codes == i)))
    given = np.array([name.lower() not in _BLANK for name in names] + [False])
    codes = np.broadcast_to(codes, (n,)) if is_constant(label) else codes
    own = np.broadcast_to(np.asarray(user.get("gpu", ""), dtype=object), (n,))
    # a row whose prefill GPU is another catalog GPU than its own (object comparison: numpy's C loop)
    differs = given.take(codes) & (np.asarray(label, dtype=object) != own)
    for f, name in PREFILL_GPU_COLUMNS.items():
        lut = np.array([known[d][f] if g else np.nan for d, g in zip(names, given)] + [np.nan], dtype=np.float64)
        if not np.isnan(defaults.get(f, np.nan)):
            lut = np.where(np.isnan(lut), defaults[f], lut)
        value = np.where(differs, lut.take(codes), mine[f])
        if f == "nic_gbyte_s" and "net_port_gbyte_s" in floats:  # at most the fabric's port, as gpu's
            value = np.where(differs, np.fmin(value, floats["net_port_gbyte_s"]), value)
        if name in floats:  # a what-if override of the prefill GPU's figure
            value = np.where(np.isnan(floats[name]), value, floats[name])
        out[name] = value
    announced = np.array([known[d]["gpu_announced"] if g else 0.0 for d, g in zip(names, given)] + [0.0])
    filled = np.where(differs, label, own)
    out.update(prefill_gpu_differs=differs.astype(np.float64),
               prefill_gpu_vendor=np.where(differs, vendor_codes(filled), own_vendor),
               prefill_gpu_announced=np.where(differs, announced.take(codes),
                                              floats.get("gpu_announced", np.broadcast_to(0.0, (n,)))))
    return out


def prefill_gpu_constraint(c, con_precision) -> np.ndarray:
    """``con_prefill_gpu`` (module doc): the first broken of the codes 1 to 5, 0 where none is.
    ``con_precision``: the prefill instance's (objectives.serving.memory over its own GPU's columns)."""
    differs = c["prefill_gpu_differs"] > 0
    disaggregated = c["serving"] == 1
    cloud = c["cost_mode"] == 1
    announced = c["prefill_gpu_announced"] > 0
    unpriced = np.where(cloud, np.isnan(c["prefill_cloud_usd_per_gpu_hr"]), np.isnan(c["prefill_server_usd_per_gpu"]))
    unpowered = np.isnan(c["prefill_server_w_per_gpu"]) & np.isnan(c["prefill_gpu_tdp_w"])
    vendor = engine_runs(c["engine"], c["prefill_gpu_vendor"]) < 1.0
    code = np.select([differs & ~disaggregated, differs & vendor, differs & (con_precision > 0),
                      differs & announced & unpriced, differs & announced & unpowered], [1.0, 2.0, 3.0, 4.0, 5.0], 0.0)
    return np.where(differs, code, 0.0)


def prefill_gpu_text(code: np.ndarray) -> np.ndarray:
    """Why a row's prefill GPU cannot serve it, in words (one string per code; objectives/serving/reasons.py)."""
    words = np.array(["",
                      "prefill_gpu: an aggregated design has no prefill pool (serving: disaggregated runs one; "
                      "leave prefill_gpu blank or the row's gpu)",
                      "prefill_gpu: the engine does not run on the prefill GPU's vendor",
                      "precision: the prefill GPU has no tensor cores or KV format for the precision",
                      "price: no published price for the prefill GPU's system (quote server_usd_per_gpu or its "
                      "GPU-hour in a prices: file)",
                      "power: no published power for the prefill GPU's system (set prefill_server_w_per_gpu "
                      "or prefill_gpu_tdp_w as a what-if)"], dtype=object)
    return words.take(np.clip(np.asarray(code, dtype=np.intp), 0, len(words) - 1))


def check_prefill_overrides(floats: Columns) -> None:
    """A prefill GPU figure the table gives is a number >= 0 (as the catalog's fields are)."""
    for name in PREFILL_GPU_COLUMNS.values():
        if name not in floats:
            continue
        v = floats[name]
        row = bad_row(v < 0)
        if row is not None:
            raise InputError(f"{v[row]:g} is not valid; needs a number >= 0 (or blank)", column=name, row=row)
