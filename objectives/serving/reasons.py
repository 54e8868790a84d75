"""Whether a serving row is feasible, and why not in words.

``feasible`` where every ``con_*`` is <= 0 and the throughput is a number: the engine runs on the GPU's
vendor (``con_engine_vendor``: TensorRT-LLM on NVIDIA GPUs only, objectives.serving.engines.ENGINE_VENDORS),
a disaggregated row's prefill GPU can serve it (``con_prefill_gpu``, objectives/serving/prefill_pool.py),
the mapping lays out (``con_layout``), the GPU has the precisions (``con_precision``), the concurrency's KV
cache fits (``con_memory``: GB per GPU, the larger of one request's overflow and the concurrency's), the
engine batches every request in flight (``con_concurrency``: a given concurrency above the engine's max batch
x attn_dp would queue requests the step model counts as batched), and the targets are met (``con_slo``).
``infeasible_reason`` names the first broken, in that order, with its numbers; text is formatted once per
distinct combination of a reason's numbers (:func:`coded_text`), never per row.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.base import Model
from objectives.serving.engines import ENGINE_VENDORS, ENGINES, VENDORS, engine_runs
from objectives.serving.latency import LATENCY_GRAPH_MAX_BATCH
from objectives.table import CATEGORIES

__all__ = ["ServingFeasible", "serving_infeasible_reason", "coded_text"]

_PRECISIONS = CATEGORIES["precision"]
#: by vendor code: the engines that run on its GPUs
_VENDOR_ENGINES = tuple(", ".join(e for e in ENGINES if v in ENGINE_VENDORS[e]) for v in VENDORS)


def coded_text(parts: list) -> np.ndarray:
    """One string per row, the concatenation of ``parts``: text, or (column, how) with ``how`` a format spec or
    a tuple of names (the column holds their codes). Each column's distinct values are formatted once, with
    the text before them (and the last with the text after it), so a row costs one concatenation per column
    but the first, not one per part (objectives.training.divisibility.join_text)."""
    pieces, text = [], ""
    for part in parts:
        if isinstance(part, str):
            text += part
            continue
        values, inverse = _distinct(np.asarray(part[0], dtype=np.float64))
        how = part[1]
        shown = [how[int(v)] if isinstance(how, tuple) else format(v, how) for v in values]
        pieces.append([[text + t for t in shown], inverse.reshape(-1)])
        text = ""
    pieces[-1][0] = [t + text for t in pieces[-1][0]]
    out = None
    for strings, inverse in pieces:
        column = np.array(strings, dtype=object).take(inverse)
        out = column if out is None else out + column
    return out


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` (NaNs one value, last) at a sort's cost instead of an
    argsort's: the sorted distinct values, then each value's place among them (a binary search)."""
    ordered = np.sort(values)
    keep = np.empty(len(ordered), dtype=bool)
    keep[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    known = ~np.isnan(ordered)
    distinct = ordered[keep & known]
    if not known.all():
        distinct = np.append(distinct, np.nan)
    return distinct, np.searchsorted(distinct, values)


def _spec_text(col, rows) -> np.ndarray:
    """Why a speculative row cannot run (objectives/serving/speculative.py), in words."""
    from objectives.serving.speculative import K_MAX, SPEC_METHODS, mtp_models, spec_models

    models = spec_models() + ("its model",)
    code = col("spec_model_code")[rows]
    model = np.where(np.isnan(code), len(models) - 1, code)
    method = col("spec_decode")[rows]
    mtp = method == SPEC_METHODS.index("mtp")
    no_mtp = mtp & ~np.isin(model, [models.index(m) for m in mtp_models()])
    draft = (method == SPEC_METHODS.index("draft")) & np.isnan(col("spec_draft_params")[rows])
    k, tau = col("spec_draft_tokens")[rows], col("spec_accept_tokens_per_step")[rows]
    out = coded_text(["spec_decode: ", (method, SPEC_METHODS), " has no published acceptance for ", (model, models),
                      " (objectives/catalog/speculative.yaml); set spec_accept_tokens_per_step"])
    if draft.any():
        out[draft] = "spec_decode: draft needs spec_draft_params (the draft model's parameters)"
    too_many = ~no_mtp & ~draft & ((tau > k + 1.0 + 1e-9) | (k > K_MAX))
    if too_many.any():
        out[too_many] = coded_text(["spec_decode: ", (tau[too_many], "g"), " tokens a step accepted from ",
                                    (k[too_many], "g"), " drafts (at most 1 + spec_tokens, spec_tokens at most 16)"])
    if no_mtp.any():
        out[no_mtp] = coded_text(["spec_decode: mtp needs a multi-token-prediction module; ", (model[no_mtp], models),
                                  " has none (models with one: " + ", ".join(mtp_models()) + ")"])
    return out


class ServingFeasible(Model):
    requires = ("con_layout", "con_precision", "con_kv", "con_slo", "con_concurrency", "concurrency", "attn_dp",
                "kv_request_gb",
                "kv_cache_gb", "output_tokens_per_s", "con_prefill_memory", "con_prefill_layout", "engine", "gpu_vendor",
                "con_spec_decode", "con_prefill_gpu")
    provides = {
        "con_engine_vendor": "flag; 1 where the engine does not run on the GPU's vendor (TensorRT-LLM on an AMD GPU)",
        "con_memory": "GB; KV cache per GPU the concurrency needs minus the capacity (> 0: it does not fit)",
        "feasible": "bool; every con_* <= 0 and the throughput a number",
    }

    def compute(self, c, cal):
        need = np.ceil(c["concurrency"] / c["attn_dp"] - 1e-9) * c["kv_request_gb"]
        memory = np.maximum(c["con_kv"], need - c["kv_cache_gb"])
        vendor = 1.0 - engine_runs(c["engine"], c["gpu_vendor"])  # objectives.serving.engines.ENGINE_VENDORS
        ok = (c["con_layout"] <= 0) & (c["con_precision"] <= 0) & (memory <= 1e-9) & (c["con_slo"] <= 1e-9) \
            & (c["con_concurrency"] <= 1e-9) \
            & (c["con_prefill_memory"] <= 1e-9) & (c["con_prefill_layout"] <= 0) & np.isfinite(c["output_tokens_per_s"]) \
            & (vendor <= 0) & (c.get("con_spec_decode", 0.0) <= 0) & (c.get("con_prefill_gpu", 0.0) <= 0)
        return {"con_engine_vendor": vendor, "con_memory": memory, "feasible": ok}


def serving_infeasible_reason(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """One reason per row ('' where feasible): the first broken constraint (module doc). Only the infeasible
    rows are read."""
    n = len(cols["feasible"])
    out = np.full(n, "", dtype=object)
    rows = np.flatnonzero(~np.asarray(cols["feasible"], dtype=bool))
    if not len(rows):
        return out

    def col(name):
        return np.broadcast_to(np.asarray(cols[name], dtype=np.float64), (n,))[rows]

    reason = np.empty(len(rows), dtype=object)
    todo = np.ones(len(rows), dtype=bool)
    if "con_engine_vendor" in cols:
        vendor = col("con_engine_vendor") > 0
        if vendor.any():
            reason[vendor] = coded_text(["engine: ", (col("engine")[vendor], ENGINES), " does not run on ",
                                         (col("gpu_vendor")[vendor], VENDORS), " GPUs; engines for them: ",
                                         (col("gpu_vendor")[vendor], _VENDOR_ENGINES)])
        todo &= ~vendor
    if "con_prefill_gpu" in cols:  # the prefill pool's GPU (objectives/serving/prefill_pool.py)
        from objectives.serving.prefill_pool import prefill_gpu_text

        other = todo & (col("con_prefill_gpu") > 0)
        if other.any():
            reason[other] = prefill_gpu_text(col("con_prefill_gpu")[other])
        todo &= ~other
    if "con_spec_decode" in cols:
        spec = todo & (col("con_spec_decode") > 0)
        if spec.any():
            reason[spec] = _spec_text(col, spec)
        todo &= ~spec
    if "redundant_experts" in cols:  # an expert load balancer's slots (objectives/serving/balance.py)
        redundant = np.nan_to_num(col("redundant_experts"))
        eplb = np.nan_to_num(col("eplb")) if "eplb" in cols else np.zeros(len(rows))
        copies = todo & (col("con_layout") > 0) & (redundant > 0) & ~(eplb > 0)
        slots = todo & (col("con_layout") > 0) & (eplb > 0) & (np.mod(col("moe_experts") + redundant, col("ep")) != 0)
        if copies.any():
            reason[copies] = coded_text(["layout: redundant_experts ", (redundant[copies], "g"), " need eplb 1 (without a "
                                         "load balancer nothing routes to the copies)"])
        if slots.any():
            reason[slots] = coded_text(["layout: ep ", (col("ep")[slots], "g"), " does not divide the balancer's "
                                        "moe_experts + redundant_experts = ", ((col("moe_experts") + redundant)[slots],
                                                                               "g"), " expert slots"])
        todo &= ~(copies | slots)
    layout = todo & (col("con_layout") > 0)
    if layout.any():
        reason[layout] = coded_text(["layout: tp ", (col("tp")[layout], "g"), ", ep ", (col("ep")[layout], "g"), ", pp ",
                                  (col("pp")[layout], "g"), " do not split n_heads ", (col("n_heads")[layout], "g"),
                                  ", n_kv_heads ", (col("n_kv_heads")[layout], "g"), ", moe_experts ",
                                  (col("moe_experts")[layout], "g"), ", n_layers ", (col("n_layers")[layout], "g"),
                                  " (tp must divide the heads, ep the experts (with eplb, experts + redundant_experts) and tp x attn_dp;"
                                  " a given etp x ep make tp x attn_dp; redundant_experts need eplb 1)"])
    todo &= ~layout
    prefill_layout = todo & (col("con_prefill_layout") > 0)
    if prefill_layout.any():
        reason[prefill_layout] = "layout: the prefill instance's tp, ep or pp do not split the model's heads, experts or layers"
    todo &= ~prefill_layout
    precision = todo & (col("con_precision") > 0)
    if precision.any():
        reason[precision] = coded_text(["precision: the GPU has no tensor cores or KV format for ",
                                     (col("precision")[precision], _PRECISIONS), " weights with a ",
                                     (col("kv_precision")[precision], _PRECISIONS), " KV cache"])
    todo &= ~precision
    memory = todo & (col("con_memory") > 1e-9)
    if memory.any():
        one = memory & (col("con_kv") > 0)
        if one.any():
            reason[one] = coded_text(["memory: one request needs ", (col("kv_request_gb")[one], ".2f"),
                                   " GB of KV cache per GPU, ", (col("kv_cache_gb")[one], ".2f"), " GB free beside ",
                                   (col("weights_gb")[one], ".1f"), " GB of weights"])
        many = memory & ~one
        if many.any():
            reason[many] = coded_text(["memory: concurrency ", (col("concurrency")[many], ".0f"), " needs ",
                                    ((col("con_memory") + col("kv_cache_gb"))[many], ".1f"), " GB of KV cache per GPU, ",
                                    (col("kv_cache_gb")[many], ".1f"), " GB free (max_concurrency ",
                                    (col("max_concurrency")[many], ".0f"), ")"])
    todo &= ~memory
    if "con_concurrency" in cols:
        batch = todo & (col("con_concurrency") > 1e-9)
        if batch.any():
            reason[batch] = coded_text(["batch: concurrency ", (col("concurrency")[batch], ".0f"), " above the engine's ",
                                        (col("max_concurrency")[batch], ".0f"), " batched (max_batch_size x attn_dp; a "
                                        f"latency-tuned instance's batch is at most {LATENCY_GRAPH_MAX_BATCH:g} a group): "
                                        "the rest would queue"])
        todo &= ~batch
    prefill = todo & (col("con_prefill_memory") > 1e-9)
    if prefill.any():
        reason[prefill] = coded_text(["memory: the prefill instance holds ", (col("con_prefill_memory")[prefill], ".1f"),
                                   " GB too little KV for one step's prompts"])
    todo &= ~prefill
    slo = todo & (col("con_slo") > 1e-9)
    if slo.any():
        reason[slo] = coded_text(["slo: TTFT ", (col("ttft_s")[slo] * 1e3, ".1f"), " ms, TPOT ",
                               (col("tpot_s")[slo] * 1e3, ".2f"), " ms at concurrency ", (col("concurrency")[slo], ".0f"),
                               " against targets ", (col("ttft_slo_s")[slo] * 1e3, ".0f"), " / ",
                               (col("tpot_slo_s")[slo] * 1e3, ".0f"), " ms"])
    todo &= ~slo
    reason[todo] = "model: a metric is not a number (an override out of range?)"
    out[rows] = reason
    return out
