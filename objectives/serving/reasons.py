"""Whether a serving row is feasible, and why not in words.

``feasible`` where every ``con_*`` is <= 0 and the throughput is a number: the mapping lays out
(``con_layout``), the GPU has the precisions (``con_precision``), the concurrency's KV cache fits
(``con_memory``: GB per GPU, the larger of one request's overflow and the concurrency's), and the targets are
met (``con_slo``). ``infeasible_reason`` names the first broken, in that order, with its numbers; text is
formatted per distinct value (objectives.divisibility.join_text), never per row in the model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives.base import Model
from objectives.divisibility import join_text, number_text
from objectives.table import CATEGORIES

__all__ = ["ServingFeasible", "serving_infeasible_reason"]


class ServingFeasible(Model):
    requires = ("con_layout", "con_precision", "con_kv", "con_slo", "concurrency", "attn_dp", "kv_request_gb",
                "kv_cache_gb", "output_tokens_per_s", "con_prefill_memory", "con_prefill_layout")
    provides = {
        "con_memory": "GB; KV cache per GPU the concurrency needs minus the capacity (> 0: it does not fit)",
        "feasible": "bool; every con_* <= 0 and the throughput a number",
    }

    def compute(self, c, cal):
        need = np.ceil(c["concurrency"] / c["attn_dp"] - 1e-9) * c["kv_request_gb"]
        memory = np.maximum(c["con_kv"], need - c["kv_cache_gb"])
        ok = (c["con_layout"] <= 0) & (c["con_precision"] <= 0) & (memory <= 1e-9) & (c["con_slo"] <= 1e-9) \
            & (c["con_prefill_memory"] <= 1e-9) & (c["con_prefill_layout"] <= 0) & np.isfinite(c["output_tokens_per_s"])
        return {"con_memory": memory, "feasible": ok}


def serving_infeasible_reason(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """One reason per row ('' where feasible): the first broken constraint (module doc)."""
    n = len(cols["feasible"])

    def col(name):
        return np.broadcast_to(np.asarray(cols[name], dtype=np.float64), (n,))

    out = np.full(n, "", dtype=object)
    todo = ~np.asarray(cols["feasible"], dtype=bool)
    if not todo.any():
        return out
    layout = todo & (col("con_layout") > 0)
    if layout.any():
        out[layout] = join_text(["layout: tp ", col("tp")[layout], ", ep ", col("ep")[layout], ", pp ", col("pp")[layout],
                                 " do not split n_heads ", col("n_heads")[layout], ", n_kv_heads ", col("n_kv_heads")[layout],
                                 ", moe_experts ", col("moe_experts")[layout], ", n_layers ", col("n_layers")[layout],
                                 " (tp must divide the heads, ep the experts and tp x attn_dp)"], int(layout.sum()))
    todo &= ~layout
    prefill_layout = todo & (col("con_prefill_layout") > 0)
    if prefill_layout.any():
        out[prefill_layout] = "layout: the prefill instance's tp, ep or pp do not split the model's heads, experts or layers"
    todo &= ~prefill_layout
    precision = todo & (col("con_precision") > 0)
    if precision.any():
        names = np.asarray(CATEGORIES["precision"], dtype=object)
        out[precision] = join_text(["precision: the GPU has no tensor cores or KV format for ",
                                    names[col("precision")[precision].astype(np.intp)], " weights with a ",
                                    names[col("kv_precision")[precision].astype(np.intp)], " KV cache"], int(precision.sum()))
    todo &= ~precision
    memory = todo & (col("con_memory") > 1e-9)
    if memory.any():
        one = memory & (col("con_kv") > 0)
        if one.any():
            out[one] = join_text(["memory: one request needs ", number_text(col("kv_request_gb")[one], ".2f"),
                                  " GB of KV cache per GPU, ", number_text(col("kv_cache_gb")[one], ".2f"),
                                  " GB free beside ", number_text(col("weights_gb")[one], ".1f"), " GB of weights"],
                                 int(one.sum()))
        many = memory & ~one
        if many.any():
            out[many] = join_text(["memory: concurrency ", number_text(col("concurrency")[many], ".0f"), " needs ",
                                   number_text((col("con_memory") + col("kv_cache_gb"))[many], ".1f"), " GB of KV cache "
                                   "per GPU, ", number_text(col("kv_cache_gb")[many], ".1f"), " GB free (max_concurrency ",
                                   number_text(col("max_concurrency")[many], ".0f"), ")"], int(many.sum()))
    todo &= ~memory
    prefill = todo & (col("con_prefill_memory") > 1e-9)
    if prefill.any():
        out[prefill] = join_text(["memory: the prefill instance holds ", number_text(col("kv_cache_gb")[prefill] * 0
                                  + col("con_prefill_memory")[prefill], ".1f"), " GB too little KV for one step's prompts"],
                                 int(prefill.sum()))
    todo &= ~prefill
    slo = todo & (col("con_slo") > 1e-9)
    if slo.any():
        out[slo] = join_text(["slo: TTFT ", number_text(col("ttft_s")[slo] * 1e3, ".1f"), " ms, TPOT ",
                              number_text(col("tpot_s")[slo] * 1e3, ".2f"), " ms at concurrency ",
                              number_text(col("concurrency")[slo], ".0f"), " against targets ",
                              number_text(col("ttft_slo_s")[slo] * 1e3, ".0f"), " / ",
                              number_text(col("tpot_slo_s")[slo] * 1e3, ".0f"), " ms"], int(slo.sum()))
    todo &= ~slo
    out[todo] = "model: a metric is not a number (an override out of range?)"
    return out
