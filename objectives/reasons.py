"""Why a row is infeasible, in words: built at the output boundary from the ``con_*`` columns and rule codes.

``infeasible_reason`` is '' for a feasible row and one 'kind: what, by how much' line for the others, the
first constraint broken in this order: a rented design without a published price at its pricing, an owned
one without a published system price, a design without a published power (``con_price`` 1, 2, 3; an
announced system, objectives.economics.rental) or larger than its instance's advertised cluster (``con_rental_gpus``,
objectives.economics.rental; one instance where its provider publishes no cluster fabric), an owned design's rack above the site's limit
(``con_rack_kw``) or its peak above the facility's power (``con_facility_mw``, objectives.economics.facility),
a mapping search with no candidate left (``search_lost_rule``), a layout or schedule rule (``layout_rule``,
:mod:`objectives.training.divisibility`), tensor cores for the precision, memory, a spot job preempted faster than it
recovers (``con_preempt``, objectives.training.reliability). Text is formatted once per
distinct value, never per row in the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from objectives.table import CATEGORIES
from objectives.training.divisibility import number_text
from objectives.training.rule_text import RowsOf, join_text, rule_reasons

__all__ = ["infeasible_reason", "reason_kinds", "LOST_RULE", "REASON_COLUMNS"]

#: candidate column of the mapping search: code of the rule no candidate of the row passed (0: a real candidate)
LOST_RULE = "search_lost_rule"
#: the model outputs :func:`infeasible_reason` reads (besides the inputs and the mapping)
REASON_COLUMNS = frozenset({"feasible", "con_layout", "layout_rule", "con_precision", "con_memory", "hbm_used_gb",
                            "hbm_usable_gb", "layers_per_stage", "layers_first_stage", "layers_last_stage", "dp",
                            "n_microbatches", "etp", "con_price", "con_rental_gpus", "con_preempt",
                            "job_mtbp_h", "restart_s", "ckpt_lag_s", "instance_gpus", "server_gpus",
                            "spot_reacquire_s", "con_rack_kw", "rack_kw", "rack_kw_max", "con_facility_mw",
                            "facility_power_peak_mw", "facility_mw"})


def infeasible_reason(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """One reason per row ('' where feasible); ``cols``: the model's float columns (inputs and outputs)."""
    n = len(cols["feasible"])

    def col(name):
        return np.broadcast_to(np.asarray(cols[name], dtype=np.float64), (n,)) if name in cols else np.zeros(n)

    out = np.full(n, "", dtype=object)
    todo = ~np.asarray(cols["feasible"], dtype=bool)
    if not todo.any():
        return out
    price = todo & (col("con_price") == 1)
    if price.any():
        rented = _labels("instance", col("instance")[price])
        rented = np.where(rented == "owned", "this GPU", rented)  # a cloud row naming no instance and no price
        out[price] = join_text(["price: no published price for ", rented, " at ",
                                _labels("pricing", col("pricing")[price])], int(price.sum()))
    out[todo & (col("con_price") == 2)] = ("price: no published price to buy this GPU system (server_usd_per_gpu; "
                                           "an announced system: quote it in a prices: file)")
    out[todo & (col("con_price") == 3)] = ("power: no published power for this GPU system (gpu_tdp_w; an announced "
                                           "system: set it as a what-if)")
    price = todo & (col("con_price") > 0)
    todo &= ~price
    size = todo & (col("con_rental_gpus") > 0)
    if size.any():
        out[size] = _rental_reasons(col, size)
    todo &= ~size
    rack = todo & (col("con_rack_kw") > 0)
    if rack.any():  # 'rack power: 126 kW > rack_kw_max 120'
        out[rack] = join_text(["rack power: ", number_text(col("rack_kw")[rack], ",.4g"), " kW > rack_kw_max ",
                               number_text(col("rack_kw_max")[rack], ",.4g")], int(rack.sum()))
    todo &= ~rack
    site = todo & (col("con_facility_mw") > 0)
    if site.any():  # 'facility power: 116.9 MW peak > facility_mw 100'
        out[site] = join_text(["facility power: ", number_text(col("facility_power_peak_mw")[site], ",.1f"),
                               " MW peak > facility_mw ", number_text(col("facility_mw")[site], ",.6g")], int(site.sum()))
    todo &= ~site
    lost = todo & (col(LOST_RULE) > 0)
    if lost.any():
        out[lost] = _subset_reasons(cols, n, lost, col(LOST_RULE), lost_rule=True)
    todo &= ~lost
    layout = todo & (col("con_layout") > 0)
    if layout.any():
        out[layout] = _subset_reasons(cols, n, layout, col("layout_rule"))
    todo &= ~layout
    precision = todo & (col("con_precision") > 0)
    if precision.any():
        names = np.asarray(CATEGORIES["precision"], dtype=object)[col("precision")[precision].astype(np.intp)]
        names = np.where(col("con_precision")[precision] == 2, "block-scaled (MXFP8; fp8_recipe: tensor_current, "
                         "tensor_delayed or blockwise)", names)
        out[precision] = join_text(["precision: the GPU has no ", names, " tensor cores"], int(precision.sum()))
    todo &= ~precision
    memory = todo & (col("con_memory") > 0)
    if memory.any():
        out[memory] = join_text(["memory: ", number_text(col("hbm_used_gb")[memory], ".1f"), " GB needed, ",
                                 number_text(col("hbm_usable_gb")[memory], ".1f"), " GB usable"], int(memory.sum()))
    todo &= ~memory
    spot = todo & (col("con_preempt") > 0)
    if spot.any():
        out[spot] = _spot_reasons(col, spot)
    todo &= ~spot
    out[todo] = "model: a metric is not a number (an override out of range?)"
    return out


