"""The recommendation's words for a serving design (objectives.serving, docs/serving.md): its targets, what it
gives a user and the deployment, how it runs and what it costs, in the units a serving buyer reads
(tokens/s per user, TTFT and TPOT in ms, $ per million output tokens)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.names import money, number
from dse.report.serving import tpot_parts

__all__ = ["amount", "delta", "targets_text", "gives", "profile", "seconds"]

#: serving metric -> (how its value reads, the word for more, the word for less)
_WORDS = {
    "usd_per_mtok_out": (lambda v: f"{money(v)} per million output tokens", "dearer", "cheaper"),
    "tokens_per_s_per_user": (lambda v: f"{number(v, 3)} tokens/s per user", "faster per user", "slower per user"),
    "output_tokens_per_s_per_gpu": (lambda v: f"{number(v, 3)} output tokens/s per GPU", "more per GPU",
                                    "fewer per GPU"),
    "output_tokens_per_s": (lambda v: f"{number(v, 3)} output tokens/s", "more", "fewer"),
    "ttft_s": (lambda v: f"TTFT {seconds(v)}", "later", "sooner"),
    "tpot_s": (lambda v: f"TPOT {seconds(v)}", "slower", "faster"),
    "e2e_latency_s": (lambda v: f"end-to-end {seconds(v)}", "slower", "faster"),
    "energy_j_per_tok_out": (lambda v: f"{number(v, 3)} J per output token", "more energy", "less energy"),
}
_TARGET_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_latency_s": "end-to-end latency",
                 "tokens_per_s_per_user": "tokens/s per user"}


def seconds(v: float) -> str:
    """A latency as it is quoted: milliseconds under a second ('42.5 ms'), seconds above ('2.1 s')."""
    v = float(v)
    return f"{number(v * 1e3, 3)} ms" if abs(v) < 1 else f"{number(v, 3)} s"


def amount(metric: str, v: float) -> str | None:
    """A serving metric's value with its unit, or None for a metric this module does not word."""
    words = _WORDS.get(metric)
    return words[0](v) if words else None


def delta(metric: str, a: float, b: float) -> str | None:
    """How ``a`` compares with a neighbour's ``b`` on a serving metric ('$0.03 per million output tokens
    cheaper (-21%)'), or None for a metric this module does not word."""
    words = _WORDS.get(metric)
    if words is None or not (np.isfinite(a) and np.isfinite(b)):
        return None
    d = a - b
    if d == 0:
        return f"the same {metric}"
    pct = f" ({'+' if d > 0 else '-'}{number(abs(d / b) * 100, 2)}%)" if b else ""
    size = words[0](abs(d)).replace("TTFT ", "").replace("TPOT ", "").replace("end-to-end ", "")
    return f"{size} {words[1] if d > 0 else words[2]}{pct}"


def targets_text(targets: dict[str, tuple[str, float]]) -> str:
    """The space's latency targets in words: 'TPOT at most 50 ms (20 tokens/s per user or more) and TTFT at
    most 2 s'."""
    said = []
    for metric, (op, bound) in targets.items():
        name = _TARGET_NAMES.get(metric, metric)
        upper = op.startswith("<")
        value = f"{number(bound, 3)}" if metric == "tokens_per_s_per_user" else seconds(bound)
        text = f"{name} {'at most' if upper else 'at least'} {value}"
        if metric == "tpot_s" and upper and bound > 0:
            text += f" ({number(1 / bound, 3)} tokens/s per user or more)"
        said.append(text)
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else "".join(said)


def _finite(row: pd.Series, c: str) -> float | None:
    v = row.get(c)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None


def gives(row: pd.Series) -> str:
    """What the design gives: each user's speed and wait, the GPUs' throughput and the price of a token."""
    out = []
    user, tpot, ttft = (_finite(row, c) for c in ("tokens_per_s_per_user", "tpot_s", "ttft_s"))
    if user is not None:
        out.append(f"it serves each user {number(user, 3)} tokens/s" + (f" (TPOT {seconds(tpot)})" if tpot else "")
                   + (f" after a {seconds(ttft)} TTFT" if ttft is not None else ""))
    per_gpu = _finite(row, "output_tokens_per_s_per_gpu")
    if per_gpu is not None:
        out.append(f"{number(per_gpu, 3)} output tokens/s per GPU")
    cost = _finite(row, "usd_per_mtok_out")
    if cost is not None:
        out.append(f"at {money(cost)} per million output tokens")
    return ", ".join(out)


