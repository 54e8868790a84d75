"""The serving mapping search: blank ``tp``, ``pp``, ``ep`` and ``attn_dp`` cells of a serving table searched.

As objectives.mapping does for training: every row's candidates are the combinations of
:data:`SERVING_CHOICES` (or the caller's) that make its instance (tp x attn_dp x pp = n_gpus) and agree with
the cells it gives, pruned of what no practitioner runs (tensor parallelism beyond the NVLink domain,
attention data parallelism or expert parallelism on a dense model, ep that does not split the experts and
the stage's GPUs, or that does not make them with a given ``etp``: expert tensor parallelism is not searched,
tp x attn_dp / ep where blank as TensorRT-LLM derives it, objectives/serving/experts.py); all of them are
evaluated in one vectorized call of the serving performance modules (each with its concurrency resolved:
given, the largest meeting the row's targets, or from its request rate), and the row keeps the candidate
serving the most output tokens per second per GPU among the feasible ones (ties to the shorter TTFT), or,
where none is feasible, the least violating. The winners are then evaluated with
every module (economics included). A row that gives every mapping cell is evaluated as it is.

A disaggregated row's prefill pool (``prefill_n_gpus``, ``prefill_tp``, ... blank) is searched next, its
decode mapping fixed (objectives/serving/prefill_search.py: the pools chosen one after the other, as
TensorRT-LLM's disaggregated-serving blog chooses them); ``n_prefill_mappings_tried`` counts its candidates.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from objectives.serving.candidates import given_cells, layout_ok, search_candidates, with_given
from objectives.serving.engines import ServingCalibration
from objectives.serving.evaluate import evaluate_serving
from objectives.serving.prefill_search import PREFILL_COLUMNS, prefill_open, search_prefill
from objectives.serving.prepare import prepare_serving
from objectives.table import Columns, as_columns

__all__ = ["SERVING_MAPPING_COLUMNS", "SERVING_CHOICES", "search_serving", "SEARCH_LOST"]

SERVING_MAPPING_COLUMNS = ("tp", "pp", "ep", "attn_dp")
SERVING_CHOICES: dict[str, tuple[int, ...]] = {
    "tp": (1, 2, 4, 8, 16, 32, 64),
    "pp": (1, 2, 3, 4, 6, 8),
    "ep": (1, 2, 4, 8, 16, 32, 64),
    "attn_dp": (1, 2, 4, 8, 16, 32, 64),
}
#: candidates evaluated at once (rows x their candidates)
BLOCK_CANDIDATES = 1 << 15
#: reason of a row no candidate lays out
SEARCH_LOST = "mapping: no tp x attn_dp x pp of the searched choices makes the instance's n_gpus"


def _grid(choices: Mapping[str, tuple]) -> np.ndarray:
    """Every combination of the choices, (k, 4) in SERVING_MAPPING_COLUMNS order."""
    return np.array(list(itertools.product(*(choices[c] for c in SERVING_MAPPING_COLUMNS))), dtype=np.float64)


def _valid(floats: Columns, given: dict[str, np.ndarray], grid: np.ndarray) -> np.ndarray:
    """(rows, k) mask of the candidates each row may run (module doc)."""
    tp, pp, ep, adp = (grid[:, i][None, :] for i in range(4))
    return (tp * adp * pp == floats["n_gpus"][:, None]) & layout_ok(floats, given, SERVING_MAPPING_COLUMNS, grid, tp,
                                                                     adp, ep, floats.get("etp"))


def _best(rows: np.ndarray, out: Columns) -> np.ndarray:
    """Index (into the candidates) of each row's winner: feasible first, most output tokens/s per GPU, the
    shorter TTFT; else the least violating."""
    feasible = np.asarray(out["feasible"], dtype=bool)
    tokens = np.nan_to_num(np.asarray(out["output_tokens_per_s_per_gpu"], dtype=float), nan=-1.0)
    ttft = np.nan_to_num(np.asarray(out["ttft_s"], dtype=float), nan=np.inf)
    violation = np.fmax(np.fmax(out["con_layout"], out["con_precision"]), np.fmax(out["con_memory"], out["con_slo"]))
    primary = np.where(feasible, -tokens, np.inf)
    order = np.lexsort((ttft, np.nan_to_num(violation, nan=np.inf), primary, rows))
    first = np.ones(len(order), dtype=bool)
    first[1:] = rows[order][1:] != rows[order][:-1]
    return order[first]


def _given(user: Columns, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(each mapping column's given values, NaN where blank or absent; rows giving every cell)."""
    given = given_cells(user, SERVING_MAPPING_COLUMNS, n)
    return given, ~np.any([np.isnan(v) for v in given.values()], axis=0)