def _rental_reasons(col, rows: np.ndarray) -> np.ndarray:
    """'rental: 4096 GPUs, above the largest aws-p5.48xlarge cluster advertised at spot (2048)'; for an
    instance whose provider publishes no cluster fabric, held to one instance (instances.yaml ``one_instance``):
    'rental: 16 GPUs, no published cluster fabric for lambda-8x-h100: at most 8 GPUs (one instance)'."""
    from objectives.catalog.instances import instances

    n, codes = int(rows.sum()), col("instance")[rows]
    largest = col("n_gpus")[rows] - col("con_rental_gpus")[rows]
    alone = np.array([False, *(e["one_instance"] for e in instances().values())])
    alone = alone[np.where(np.isnan(codes), 0, codes).astype(np.intp)] & (largest == col("instance_gpus")[rows])
    name, gpus = _labels("instance", codes), number_text(col("n_gpus")[rows], ".0f")
    advertised = join_text(["rental: ", gpus, " GPUs, above the largest ", name, " cluster advertised at ",
                            _labels("pricing", col("pricing")[rows]), " (", number_text(largest, ".0f"), ")"], n)
    one = join_text(["rental: ", gpus, " GPUs, no published cluster fabric for ", name, ": at most ",
                     number_text(largest, ".0f"), " GPUs (one instance)"], n)
    return np.where(alone, one, advertised)


def _spot_reasons(col, rows: np.ndarray) -> np.ndarray:
    """'spot: 504 nodes, the job preempted every 41 s on average, sooner than the 1.9 h it takes to recover
    (re-acquire 1.7 h, restart and rework 10 min): most recoveries are cut short' (objectives.training.reliability,
    con_preempt: a recovery finishes untouched with probability below 1/e)."""
    node_gpus = np.where(np.isnan(col("instance_gpus")), col("server_gpus"), col("instance_gpus"))[rows]
    back = col("spot_reacquire_s")[rows]
    restart = col("restart_s")[rows] + col("ckpt_lag_s")[rows]
    return join_text(["spot: ", number_text(col("n_gpus")[rows] / node_gpus, ",.0f"), " nodes, the job preempted every ",
                      duration_text(col("job_mtbp_h")[rows] * 3600.0), " on average, sooner than the ",
                      duration_text(back + restart), " it takes to recover (re-acquire ", duration_text(back),
                      ", restart and rework ", duration_text(restart), "): most recoveries are cut short"], int(rows.sum()))


def duration_text(seconds: np.ndarray) -> np.ndarray:
    """Seconds as '41 s', '25 min' or '1.9 h' (the unit by size), formatted once per distinct value."""
    s = np.asarray(seconds, dtype=np.float64)
    minutes, hours = s < 7200.0, s >= 7200.0
    value = np.where(hours, s / 3600.0, np.where(minutes & (s >= 120.0), s / 60.0, s))
    unit = np.where(hours, " h", np.where(s >= 120.0, " min", " s")).astype(object)
    text = np.where(hours, number_text(value, ",.1f"), number_text(value, ",.0f"))
    return text.astype(object) + unit


def _labels(name: str, codes: np.ndarray) -> np.ndarray:
    """A categorical column's codes as its labels (a blank code as the first label: owned, on_demand)."""
    labels = np.asarray(CATEGORIES[name], dtype=object)
    return labels[np.where(np.isnan(codes), 0, codes).astype(np.intp)]


def _subset_reasons(cols, n, rows, codes, lost_rule=False):
    sub = RowsOf(cols, rows, n, numbers=True)
    return rule_reasons(sub, codes[rows], lost=lost_rule)


def reason_kinds(reasons) -> dict[str, int]:
    """Counts of infeasible rows per kind of reason: the reason with its numbers left out, most first."""
    values, counts = np.unique(np.asarray([r for r in reasons if r], dtype=object).astype(str), return_counts=True)
    kinds: dict[str, int] = {}
    for value, count in zip(values, counts):  # per distinct reason, not per row
        kind = re.sub(r"(?<![\w-])-?\d+(\.\d+)?(?!\w)", "#", value)  # not the 8 of fp8, the 2024 of a stack, p5.48xlarge
        kinds[kind] = kinds.get(kind, 0) + int(count)
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
