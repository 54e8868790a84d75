"""Serving runs in the report (objectives.serving, docs/serving.md): the two pictures serving is judged by,
each with its own two-objective front, the front table's serving columns and what a token's time goes to.

The pictures are derived from every evaluated design, whatever the space's objectives:

- throughput against interactivity: output tokens per second per GPU (up) against tokens per second per
  user (right), the curve vendors publish for a model on a GPU (NVIDIA's Blackwell and Dynamo pages,
  SemiAnalysis InferenceMAX): along it, more requests in flight buy throughput with each user's speed;
- cost per million output tokens (up, ``usd_per_mtok_out``) against time to first token (right, ``ttft_s``).

Each front is the admissible designs' non-dominated set on its two metrics (dse.store.pareto), computed
here, not the space's front.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.store.pareto import front_table

__all__ = ["View", "VIEWS", "is_serving", "view_front", "on_view_front", "TABLE_COLUMNS", "DEPLOYMENT_COLUMNS", "HOVER",
           "tpot_parts", "TPOT_PARTS", "SUMMARY", "shared_columns"]


@dataclass(frozen=True)
class View:
    """One serving picture: ``x`` right, ``y`` up, each (metric, direction)."""

    key: str
    title: str
    x: tuple[str, str]
    y: tuple[str, str]

    @property
    def objectives(self) -> dict[str, str]:
        return {self.x[0]: self.x[1], self.y[0]: self.y[1]}


VIEWS = (
    View("throughput", "Throughput against interactivity", ("tokens_per_s_per_user", "max"),
         ("output_tokens_per_s_per_gpu", "max")),
    View("cost", "Cost per million output tokens against time to first token", ("ttft_s", "min"),
         ("usd_per_mtok_out", "min")),
)
#: the front table's columns for a serving run, in order (each where the run has it): the deployment, its
#: mapping and operating point, then what it gives and costs
TABLE_COLUMNS = ("n_gpus", "replicas_used", "prefill_gpus", "engine", "serving", "precision", "kv_precision", "tp",
                 "pp", "ep", "attn_dp", "concurrency", "ttft_s", "tpot_s", "tokens_per_s_per_user",
                 "output_tokens_per_s_per_gpu", "usd_per_mtok_out", "kv_cache_gb", "power_mw", "capex_usd",
                 "usd_per_hr")
#: of those, the deployment's and the mapping's: a column with one value over the whole front is said once
#: beside the table rather than repeated in every row (the table fits 1,400 px)
DEPLOYMENT_COLUMNS = TABLE_COLUMNS[:TABLE_COLUMNS.index("concurrency") + 1]
#: what a point's hover text adds for a serving design
HOVER = ("concurrency", "ttft_s", "tpot_s", "tokens_per_s_per_user", "output_tokens_per_s_per_gpu", "usd_per_mtok_out",
         "prefill_gpus")
#: the metrics a buyer compares serving designs on (the best design per GPU, the sensitivity's extra columns)
SUMMARY = ("usd_per_mtok_out", "tokens_per_s_per_user", "output_tokens_per_s_per_gpu", "ttft_s")
#: (label, colour) of the parts of a serving design's time per output token (:func:`tpot_parts`)
TPOT_PARTS = (("decode step", "#4C72B0"), ("prefill chunks", "#DD8452"))


def design_label(row, design: Sequence[str]) -> str:
    """A serving design's searched values as its hover text says them: '64×gb200 disaggregated fp4,
    concurrency 16' (the GPU count and GPU first, named choices, then numbers with their column's name)."""
    from dse.report.data import fmt

    head = " ".join(p for p in (f"{fmt(row['n_gpus'])}×" if "n_gpus" in design and "n_gpus" in row else "",
                                str(row["gpu"]) if "gpu" in design and "gpu" in row else "") if p).replace("× ", "×")
    named, numbers = [], []
    for c in design:
        if c in ("n_gpus", "gpu") or c not in row:
            continue
        v = row[c]
        if isinstance(v, str):
            named.append(v)
        else:
            numbers.append(f"{c} {fmt(v)}")
    return ", ".join(p for p in (" ".join(p for p in [head, *named] if p), ", ".join(numbers)) if p)


def is_serving(frame: pd.DataFrame | Sequence[str]) -> bool:
    """A table of serving designs: it has the request shape and the serving model's outputs."""
    columns = set(frame.columns if isinstance(frame, pd.DataFrame) else frame)
    return {"input_len", "output_len", "tokens_per_s_per_user", "usd_per_mtok_out"} <= columns


