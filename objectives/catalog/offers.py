"""The rental an owned design is weighed against (objectives.economics.breakeven): ``rental_usd_per_gpu_hr`` and
``rental_instance``.

By default the cheapest published on-demand offer of the design's GPU among the catalog's instances that
rent a cluster of its size (``max_gpus`` at on-demand: a provider publishing no cluster fabric rents one
instance); where none does, the GPU's market figure (gpus.yaml ``cloud_usd_per_gpu_hr``, ``rental_instance``
"market"). A table may name the instance (``rental_instance: coreweave-gb200-nvl72``; its on-demand price)
or give the price itself (``rental_usd_per_gpu_hr``, a quote).
"""

from __future__ import annotations

import functools

import numpy as np

from objectives.catalog.instances import PRICINGS, instances
from objectives.table import CATEGORIES, factorize, is_constant

__all__ = ["rental_offers"]

_ON_DEMAND = list(PRICINGS).index("on_demand")


@functools.cache
def _offers() -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """GPU id -> its published on-demand offers, cheapest first: (USD per GPU-hour, largest cluster in GPUs,
    ``rental_instance`` code)."""
    ids = CATEGORIES["rental_instance"]
    by_gpu: dict[str, list] = {}
    for iid, spec in instances().items():
        price = spec["prices"][_ON_DEMAND]
        if np.isfinite(price):
            by_gpu.setdefault(spec["gpu"], []).append((price, spec["max_gpus"][_ON_DEMAND], float(ids.index(iid))))
    return {g: tuple(np.array(col) for col in zip(*sorted(offers))) for g, offers in by_gpu.items()}


def rental_offers(gpu, n_gpus, market_usd_per_gpu_hr, named=None, given=None) -> dict[str, np.ndarray]:
    """Per row, the compared rental's price (USD per GPU-hour) and its ``rental_instance`` code (0: the market
    figure or the table's quote). ``gpu``: GPU ids (text); ``n_gpus``: the design's GPUs (None: any size); ``named``: encoded
    ``rental_instance`` (NaN or 0: choose); ``given``: the table's own price (NaN: none)."""
    gpu = np.asarray(gpu, dtype=object)
    n = len(gpu)
    size = np.zeros(n) if n_gpus is None else np.broadcast_to(np.asarray(n_gpus, dtype=np.float64), (n,))
    if is_constant(gpu) and is_constant(size) and n > 1:  # one design's offer, broadcast
        one = rental_offers(gpu[:1], size[:1], np.broadcast_to(market_usd_per_gpu_hr, (n,))[:1],
                            None if named is None else np.broadcast_to(named, (n,))[:1],
                            None if given is None else np.broadcast_to(given, (n,))[:1])
        return {k: np.broadcast_to(v, (n,)) for k, v in one.items()}
    codes, labels = factorize(gpu)
    best = np.full(n, np.inf)
    best_code = np.zeros(n)
    for k, label in enumerate(labels):  # per distinct GPU (a few): its offers, cheapest first
        price, largest, code = _offers().get(str(label), (np.empty(0),) * 3)
        if not len(price):
            continue
        rows = codes == k
        # the cheapest offer renting n GPUs is the first, in price order, whose largest cluster reaches n: where
        # the running maximum of the largest clusters first reaches n
        first = np.searchsorted(np.maximum.accumulate(largest), size[rows], side="left")
        fits = first < len(price)
        pick = np.minimum(first, len(price) - 1)
        best[rows] = np.where(fits, price[pick], np.inf)
        best_code[rows] = np.where(fits, code[pick], 0.0)
    price = np.where(np.isfinite(best), best, np.broadcast_to(market_usd_per_gpu_hr, (n,)))
    if named is not None:  # a named instance: its on-demand price, whatever the cluster's size
        chosen = np.nan_to_num(np.broadcast_to(np.asarray(named, dtype=np.float64), (n,))).astype(np.intp)
        lut = np.array([np.nan, *(spec["prices"][_ON_DEMAND] for spec in instances().values())])
        price = np.where(chosen > 0, lut[chosen], price)
        best_code = np.where(chosen > 0, chosen, best_code)
    if given is not None:
        own = np.broadcast_to(np.asarray(given, dtype=np.float64), (n,))
        price = np.where(np.isnan(own), price, own)
        best_code = np.where(np.isnan(own), best_code, 0.0)  # a quote: no instance
    return {"rental_usd_per_gpu_hr": price, "rental_instance": best_code}
