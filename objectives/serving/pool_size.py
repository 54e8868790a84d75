"""A disaggregated deployment's prefill pool in whole instances: floor or ceil of replicas x ratio, the cheaper.

Rate matching (objectives/serving/disaggregated.py) puts ratio = X_d / X_p prefill instances beside each decode
instance, a fraction; a deployment of R decode instances runs whole ones. The ceiling, ceil(R x ratio),
keeps up with the decode instances (each at its rate X_d); where R x ratio is just above a whole number it
buys a nearly idle prefill instance (DeepSeek-R1 fp4 on 8 GB200s, 4-GPU prefill, ratio 1.0003: 2 prefill
instances, 16 GPUs, where one prefill instance would carry 99.97% of the tokens on 12). The floor,
k = floor(R x ratio) (at least one instance), carries prompts at k X_p = R X_d x k / (R x ratio) requests per
second, and the decode instances, fed no faster, complete that many: the deployment's output tokens/s are
R X_d OSL x k / (R x ratio). The deployment takes whichever of the two costs less per output token, the cost
per hour of its GPUs (owned or rented, whole cloud instances, power: objectives.serving.economics.
deployment_cost) over its tokens per hour; with the floor, the requests in flight that the pool cannot take
yet wait for it, so TTFT grows by (1 / share - 1) x the request's latency (Little's law at the concurrency
held; objectives/serving/batching.py), and the floor is a choice only where that wait is within one decode
step, the granularity at which requests join the running batch anyway (TTFT carries half a step of it): a
longer wait trades TTFT for cost (the roadmap's Rubin-only pool 2.5% short of its rate match: 4.3 s more TTFT
for 0.02% less cost), a trade the row does not state. Only whole instances deploy, and which of the two whole
counts next to R x ratio a practitioner runs is a cost question (an assumption of this model, not a published
rule; the at-scale figure, ``output_tokens_per_s_per_gpu``, stays the fractional rate match's).

Not throttled, the ceiling kept:
- a row with ``request_rate_per_s`` (replicas given, or sized from the rate): the deployment must carry the
  rate demanded; serving below it is not allowed;
- an aggregated row (no prefill pool; ratio 0);
- where floor and ceiling meet (R x ratio whole, or below one instance).

A rented row whose ``replicas`` fill its whole cloud instances (objectives/serving/rentals.py) keeps them:
with the ceiling they fit the billed instances; the floor uses fewer GPUs and is chosen only where it frees
a whole instance (or GPUs billed one by one) and that costs less per token.
"""

from __future__ import annotations

import numpy as np

from objectives.serving.economics import deployment_cost

__all__ = ["prefill_pool"]


def prefill_pool(c, cal, replicas, ratio, prefill_n_gpus, tokens, may_throttle, latency, step
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(prefill instances, share of the decode rate carried) of a deployment of ``replicas`` decode instances
    at ``ratio`` prefill instances each (0 aggregated), prefill instances of ``prefill_n_gpus`` GPUs, serving
    ``tokens`` output tokens/s at the decode rate, a request taking ``latency`` seconds at that rate, a decode
    step ``step`` seconds; the floor only where ``may_throttle`` and its wait is within a step (module doc)."""
    need = replicas * ratio
    # whole instances within 1e-9 of R x ratio count as it (R x ratio computed in floating point)
    ceil = np.maximum(np.ceil(need - 1e-9), 0.0)
    floor = np.where(ratio > 0, np.maximum(np.floor(need + 1e-9), 1.0), 0.0)
    # the floor's wait before the first token, (R ratio / k - 1) x latency, at most one decode step: the
    # admission granularity TTFT already carries (half a step on average); a longer wait trades TTFT for cost,
    # a choice the row does not state, so the pool keeps up
    wait = (need / np.maximum(floor, 1.0) - 1.0) * latency
    choose = may_throttle & (floor < ceil) & (wait <= step)
    if not np.any(choose):
        return ceil, np.ones_like(ceil)
    # the floor's prompts arrive at k X_p = (k / (R ratio)) R X_d requests/s: the decode instances run that
    # share of their rate; with the concurrency held, the requests the pool cannot take yet wait for it before
    # their first token (batching.py adds that wait to TTFT; TPOT is left at the operating point's, an upper
    # bound: the decode instances hold fewer in flight and step no slower)
    share = np.where(choose, np.minimum(floor / np.where(need > 0, need, 1.0), 1.0), 1.0)
    low = deployment_cost(c, cal, replicas, floor * prefill_n_gpus)["usd_per_hr"] / (tokens * share)
    high = deployment_cost(c, cal, replicas, ceil * prefill_n_gpus)["usd_per_hr"] / tokens
    cheaper = choose & (low < high)  # NaN (an infeasible row's) compares False: the ceiling
    return np.where(cheaper, floor, ceil), np.where(cheaper, share, 1.0)
