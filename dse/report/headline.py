"""The decision in one sentence: what to buy and what it gives, the first thing the page, the Markdown
summary and the terminal say.

"Recommended: 4,096 × gb200, owned, fp8, dp 1,024 × tp 4 × pp 1, ZeRO-1: time to train 12.8 days (80%
interval 7.73–20.8 days) and run cost $3.7M (80% interval $2.9M–$4.6M)." The GPU (or the cloud
instance that rents it) and its count, owned or rented, the precision and the mapping, then each objective
with its 80% interval (objectives.training.intervals) in the units of dse.report.display; where the first
objective's interval stands on thin ground (dse.report.sureness), a caveat sentence beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.report.display import phrase, unit_for, value_text
from dse.report.names import choice_text, number
from dse.report.sureness import interval_span, thin_ground

__all__ = ["Decision", "decision", "hardware_words", "objective_words"]

#: a serving design's price of a token and latencies, said beside its objectives where they are not among them
SERVING_LATENCIES = ("usd_per_mtok_out", "tpot_s", "ttft_s")


@dataclass
class Decision:
    sentence: str  # "Recommended: ...: objectives with intervals."
    caveat: str  # "" or "Thin ground: ..."


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or (isinstance(v, str) and not v.strip())


def _whole(row: pd.Series, c: str) -> int | None:
    v = row.get(c)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return int(round(v)) if np.isfinite(v) else None


def ownership(row: pd.Series) -> str:
    """'owned', 'rented as aws-p5.48xlarge (on-demand)' or 'rented'."""
    inst = row.get("instance")
    if isinstance(inst, str) and inst.strip() and inst.strip() != "owned":
        pricing = row.get("pricing")
        return f"rented as {inst}" + (f" ({choice_text('pricing', pricing)})" if not _blank(pricing) else "")
    if str(row.get("cost_mode", "owned")) in ("1", "1.0", "cloud"):
        return "rented"
    return "owned"


def hardware_words(row: pd.Series, serving: bool = False) -> str:
    """'4,096 × gb200, owned, fp8' (a serving design: 'fp4 weights, fp8 KV cache')."""
    n = _whole(row, "n_gpus")
    gpu = str(row.get("gpu", "GPUs"))
    if row.get("catalog_estimated") in (1, True):
        gpu += " (estimated)"
    parts = [f"{number(n)} × {gpu}" if n is not None else gpu, ownership(row)]
    precision = row.get("precision")
    if not _blank(precision):
        text = choice_text("precision", precision)
        kv = row.get("kv_precision")
        parts.append(f"{text} weights, {kv} KV cache" if serving and isinstance(kv, str) else text)
    return ", ".join(parts)


def mapping_short(row: pd.Series, serving: bool = False) -> str:
    """'dp 1,024 × tp 4 × pp 1, ZeRO-1'; a serving design: 'tp 1 × pp 1, aggregated, 256 requests in flight'."""
    names = ("tp", "pp", "ep", "attn_dp") if serving else ("dp", "tp", "pp", "cp", "ep")
    degrees = [f"{c.replace('attn_dp', 'attention dp')} {number(_whole(row, c))}" for c in names
               if _whole(row, c) is not None and (_whole(row, c) > 1 or c in ("dp", "tp", "pp"))]
    words = [" × ".join(degrees)] if degrees else []
    if serving:
        if isinstance(row.get("serving"), str):
            words.append(row["serving"])
        words += serving_options(row)
        if _whole(row, "concurrency") is not None:
            words.append(f"{number(_whole(row, 'concurrency'))} requests in flight")
    elif _whole(row, "zero_stage") is not None:
        words.append(f"ZeRO-{_whole(row, 'zero_stage')}")
    return ", ".join(words)


def serving_options(row: pd.Series) -> list[str]:
    """A serving design's deployment choices beyond its mapping, each only where taken (what a deployer must set:
    dse launch writes them): 'mtp speculative decoding, 3 draft tokens', 'expert tensor parallelism 2',
    'latency-tuned', 'expert load balancer, 32 redundant experts'."""
    words = []
    spec = row.get("spec_decode")
    if isinstance(spec, str) and spec != "none":
        k = _whole(row, "spec_draft_tokens") or _whole(row, "spec_tokens")  # the model's k (blank spec_tokens: 3)
        words.append(f"{spec} speculative decoding" + (f", {number(k)} draft tokens" if k else ""))
    etp = _whole(row, "etp")
    if etp is not None and etp > 1:
        words.append(f"expert tensor parallelism {number(etp)}")
    if _whole(row, "latency_tuned") == 1:
        words.append("latency-tuned")
    if _whole(row, "eplb") == 1:
        copies = _whole(row, "redundant_experts")
        words.append("expert load balancer" + (f", {number(copies)} redundant experts" if copies else ""))
    return words


def objective_words(metric: str, row: pd.Series) -> str:
    """'time to train 12.8 days (80% interval 7.73–20.8 days)'; without an interval, the value alone."""
    v = float(row[metric])
    lo, hi = row.get(f"{metric}_lo"), row.get(f"{metric}_hi")
    has = all(isinstance(x, (int, float, np.number)) and np.isfinite(float(x)) for x in (lo, hi))
    unit = unit_for(metric, [v, float(lo), float(hi)] if has else [v])
    said = f"{phrase(metric)} {value_text(metric, v, unit)}"
    if not has:
        return said
    a, b = value_text(metric, float(lo), unit), value_text(metric, float(hi), unit)
    if unit[0] not in ("$", "%", "count") and a.endswith(" " + unit[0]):
        a = a[: -len(unit[0]) - 1]  # the unit once: 7.73–20.8 days
    return f"{said} (80% interval {a}–{b})"


def decision(objectives: dict[str, str], row: pd.Series, serving: bool = False) -> Decision:
    """The recommendation ``row`` as one sentence, and its caveat where it stands on thin ground."""
    said = [objective_words(m, row) for m in objectives if m in row]
    if serving:
        said += [objective_words(m, row) for m in SERVING_LATENCIES if m in row and m not in objectives]
    gives = ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else "".join(said)
    what = ", ".join(p for p in (hardware_words(row, serving), mapping_short(row, serving)) if p)
    sentence = f"Recommended: {what}: {gives}."
    first = list(objectives)[0]
    why = thin_ground(first, row) if first in row else None
    caveat = ""
    if why is not None:
        caveat = (f"Thin ground: the 80% interval of {phrase(first)} is {interval_span(first, row)}"
                  + (f" ({'; '.join(why)})" if why else "") + "; read the recommendation as a direction, "
                  "not a figure.")
    return Decision(sentence=sentence, caveat=caveat)
