"""Physical invariants of the platform and checkpoint models that any result table must keep.

The front audit and the tests reuse :func:`broken_rows` on a result table (a dict of columns or a pandas
DataFrame: ``dse sweep``'s pareto.parquet, ``objectives.evaluate``'s output). It returns, by invariant, the
row positions that break it; an empty dict is a clean table. Columns:

- ``gpu``, ``scaleup_size``: the NVLink domain is the GPU's system's (gpus.yaml: 8 on an HGX board, 72 in an
  NVL72 rack); a larger one is a breach unless the space set ``scaleup_size`` as an explicit what-if
  (``whatif=("scaleup_size",)``), and then it must be priced (``net_capex_scaleup_usd`` > 0, if present).
- ``gpu``, ``nic_gbyte_s``: no GPU drives the fabric faster than its system's NIC, unless ``nic_gbyte_s`` is a
  what-if.
- ``ckpt_interval_s``, ``ckpt_write_s``: a checkpoint interval is at least 3 write times
  (objectives.training.checkpoint INTERVAL_OVER_WRITE; an async write must finish before the next checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from objectives import catalog
from objectives.training.checkpoint import INTERVAL_OVER_WRITE

__all__ = ["broken_rows", "system_value"]

_REL = 1e-9  # float round-off allowed on the checkpoint ratio


def system_value(gpu_ids, field: str) -> np.ndarray:
    """The catalog's value of ``field`` for each row's GPU system (NaN for a GPU outside the catalog)."""
    table = catalog.gpus()
    ids = np.asarray(gpu_ids, dtype=object)
    uniq, inverse = np.unique(ids.astype(str), return_inverse=True)
    lut = np.array([table[u][field] if u in table else np.nan for u in uniq], dtype=np.float64)
    return lut[inverse.reshape(-1)]


def _column(table, name: str) -> np.ndarray | None:
    if name not in table:
        return None
    return np.asarray(table[name])


def broken_rows(table: Mapping[str, object], whatif: Iterable[str] = ()) -> dict[str, np.ndarray]:
    """Row positions that break each invariant (module doc), by name; invariants whose columns the table
    lacks are not checked. ``whatif``: columns the space set on purpose (``scaleup_size``, ``nic_gbyte_s``)."""
    whatif = set(whatif)
    out: dict[str, np.ndarray] = {}

    def report(name: str, mask: np.ndarray) -> None:
        rows = np.flatnonzero(mask)
        if rows.size:
            out[name] = rows

    gpu = _column(table, "gpu")
    size = _column(table, "scaleup_size")
    if gpu is not None and size is not None:
        beyond = np.asarray(size, dtype=np.float64) > system_value(gpu, "scaleup_size")  # NaN: not checked
        if "scaleup_size" not in whatif:
            report("nvlink_domain_beyond_system", beyond)
        priced = _column(table, "net_capex_scaleup_usd")
        if priced is not None:
            report("nvlink_extension_unpriced", beyond & ~(np.asarray(priced, dtype=np.float64) > 0))
    nic = _column(table, "nic_gbyte_s")
    if gpu is not None and nic is not None and "nic_gbyte_s" not in whatif:
        report("nic_faster_than_system", np.asarray(nic, dtype=np.float64) > system_value(gpu, "nic_gbyte_s"))
    interval, write = _column(table, "ckpt_interval_s"), _column(table, "ckpt_write_s")
    if interval is not None and write is not None:
        interval = np.asarray(interval, dtype=np.float64)
        least = INTERVAL_OVER_WRITE * np.asarray(write, dtype=np.float64) * (1.0 - _REL)
        report("ckpt_interval_under_3_writes", interval < least)  # NaN (a row not scored) is not checked
    return out
