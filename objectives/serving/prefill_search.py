"""The prefill pool's mapping search of a disaggregated serving row (``serving: disaggregated``).

Rate matching makes a disaggregated deployment's output tokens per GPU OSL / (n_d / X_d + n_p / X_p)
(objectives/serving/disaggregated.py): the decode instance's GPUs per request/s plus the prefill instance's,
nearly separable, so the pools are chosen one after the other as TensorRT-LLM's disaggregated-serving blog
(blog 5) and inference-measurements.md 3.3 choose them ("pick the prefill configuration with the highest
req/s/GPU meeting TTFT, and the decode configuration with the highest tok/s/GPU meeting TPOT, then
rate-match"): objectives.serving.search chooses the decode mapping (the prefill instance's blank cells at
the decode candidate's), then this module, the decode mapping fixed, tries every prefill mapping the row
leaves open and keeps the one serving the most output tokens per GPU among the feasible (ties to the shorter
TTFT); the decode instance's own concurrency is resolved again for each (the TTFT target reads both pools,
and the KV transfer both instances' GPUs). The first pass's prefill (the decode mapping) is among the
candidates where it is valid, so the search never ends worse than it.

Candidates: ``prefill_n_gpus`` (blank: a power of two up to the decode instance's GPUs: a prefill
instance no larger than a decode one, as DeepSeek's 4-node prefill and 18-node decode units and SGLang's
EP32 prefill and EP72 decode deployments run) x ``prefill_tp``, ``prefill_pp``, ``prefill_ep``,
``prefill_attn_dp`` from objectives.serving.search's choices, under its rules (tp x attn_dp x pp the
instance, tp inside the prefill GPU's NVLink domain, attention data and expert parallelism only on an MoE model, ep
splitting the experts and the stage's GPUs); a given cell fixes its column.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from objectives.serving.candidates import given_cells, layout_ok, search_candidates, with_given
from objectives.serving.disaggregated import PREFILL_MAPPING
from objectives.table import Columns

__all__ = ["PREFILL_COLUMNS", "PREFILL_GPU_CHOICES", "prefill_open", "search_prefill"]

#: the prefill instance's mapping columns, n_gpus first
PREFILL_COLUMNS = ("prefill_n_gpus", "prefill_tp", "prefill_pp", "prefill_ep", "prefill_attn_dp")
PREFILL_GPU_CHOICES = (1, 2, 4, 8, 16, 32, 64)
#: candidates evaluated at once (rows x their candidates)
BLOCK_CANDIDATES = 1 << 14


def prefill_open(user: Mapping[str, np.ndarray], n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(each prefill column's given values, NaN where blank or absent; the disaggregated rows leaving one open)."""
    given = given_cells(user, PREFILL_COLUMNS, n)
    serving = np.broadcast_to(np.asarray(user.get("serving", "aggregated"), dtype=object), (n,))
    disaggregated = np.asarray(serving == "disaggregated", dtype=bool)
    return given, disaggregated & np.any([np.isnan(v) for v in given.values()], axis=0)


def _grid(choices: Mapping[str, tuple], sizes: tuple) -> np.ndarray:
    """(k, 5) candidates in PREFILL_COLUMNS order, each making its instance (tp x attn_dp x pp = n)."""
    rows = [(n, t, p, e, a) for n, t, p, e, a in itertools.product(sizes, choices["tp"], choices["pp"], choices["ep"],
                                                                    choices["attn_dp"]) if t * a * p == n]
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def _valid(floats: Columns, given: dict[str, np.ndarray], grid: np.ndarray) -> np.ndarray:
    """(rows, k) mask of the prefill candidates each row may run (module doc)."""
    n, tp, pp, ep, adp = (grid[:, i][None, :] for i in range(5))
    size = np.where(np.isnan(given["prefill_n_gpus"]), floats["n_gpus"], np.inf)[:, None]  # blank: <= the decode's
    # tp inside the *prefill* GPU's NVLink domain (prefill_gpu: a Rubin CPX's is one GPU, objectives/serving/prefill_pool.py)
    domain = {**floats, "scaleup_size": floats.get("prefill_scaleup_size", floats["scaleup_size"])}
    return (n <= size) & layout_ok(domain, given, PREFILL_COLUMNS, grid, tp, adp, ep)


def search_prefill(floats: Columns, rows: np.ndarray, given: dict[str, np.ndarray], choices: Mapping[str, tuple],
                   best_of, cal=None) -> tuple[np.ndarray, np.ndarray]:
    """(the chosen prefill mapping of each of ``rows``, (len(rows), 5) in PREFILL_COLUMNS order, NaN where no
    candidate is valid; candidates tried per row). ``floats``: the prepared table, its decode mapping fixed;
    ``best_of(rows, out)`` the winner of each row among the evaluated candidates (objectives.serving.search)."""
    grid = _grid({c: with_given(choices[c], given[f"prefill_{c}"].take(rows)) for c in ("tp", "pp", "ep", "attn_dp")},
                 with_given(PREFILL_GPU_CHOICES, given["prefill_n_gpus"].take(rows)))
    # the decode instance's concurrency, blank in the row, is resolved again for each candidate
    return search_candidates(floats, rows, given, PREFILL_COLUMNS, grid, _valid, best_of, cal, BLOCK_CANDIDATES)


assert tuple(PREFILL_MAPPING) == PREFILL_COLUMNS
