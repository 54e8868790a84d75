"""What the serving mapping searches share (objectives/serving/search.py for the decode or aggregated
instance, objectives/serving/prefill_search.py for a disaggregated row's prefill instance): the cells a row
gives, the layout rules every instance obeys, and the block-wise evaluation of every row's candidates.

The rules (objectives/serving/search.py's module doc): tensor parallelism inside the NVLink domain
(``scaleup_size``); attention data parallelism and expert parallelism only on an MoE model, ep splitting the
expert slots (the experts, and a load balancer's copies: objectives/serving/balance.py) and the stage's tp x
attn_dp GPUs (a given ``etp`` with ep making them: objectives/serving/experts.py); a
cell the row gives fixes its column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from objectives.mapping import blank_cells
from objectives.serving.balance import expert_slots
from objectives.serving.evaluate import SERVING_PERFORMANCE_MODELS, run_serving
from objectives.table import Columns, is_constant

__all__ = ["given_cells", "with_given", "layout_ok", "search_candidates"]


def given_cells(user: Mapping[str, np.ndarray], columns: Sequence[str], n: int) -> dict[str, np.ndarray]:
    """Each of ``columns``' given values as floats, NaN where blank or absent."""
    given = {}
    for c in columns:
        values = np.full(n, np.nan)
        if c in user:
            blank = blank_cells(user[c])
            values[~blank] = np.asarray(user[c])[~blank].astype(np.float64)
        given[c] = values
    return given


def with_given(values, cells: np.ndarray) -> tuple:
    """The choices ``values`` and every value ``cells`` (a column's given cells, NaN where blank) holds, sorted."""
    return tuple(sorted(set(values) | set(np.unique(cells[~np.isnan(cells)]).tolist())))


def layout_ok(floats: Columns, given: dict[str, np.ndarray], columns: Sequence[str], grid: np.ndarray,
              tp: np.ndarray, adp: np.ndarray, ep: np.ndarray, etp: np.ndarray | None = None) -> np.ndarray:
    """(rows, k) mask of the candidates (``grid``, (k, len(columns)); ``tp``, ``adp``, ``ep`` its columns as
    (1, k) rows) that obey the rules (module doc) and agree with each row's given cells; ``etp``: each row's
    given expert tensor parallelism (NaN blank), which fixes ep to tp x attn_dp / etp (objectives/serving/experts.py)."""
    moe = (floats["moe_experts"] > 0)[:, None]
    ok = tp <= np.maximum(floats["scaleup_size"], 1.0)[:, None]
    ok &= np.where(moe, (np.mod(tp * adp, ep) == 0) & (np.mod(expert_slots(floats)[:, None], ep) == 0),
                   (ep == 1) & (adp == 1))
    if etp is not None and not np.isnan(etp).all():
        cell = etp[:, None]
        ok &= np.isnan(cell) | (ep * cell == tp * adp)
    for i, name in enumerate(columns):
        cell = given[name][:, None]
        ok &= np.isnan(cell) | (grid[:, i][None, :] == cell)
    return ok


def search_candidates(floats: Columns, rows: np.ndarray, given: dict[str, np.ndarray], columns: Sequence[str],
                      grid: np.ndarray, valid: Callable[[Columns, dict[str, np.ndarray], np.ndarray], np.ndarray],
                      best_of: Callable[[np.ndarray, Columns], np.ndarray], cal, block_candidates: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(the winning candidate of each of ``rows``, (len(rows), len(columns)), NaN where none is valid;
    candidates tried per row).

    ``floats``: the prepared table; ``grid``: the candidates, (k, len(columns)); ``valid(part, given_part,
    grid)``: the (rows, k) mask of the candidates each row may run; ``best_of(which, out)``: the index of
    each row's winner among the evaluated candidates (``which``: each candidate's row in the block). Rows
    are taken in blocks of about ``block_candidates`` candidates; every valid candidate of a block is
    evaluated in one call of the serving performance modules, with ``columns`` set to its values."""
    chosen = np.full((len(rows), len(columns)), np.nan)
    tried = np.zeros(len(rows))
    step = max(1, block_candidates // max(len(grid) // 8, 1))
    for lo in range(0, len(rows), step):
        at = rows[lo:lo + step]
        part = {k: (np.broadcast_to(v[:1], (len(at),)) if is_constant(v) else v.take(at)) for k, v in floats.items()}
        ok = valid(part, {c: g.take(at) for c, g in given.items()}, grid)
        which, cands = np.nonzero(ok)
        tried[lo:lo + len(at)] = ok.sum(axis=1)
        if not len(which):
            continue
        expanded = {k: np.broadcast_to(v[:1], (len(which),)) if is_constant(v) else v.take(which) for k, v in part.items()}
        for i, c in enumerate(columns):
            expanded[c] = grid[cands, i]
        out = run_serving(expanded, cal, SERVING_PERFORMANCE_MODELS)
        win = best_of(which, out)
        chosen[lo + which[win]] = grid[cands[win]]
    return chosen, tried
