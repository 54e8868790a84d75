"""Exhaustive, vectorized search of the mapping (how a job runs on a given cluster).

For every design row, the mapping columns it leaves blank are enumerated from ``choices`` (a cartesian
product), candidates that cannot lay out (divisibility, `Layout`) or that no practitioner would run are
dropped before the model runs, every remaining candidate is evaluated in one vectorized call, and the
row keeps the best feasible one: least step time, ties to less HBM (DESIGN.md, two-level search). A row
with no feasible candidate keeps its least-infeasible one (smallest memory overflow) with feasible=False.

Pruning rules (documented, not tuned): tensor parallelism stays inside the scale-up domain (Narayanan
et al. SC'21, Sec. 3.3 takeaway #1); context parallelism only for sequences of 16K tokens and more;
interleaving only with a pipeline.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from objectives.calibration import Calibration
from objectives.layout import Layout
from objectives.pipeline import MAPPING_COLUMNS, prepare, run_models
from objectives.table import CATEGORIES, Columns, as_columns, encode

__all__ = ["DEFAULT_CHOICES", "search_mapping", "candidate_grid", "blank_cells", "CP_MIN_SEQ_LEN"]

DEFAULT_CHOICES: dict[str, tuple] = {
    "tp": (1, 2, 4, 8, 16, 32, 64),
    "pp": (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64),
    "cp": (1, 2, 4, 8, 16, 32),
    "ep": (1, 2, 4, 8, 16, 32, 64),
    "vp": (1, 2, 4),
    "micro_batch": (1, 2, 4),
    "recompute": ("selective", "full"),
    "sequence_parallel": (1,),
    "zero_stage": (1, 3),
}
CP_MIN_SEQ_LEN = 16384
MAX_JOINED_ROWS = 1 << 17
_LAYOUT = Layout()


def blank_cells(values: np.ndarray) -> np.ndarray:
    """True where a cell is missing: NaN, None or an empty string."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "iub":
        return np.zeros(len(values), dtype=bool)
    as_str = values.astype(str)
    return np.isin(np.char.lower(np.char.strip(as_str)), ("", "nan", "none_", "null"))


def candidate_grid(columns: Sequence[str], choices: Mapping[str, Sequence]) -> Columns:
    """Cartesian product of the choices of ``columns`` as float columns (categoricals encoded)."""
    lists = []
    for name in columns:
        vals = np.asarray(list(choices[name]))
        lists.append(encode(name, vals) if name in CATEGORIES else vals.astype(np.float64))
    grid = np.array(list(itertools.product(*lists)), dtype=np.float64).reshape(-1, len(columns))
    return {name: grid[:, i] for i, name in enumerate(columns)}


def _plausible(c: Columns) -> np.ndarray:
    """Candidates that lay out and that the pruning rules keep."""
    layout = _LAYOUT.compute(c, None)
    return (
        (layout["con_layout"] <= 0)
        & (c["tp"] <= np.maximum(c["scaleup_size"], 1.0))
        & ((c["cp"] == 1) | (c["seq_len"] >= CP_MIN_SEQ_LEN))
        & ((c["sequence_parallel"] == 0) | (c["tp"] > 1))
    )


def _best(work: Columns, owner: np.ndarray, n_rows: int) -> np.ndarray:
    """Index into ``work`` of each owner row's best candidate (feasible first, fastest, least memory)."""
    feasible = work["feasible"]
    key1 = np.where(feasible, work["step_time_s"], np.inf)
    key2 = np.where(feasible, work["hbm_used_gb"], work["con_memory"] + 1e9 * work["con_layout"] + 1e6 * work["con_precision"])
    order = np.lexsort((key2, key1, ~feasible, owner))
    first = np.unique(owner[order], return_index=True)[1]
    return order[first]


def search_mapping(table: Mapping[str, object], choices: Mapping[str, Sequence] | None = None,
                   cal: Calibration | None = None) -> Columns:
    """Best feasible mapping per row; see the module docstring and docs/model-contract.md."""
    search_sp = bool(choices and "sequence_parallel" in choices)
    choices = {**DEFAULT_CHOICES, **(choices or {})}
    user = as_columns(table)
    n = len(next(iter(user.values())))
    blank = {name: (blank_cells(user[name]) if name in user else np.ones(n, dtype=bool)) for name in MAPPING_COLUMNS}
    searched = dict(blank)
    # a blank sequence_parallel follows tp (it never loses in this model, Korthikanti Sec. 4.2.2) unless
    # the caller asks to search it
    searched["sequence_parallel"] = blank["sequence_parallel"] & search_sp
    sp_follows_tp = blank["sequence_parallel"] & ~search_sp
    filled = dict(user)
    for name in MAPPING_COLUMNS:
        if name not in user:
            filled[name] = np.zeros(n) if name == "recompute" else np.ones(n)
        elif blank[name].any():
            col = user[name]
            filled[name] = np.where(blank[name], "none" if name == "recompute" else 1, col) if col.dtype.kind in "OUS" \
                else np.where(blank[name], 1.0, col.astype(np.float64))
    _, floats = prepare(filled)

    pattern = np.stack([searched[name] for name in MAPPING_COLUMNS], axis=1)
    patterns, group = np.unique(pattern, axis=0, return_inverse=True)
    group = group.reshape(-1)
    best_parts, owner_parts, tried = [], [], np.zeros(n)
    for g, pat in enumerate(patterns):  # a few distinct blank-patterns, not rows
        rows = np.flatnonzero(group == g)
        cols = [name for name, s in zip(MAPPING_COLUMNS, pat) if s]
        grid = candidate_grid(cols, choices) if cols else {}
        k = len(next(iter(grid.values()))) if grid else 1
        step = max(1, MAX_JOINED_ROWS // k)
        for start in range(0, len(rows), step):
            chunk = rows[start:start + step]
            owner = np.repeat(chunk, k)
            joined = {name: v[owner] for name, v in floats.items()}
            for name, v in grid.items():
                joined[name] = np.tile(v, len(chunk))
            joined["sequence_parallel"] = np.where(sp_follows_tp[owner], (joined["tp"] > 1) * 1.0, joined["sequence_parallel"])
            keep = _plausible(joined)
            # a row with no plausible candidate is still evaluated once, to show why it fails
            local = np.searchsorted(chunk, owner)
            has_any = np.bincount(local, weights=keep, minlength=len(chunk)) > 0
            keep[::k] |= ~has_any
            idx = np.flatnonzero(keep)
            work = run_models({name: v[idx] for name, v in joined.items()}, cal)
            tried[chunk] = np.bincount(local[idx], minlength=len(chunk))
            pick = _best(work, owner[idx], n)
            best_parts.append({name: v[pick] for name, v in work.items()})
            owner_parts.append(owner[idx][pick])
    owners = np.concatenate(owner_parts)
    order = np.argsort(owners)
    merged = {name: np.concatenate([p[name] for p in best_parts])[order] for name in best_parts[0]}
    out = dict(user)
    for name, value in merged.items():
        if name not in user or name in MAPPING_COLUMNS or name not in CATEGORIES:
            out[name] = value
    for name in CATEGORIES:
        if name in user and name not in MAPPING_COLUMNS:
            out[name] = user[name]
    out["recompute"] = np.asarray(CATEGORIES["recompute"], dtype=object)[merged["recompute"].astype(np.intp)]
    out["n_mappings_tried"] = tried
    return out