def _whole(row: pd.Series, c: str) -> int | None:
    v = _finite(row, c)
    return int(round(v)) if v is not None else None


def profile(row: pd.Series) -> list[str]:
    """How the design runs (instance, mapping, precisions, engine, requests in flight, disaggregation), where
    its time per output token goes and what it costs, in sentences."""
    out = []
    gpu = row.get("gpu", "GPUs")
    n = _whole(row, "n_gpus")
    replicas = _whole(row, "replicas_used") or 1
    mode = str(row.get("serving", "aggregated"))
    degrees = " x ".join(f"{c} {_whole(row, c)}" for c in ("tp", "pp", "ep", "attn_dp")
                         if _whole(row, c) is not None and (_whole(row, c) > 1 or c in ("tp", "pp")))
    head = f"its instance of {number(n)} {gpu}" if n is not None else "its instance"
    head += f" (x {replicas} instances)" if replicas > 1 else ""
    precision = [f"{row['precision']} weights" if isinstance(row.get("precision"), str) else "",
                 f"an {row['kv_precision']} KV cache" if isinstance(row.get("kv_precision"), str) else ""]
    words = f"{head} runs {degrees} {mode}" + (f" with {' and '.join(p for p in precision if p)}" if any(precision) else "")
    if isinstance(row.get("engine"), str):
        words += f" on {row['engine']}"
    b, cap = _whole(row, "concurrency"), _whole(row, "max_concurrency")
    if b is not None:
        kv = _finite(row, "kv_cache_gb")
        words += f", {number(b)} requests in flight" + (f" of the {number(cap)} its KV cache holds" if cap else "") \
            + (f" ({number(kv, 3)} GB per GPU)" if kv is not None else "")
    out.append(words)
    if mode == "disaggregated":
        ratio, pool, kv_s = (_finite(row, c) for c in ("prefill_instances_per_decode", "prefill_gpus", "kv_transfer_s"))
        size = _finite(row, "prefill_n_gpus") or n
        # fewer whole prefill instances than replicas x ratio (objectives/serving/pool_size.py): the decode
        # instances run at that share of their rate
        share = pool / size / (replicas * ratio) if pool and size and ratio else 1.0
        if ratio is not None:
            out.append(f"beside it {number(ratio, 2)} prefill instances per decode instance (rate-matched"
                       + (f"; {number(pool)} prefill GPUs in the deployment" if pool is not None else "")
                       + (f", whole instances: the decode instances at {100 * share:.4g}% of their rate" if share < 1 - 1e-9
                          else "") + ")"
                       + (f", a prompt's KV cache crossing to the decode instance in {seconds(kv_s)}" if kv_s else ""))
    parts = tpot_parts(pd.DataFrame([row]))
    tpot = _finite(row, "tpot_s")
    if len(parts.columns) and tpot:
        split = [f"{v / tpot:.0%} {k}" for k, v in parts.iloc[0].items() if v / tpot >= 0.005]
        out.append(f"a {seconds(tpot)} token is {' and '.join(split)}")
    costs = [f"capex {money(row['capex_usd'])}" if _finite(row, "capex_usd") else "",
             f"{money(row['usd_per_hr'])} an hour" if _finite(row, "usd_per_hr") is not None else ""]
    costs = [c for c in costs if c]
    energy = _finite(row, "energy_j_per_tok_out")
    if costs or energy:
        out.append(("the deployment costs " + " and ".join(costs) if costs else "the deployment")
                   + (f"{' and' if costs else ''} uses {number(energy, 3)} J per output token" if energy else ""))
    idle = _whole(row, "billed_idle_gpus")
    if idle:  # rented whole instances beyond the deployment's GPUs (objectives/serving/rentals.py)
        fixed, per = _whole(row, "replicas"), _whole(row, "instance_gpus")
        why = f"replicas fixed at {fixed}; blank, they fill the instances" if fixed is not None else \
            f"instances of {number(n)} GPUs do not fill {number(per)}-GPU cloud instances" if n and per else \
            "whole cloud instances"
        out.append(f"{number(idle)} of the GPUs its whole cloud instances bill for serve nothing ({why})")
    return out