def shared_columns(fronts: Sequence[pd.DataFrame], columns: Sequence[str]) -> dict[str, object]:
    """Column -> value of the :data:`DEPLOYMENT_COLUMNS` among ``columns`` with one value on every row of
    ``fronts`` (a prefill pool of 0 GPUs everywhere: no disaggregated design on the front)."""
    rows = pd.concat([f for f in fronts if len(f)], ignore_index=True) if any(len(f) for f in fronts) else None
    if rows is None or len(rows) < 2:
        return {}
    out = {}
    for c in columns:
        if c in DEPLOYMENT_COLUMNS and c in rows and rows[c].astype(str).nunique(dropna=False) == 1:
            out[c] = rows[c].iloc[0]
    return out


def view_front(trials: pd.DataFrame, view: View, design: Sequence[str] | None = None) -> pd.DataFrame:
    """The admissible designs of ``trials`` that no other admissible design beats on both of ``view``'s
    metrics, sorted along x (best first)."""
    present = [m for m in view.objectives if m in trials]
    if len(present) < 2 or trials.empty:
        return trials.iloc[:0]
    return front_table(trials, view.objectives, feasible="admissible", dedupe=list(design) if design else None)


def on_view_front(trials: pd.DataFrame, view: View, design: Sequence[str] | None = None) -> np.ndarray:
    """Boolean mask over ``trials``: the designs on ``view``'s front (by their ``trial`` number)."""
    front = view_front(trials, view, design)
    if "trial" in trials and "trial" in front:
        return trials["trial"].isin(front["trial"]).to_numpy()
    return np.zeros(len(trials), dtype=bool)


def tpot_parts(front: pd.DataFrame) -> pd.DataFrame:
    """Seconds of each design's time per output token (TPOT = pp x the mean step, objectives.serving.batching):
    the decode-only step, pp x ``step_time_decode_s``, and what the steps carrying a prefill chunk add,
    pp x ``mixed_step_frac`` x (``step_time_mixed_s`` - ``step_time_decode_s``): prefill's interference with
    decoding, 0 where the prefill runs on its own pool (``serving: disaggregated``); a speculative design's
    step emits ``spec_accept_tokens_per_step`` tokens per request, so each part is over them. Empty where the
    table lacks the step columns. The parts sum to ``tpot_s``."""
    need = ("pp", "step_time_decode_s", "step_time_mixed_s", "mixed_step_frac")
    if not all(c in front for c in need):
        return pd.DataFrame(index=front.index)
    pp = front["pp"].to_numpy(dtype=np.float64)
    decode = front["step_time_decode_s"].to_numpy(dtype=np.float64)
    mixed = front["step_time_mixed_s"].to_numpy(dtype=np.float64)
    frac = front["mixed_step_frac"].to_numpy(dtype=np.float64)
    extra = np.where(frac > 0, frac * (mixed - decode), 0.0)
    per_step = front["spec_accept_tokens_per_step"].to_numpy(dtype=np.float64) \
        if "spec_accept_tokens_per_step" in front else np.ones(len(front))
    per_step = np.where(np.isfinite(per_step) & (per_step >= 1.0), per_step, 1.0)
    labels = [label for label, _ in TPOT_PARTS]
    return pd.DataFrame({labels[0]: pp * decode / per_step, labels[1]: pp * extra / per_step},
                        index=front.index).fillna(0.0)
