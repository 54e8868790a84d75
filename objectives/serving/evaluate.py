"""Evaluate a serving design table: the modules in data-flow order over prepared columns, in chunks.

``evaluate_serving(table)`` is the serving counterpart of ``objectives.evaluate``: the input columns
broadcast, plus every serving metric (:data:`SERVING_METRICS`) and ``infeasible_reason``; it never mutates
its input and marks infeasible rows rather than raising (bad *input* raises InputError).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.base import Model
from objectives.columns import with_outputs
from objectives.serving.batching import ServingBatching
from objectives.serving.designs import Designs, ServingParameters, by_row, design_codes, design_needs, design_parts
from objectives.serving.economics import ServingEconomics
from objectives.serving.engines import ServingCalibration
from objectives.serving.intervals import ServingIntervals
from objectives.serving.memory import ServingMemory
from objectives.serving.prepare import SERVING_CATEGORIES, prepare_serving
from objectives.serving.reasons import ServingFeasible, serving_infeasible_reason
from objectives.serving.speculative import ServingSpeculative
from objectives.table import Columns, is_constant

__all__ = ["SERVING_MODELS", "SERVING_PERFORMANCE_MODELS", "SERVING_METRICS", "evaluate_serving", "run_serving"]

#: the serving performance model: the architecture's parameters (no training FLOPs), speculative decoding's
#: draft and acceptance, memory and KV capacity, batching and latency
SERVING_PERFORMANCE_MODELS: tuple[Model, ...] = (ServingParameters(), ServingSpeculative(), ServingMemory(),
                                                  ServingBatching(), ServingFeasible())
#: and the deployment's economics (the GPUs a rental leaves idle beside them), then the 80% intervals
#: (objectives/serving/intervals.py)
SERVING_MODELS: tuple[Model, ...] = SERVING_PERFORMANCE_MODELS + (ServingEconomics(), ServingIntervals())
CHUNK_ROWS = 1 << 15


def _metrics() -> dict[str, str]:
    out: dict[str, str] = {}
    for model in SERVING_MODELS:
        out.update(model.provides)
    out["infeasible_reason"] = "text; why the serving row is infeasible, 'kind: constraint, by how much' ('' where feasible)"
    return out


#: every output column of the serving model -> 'unit; meaning'
SERVING_METRICS: dict[str, str] = _metrics()


def run_serving(floats: Columns, cal: ServingCalibration | None = None,
                models: tuple[Model, ...] = SERVING_MODELS, designs: Designs | None = None) -> Columns:
    """Run ``models`` over prepared float columns, in chunks of CHUNK_ROWS rows that keep every temporary
    in cache (a constant column enters each chunk as its one value); inputs plus outputs (new dict).
    ``designs`` (objectives/serving/designs.py): the rows' designs, whose per-design parts are computed
    once per design."""
    cal = cal or ServingCalibration.load()
    n = max(len(v) for v in floats.values())
    parts = design_parts(floats, designs, models, cal)

    def run(work: dict, rows: slice) -> None:
        for i, model in enumerate(models):
            if i in parts:
                work.update(model.row_compute(work, by_row(parts[i], designs.codes[rows]), cal))
            else:
                work.update(model.compute(work, cal))

    if n <= CHUNK_ROWS:
        work = dict(floats)
        run(work, slice(0, n))
        return {k: np.broadcast_to(v, (n,)) if np.ndim(v) == 0 or len(v) != n else v for k, v in work.items()}
    out: Columns = dict(floats)
    columns: dict[str, np.ndarray] = {}
    same: dict[str, np.ndarray] = {}  # outputs one value so far (a model gave a scalar or one-row column)
    # which inputs are constant is known once: each chunk slices only the others
    constant = {k: v[:1] for k, v in floats.items() if is_constant(v)}
    varying = [(k, v) for k, v in floats.items() if k not in constant]
    outputs = list(dict.fromkeys(k for model in models for k in model.provides))
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, n)
        work = dict(constant)
        work.update((k, v[lo:hi]) for k, v in varying)
        run(work, slice(lo, hi))
        for k in outputs:
            value = np.asarray(work[k])
            one = value.size == 1 or is_constant(value)
            if k in same and one and _same_value(same[k], value):
                continue  # a one-value output costs no column (nor its pages) while it keeps its value
            if lo == 0 and one:
                same[k] = value.reshape(-1)[:1]
                continue
            if lo == 0 and value.dtype == np.float64:
                continue  # a row of the block below
            if k not in columns:  # the first chunk's type, as that of a column from the start
                kept = same.pop(k, None)
                columns[k] = np.empty(n, dtype=value.dtype if kept is None else kept.dtype)
                if kept is not None:
                    columns[k][:lo] = kept
            columns[k][lo:hi] = value  # a one-value output broadcasts
        if lo == 0:
            # the float outputs as rows of one block: one allocation, faulted in as huge pages (a column
            # each, unaligned, takes a fault per 4 KiB page at its ends and more from the C allocator;
            # docs/performance.md); a column kept alone keeps the block alive
            rest = [k for k in outputs if k not in same and k not in columns]
            block = np.empty((len(rest), n))
            for i, k in enumerate(rest):
                columns[k] = block[i]
                block[i, :hi] = work[k]
    out.update(columns)
    out.update((k, np.broadcast_to(v.reshape(()), (n,))) for k, v in same.items())
    return out


def _same_value(kept: np.ndarray, value: np.ndarray) -> bool:
    """Whether a one-value output holds the value kept (bit for bit, NaN included) and its type."""
    first = value.reshape(-1)[:1]
    return first.dtype == kept.dtype and first.tobytes() == kept.tobytes()


def evaluate_serving(table: Mapping[str, object], cal: ServingCalibration | None = None,
                     models: tuple[Model, ...] = SERVING_MODELS) -> Columns:
    """Every serving metric of every row of ``table`` (module doc)."""
    user, floats = prepare_serving(table)
    work = run_serving(floats, cal, models, design_codes(user, floats, design_needs(models)))
    outputs = {name for model in models for name in model.provides}
    out = with_outputs(user, work, outputs, SERVING_CATEGORIES)
    if "feasible" in work:
        out["infeasible_reason"] = serving_infeasible_reason(work)
    return out