def search_serving(table: Mapping[str, object], choices: Mapping[str, tuple] | None = None,
                   cal: ServingCalibration | None = None) -> Columns:
    """``evaluate_serving`` with every blank or absent mapping cell searched (module doc); adds
    ``n_mappings_tried`` (1 for a row that gives its whole mapping)."""
    user = as_columns(table)
    n = len(next(iter(user.values()))) if user else 0
    if "n_gpus" not in user:
        return evaluate_serving(table, cal)  # the boundary names what is missing
    given, complete = _given(user, n)
    prefill_given, prefill_rows = prefill_open(user, n)
    if complete.all() and not prefill_rows.any():  # nothing to search
        out = evaluate_serving(table, cal)
        out["n_mappings_tried"] = np.ones(n)
        out["n_prefill_mappings_tried"] = np.ones(n)
        return out
    options = {c: with_given((choices or SERVING_CHOICES).get(c, SERVING_CHOICES[c]), given[c])
               for c in SERVING_MAPPING_COLUMNS}
    # a prefill pool left partly open is blank (the decode instance's) until searched, for the boundary's checks
    open_prefill = {c: np.where(prefill_rows, np.nan, v) for c, v in prefill_given.items()}
    decode_table = {**table, **open_prefill}
    if "prefill_gpu" in user and prefill_rows.any():
        # an open prefill pool on another GPU (prefill_gpu) is searched next on its own GPU; the decode mapping
        # is chosen with the pool on the decode GPU (the pools nearly separable: prefill_search.py's doc)
        decode_table["prefill_gpu"] = np.where(prefill_rows, None, np.asarray(user["prefill_gpu"], dtype=object))
    chosen, tried, lost = _search_decode(decode_table, user, n, given, complete, options, cal)
    decided = {**table, **{c: chosen[:, i] for i, c in enumerate(SERVING_MAPPING_COLUMNS)}}
    prefill_tried = np.ones(n)
    if prefill_rows.any():
        _, floats = prepare_serving({**decided, **open_prefill})
        rows = np.flatnonzero(prefill_rows & ~lost)
        picked, prefill_tried[rows] = search_prefill(floats, rows, prefill_given, options, _best, cal)
        for i, c in enumerate(PREFILL_COLUMNS):
            column = open_prefill[c].copy()
            found = ~np.isnan(picked[:, 0])
            column[rows[found]] = picked[found, i]
            decided[c] = column  # NaN where nothing was searched or found: the decode instance's
    final = evaluate_serving(decided, cal)
    final["n_mappings_tried"] = tried
    final["n_prefill_mappings_tried"] = prefill_tried
    if lost.any():
        final["feasible"] = np.asarray(final["feasible"]) & ~lost
        reason = np.asarray(final["infeasible_reason"], dtype=object).copy()
        reason[lost] = SEARCH_LOST
        final["infeasible_reason"] = reason
    return final


def _search_decode(table, user: Columns, n: int, given: dict[str, np.ndarray], complete: np.ndarray,
                   options: Mapping[str, tuple], cal) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's decode (or aggregated) mapping, (n, 4) in SERVING_MAPPING_COLUMNS order; candidates tried;
    rows no candidate lays out, given the fill of n_gpus x 1 x 1 x 1)."""
    chosen = np.column_stack([given[c] for c in SERVING_MAPPING_COLUMNS])
    tried = np.ones(n)
    if complete.all():
        return chosen, tried, np.zeros(n, dtype=bool)
    # placeholders that make the instance, for the boundary's checks and the catalog (replaced below)
    placeholder = {**table, "tp": np.asarray(user["n_gpus"]), "pp": 1.0, "ep": 1.0, "attn_dp": 1.0}
    _, floats = prepare_serving(placeholder)
    todo = np.flatnonzero(~complete)
    chosen[todo], tried[todo] = search_candidates(floats, todo, given, SERVING_MAPPING_COLUMNS, _grid(options), _valid,
                                                  _best, cal, BLOCK_CANDIDATES)
    lost = np.isnan(chosen[:, 0])
    fill = np.column_stack([np.asarray(floats["n_gpus"], dtype=np.float64), np.ones(n), np.ones(n), np.ones(n)])
    return np.where(lost[:, None], fill, chosen), tried, lost
