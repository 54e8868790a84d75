"""A space's facility: its power (``facility_mw``) and rack-density limit (``rack_kw_max``), top-level keys.

    facility_mw: 100      # MW the site is built for: IT at its maximum x PUE (objectives/economics/facility.py)
    rack_kw_max: 130      # kW one rack may draw

Each is a finite number > 0 (facility_mw at most :data:`MAX_FACILITY_MW`, rack_kw_max at most
:data:`MAX_RACK_KW`); anything else is one line naming the file and the key, exit 2. Every design table of
the space carries them as its ``facility_mw`` and ``rack_kw_max`` columns, which the model holds each owned
design to (``con_facility_mw``, ``con_rack_kw``; objectives/economics/facility.py). They are given here, not under
``workload`` or ``cluster``, because the budget also shapes the GPU count the search proposes:

- ``n_gpus`` left out: the count follows from the power. The candidates are, for each GPU system (and each
  choice of the fabric, storage and the other columns the facility's peak depends on), the largest count of
  whole servers or racks whose peak, fabric and storage included, fits (objectives.economics.facility
  ``largest_fitting_gpus``): the largest cluster of each kind the facility holds; and beside each, the largest
  counts below it of the form m x 2^k (m = 1, 3, 5, 7), which a data x tensor x pipeline split of a
  power-of-two batch can fill where the largest count, odd factors and all, has no mapping (the last
  rack's other GPUs idle, still billed and powered).
- ``n_gpus`` searched (a list or a range): the counts above the largest that fits any design are dropped
  (none of them could fit), and each design kind's largest fitting count (and the m x 2^k counts below it,
  as above) within the range is added, so that the search can reach the biggest cluster the budget allows.
  A pow2 range, or a range with a step, becomes the list of its values that fit plus those counts; a plain
  integer range has its max lowered.
- ``n_gpus`` fixed: unchanged; a design over the budget is infeasible with its reason.

Serving spaces take neither key yet (objectives/serving has no facility peak): one line, exit 2.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dse.spec.schema import Dimension

__all__ = ["KEYS", "MAX_FACILITY_MW", "MAX_RACK_KW", "facility_limits"]

#: the most power a space may give a facility, MW (the largest campuses announced are a few GW) and a rack, kW
MAX_FACILITY_MW = 100_000.0
MAX_RACK_KW = 10_000.0
KEYS = {"facility_mw": ("megawatts", MAX_FACILITY_MW), "rack_kw_max": ("kilowatts", MAX_RACK_KW)}
#: the most design kinds whose largest fitting count is computed; beyond it, one per GPU (and instance)
MAX_KINDS = 4096
#: the odd factors of the near-largest counts offered beside the largest (:func:`_splittable`)
_ODD_FACTORS = (1, 3, 5, 7)
#: catalog ids whose fields the facility's peak reads (the GPU's servers, the fabric, storage, an instance)
_ID_COLUMNS = ("gpu", "instance", "network", "storage", "model", "pricing")


def facility_limits(ck, top: Mapping[str, Any], workload: Mapping[str, Any],
                    dims: Sequence[Dimension]) -> tuple[list[Dimension], dict[str, float | None]]:
    """(the cluster's dimensions, n_gpus bounded by the budget where it is searched or left out; the
    :class:`~dse.spec.schema.Spec` fields ``facility_mw`` and ``rack_kw_max``, None where not given)."""
    dims = list(dims)
    limits: dict[str, float | None] = {}
    for key, (unit, most) in KEYS.items():
        for part in ("workload", "cluster"):
            if key in workload and part == "workload" or any(d.name == key for d in dims) and part == "cluster":
                ck.fail(f"{part}.{key}", f"give it at the top level ({key}: NUMBER), where it also bounds the GPU count")
        value = top.get(key)
        if value is not None:
            value = float(ck.number(value, key))
            if not 0 < value <= most:
                ck.fail(key, f"must be a number of {unit} > 0 and at most {most:,.0f}, not {value:g}")
        limits[key] = value
    if not any(v is not None for v in limits.values()):
        return dims, limits
    names = set(workload) | {d.name for d in dims}
    if {"input_len", "output_len"} <= names:
        key = next(k for k, v in limits.items() if v is not None)
        ck.fail(key, "a serving space takes no facility limits yet (objectives/serving has no facility peak); "
                     "training spaces only")
    if limits["facility_mw"] is not None:
        dims = _bounded_gpu_counts(ck, workload, dims, limits)
    return dims, limits


def _bounded_gpu_counts(ck, workload, dims: list[Dimension], limits) -> list[Dimension]:
    fits = _fitting_counts(workload, dims, limits)
    at = next((i for i, d in enumerate(dims) if d.name == "n_gpus"), None)
    if at is None and "n_gpus" not in workload:
        if not fits:
            return dims  # no count: 'cluster.n_gpus is required' (or the model's error, at the preflight)
        return [*dims, Dimension("n_gpus", "choice", values=tuple(fits)) if len(fits) > 1 else
                Dimension("n_gpus", "fixed", values=(fits[0],))]
    if at is None or not fits:
        return dims
    d, bound = dims[at], max(fits)
    if d.kind == "int" and d.step is None:
        if d.low <= bound < d.high:
            dims[at] = Dimension(d.name, "int", low=d.low, high=int(bound), log=d.log)
        return dims
    if d.kind == "choice":
        given = [int(v) for v in d.values]
    elif d.kind == "pow2":
        given = [2**k for k in range(int(math.log2(d.low)), int(math.log2(d.high)) + 1)]
    elif d.kind == "int":  # a step
        given = [int(d.low + i * d.step) for i in range(int(round((d.high - d.low) / d.step)) + 1)]
    else:
        return dims
    low, high = min(given), max(given)
    values = sorted({v for v in given if v <= bound} | {f for f in fits if low <= f <= high})
    if values and values != sorted(given):  # (a range the budget leaves as it was stays a range)
        dims[at] = Dimension(d.name, "choice", values=tuple(values)) if len(values) > 1 else \
            Dimension(d.name, "fixed", values=(values[0],))
    return dims


def _fitting_counts(workload, dims: Sequence[Dimension], limits) -> list[int]:
    """The largest count of whole servers or racks that fits the budget, for each kind of design the space
    holds (its columns the facility's peak reads), distinct, > 0, ascending; [] where the model takes none."""
    from objectives.pipeline import DESIGN_MODELS, ECONOMICS_MODELS
    from objectives.sizing import largest_fitting_gpus

    upto = [type(m).__name__ for m in ECONOMICS_MODELS].index("Facility") + 1  # the peak and the modules it reads
    reads = {c for m in (*DESIGN_MODELS, *ECONOMICS_MODELS[:upto]) for c in m.requires} | set(_ID_COLUMNS)
    fixed = {**{d.name: d.values[0] for d in dims if d.kind == "fixed"}, **workload}
    varied = [d for d in dims if d.kind != "fixed" and d.name in reads and d.name != "n_gpus"]
    choices = [list(d.values) if d.kind == "choice" else [d.low, d.high] for d in varied]
    if math.prod(len(c) for c in choices) > MAX_KINDS:
        keep = [i for i, d in enumerate(varied) if d.name in ("gpu", "instance")]
        varied, choices = [varied[i] for i in keep], [choices[i] for i in keep]
    kinds = list(itertools.product(*choices)) or [()]
    table: dict[str, Any] = {k: v for k, v in fixed.items() if k != "n_gpus"}
    for i, d in enumerate(varied):
        table[d.name] = [kind[i] for kind in kinds]
    if varied:  # one row per kind; fixed columns broadcast
        table = {k: (v if isinstance(v, list) else [v] * len(kinds)) for k, v in table.items()}
    table["facility_mw"] = limits["facility_mw"]
    try:
        import numpy as np

        with np.errstate(all="ignore"):
            counts = largest_fitting_gpus(table)
    except Exception:  # the preflight scores these designs and says the model's error in one line
        return []
    counts = np.atleast_1d(counts)
    return sorted({n for c in counts[np.isfinite(counts)] if c > 0 for n in _splittable(int(c))})


def _splittable(fit: int) -> set[int]:
    """``fit`` and the largest counts at most it of the form m x 2^k (m = 1, 3, 5, 7): a count with many odd
    factors (598 GB200 racks are 43,056 = 2^4 x 3^2 x 13 x 23 GPUs) has no data x tensor x pipeline split of a
    power-of-two batch, and 40,960 = 5 x 2^13 of its GPUs has (dp 1024, tp 8, pp 5), the last rack's other
    GPUs idle (billed whole: objectives.economics.rental n_gpus_billed)."""
    return {fit} | {m << (fit // m).bit_length() - 1 for m in _ODD_FACTORS if fit >= m}
