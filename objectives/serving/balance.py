"""The busiest expert-parallel GPU's routed load, over the mean, with and without an expert load balancer.

Routed tokens do not spread evenly over a model's experts, and an MoE layer waits for its busiest GPU. The
model prices that GPU's load in units of the mean (``imbalance`` >= 1; objectives/serving/step.py scales the
expert GEMMs' token term, the MoE activations and the all-to-all rows by it).

**Without a balancer** (``eplb`` 0, the engines' default placement: expert i on rank i // (E / ep)) a GPU holds
n = E / ep experts, each expert's load spread with coefficient of variation ``expert_load_cv`` (fitted; its
prior 1.28 is DeepSeek-R1's per-expert spread, TensorRT-LLM tech blog 4, Table 1: std 164.1 over a mean of 128
tokens an expert slot, EP 32 on 32 GB200), independent experts, so the GPU's cv is cv / sqrt(n); the busiest of
the ep GPUs sits M(ep) of those spreads above the mean, M(ep) the expected largest of ep standard normal
variables (:func:`expected_max_normal`, Cramer 1946 Sec. 28.6; 1.03 at ep 4, 2.07 at 32, where its large-ep
limit sqrt(2 ln ep), the form before 2026-12-03, gave 1.67 and 2.63):

    imbalance = min(1 + cv M(ep) / sqrt(n), IMBALANCE_MAX)

with ``IMBALANCE_MAX`` = 2.55, the worst measured without rebalancing (the same table: the hottest of 32 ranks
1 + 1.564; SGLang's EP72 decode, where EPLB gained 2.54x, inference-measurements.md 2.4). The fitted cv's box
ends at 2.14, the spread at which the form gives that hottest rank at EP 32 (1 + 2.14 x 2.07 / sqrt(8)): the
measured per-expert cv 1.28 with independent normal experts gives 1.94, the tail being heavier (hot experts on
one rank).

**With a balancer** (``eplb`` 1: TensorRT-LLM ``moe_config.load_balancer``, SGLang ``--enable-eplb``, vLLM
``--enable-eplb``; DeepSeek's EPLB algorithm in each, DeepSeek-V3 report Sec. 3.4) the measured loads place
the experts so that ranks even out, and ``redundant_experts`` R copies of the hottest ones spread their load:
E + R expert slots, s = (E + R) / ep a GPU (every engine needs ep to divide E + R: DeepSeek eplb.py
``num_replicas % num_gpus == 0``, TensorRT-LLM ``num_slots % ep_size``). What remains has two parts, each
from tech blog 4's Table 1:

- the step-to-step spread around the placement: the balanced ranks keep a per-slot cv of ``EPLB_SLOT_CV``
  0.158 in the same normal form, 1 + 0.158 M(ep) / sqrt(s). Derived from Table 1's "EPLB, 9 per-rank slots,
  EP 32" row (the hottest rank 1 + 0.109 = 1 + cv x 2.070 / 3); its other row, "8 per-rank slots, EP 36", is
  then 1 + 0.118 against 1 + 0.115 measured;
- the hottest expert cannot be split below its copies: a GPU holding one copy carries at least the expert's
  load over its copies, ``HOT_EXPERT_RATIO`` 11.95 times a mean expert's (Table 1, no EPLB, by expert slot:
  imbalance ratio 10.948) over min(1 + R, ep) copies, in units of a GPU's mean load (E / ep experts'):
  11.95 ep / (E min(1 + R, ep)). This binds where the balancer has no copies at large EP (R 0 at EP 32: 1.49,
  the placement alone moving rank 13's load to others, tech blog 4 Fig. 22); with one copy a GPU at EP 32 it
  is far below the spread's 1.109 (Table 1 measured that layout's hottest slot at 2.79 x 114 tokens, 0.31 of a
  rank's 1,024). The copies all going to the hottest
  expert is the greedy's first steps (eplb.py ``replicate_experts``: each copy to the expert of most load a
  copy); where the second hottest then binds, the figure is optimistic, which no measurement here resolves.

    imbalance = min(no balancer, max(1 + EPLB_SLOT_CV M(ep) / sqrt(s), HOT_EXPERT_RATIO ep / (E copies)))

Both figures are DeepSeek-R1's on a machine-translation dataset (tech blog 4 shows the hot layer moving with
the dataset: GSM8K's is another); no published serving run in the validation runs a balancer, so a row with
``eplb`` 1 is unvalidated ground (objectives/serving/intervals.py widens it). Not modelled: the online
balancer's weight moves (TensorRT-LLM copies a layer's slots from host memory between steps, overlapped with
compute on GB200's C2C; no cost published) and placement across nodes (DeepSeek's hierarchical policy).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["IMBALANCE_MAX", "EPLB_SLOT_CV", "HOT_EXPERT_RATIO", "expected_max_normal", "expert_slots",
           "expert_imbalance", "balance_layout_bad"]

#: the busiest expert-parallel GPU's routed load over the mean, at most (measured without a balancer)
IMBALANCE_MAX = 2.55
#: the per-slot load spread a balancer leaves (module doc: tech blog 4 Table 1, 0.109 sqrt(9) / E max of 32)
EPLB_SLOT_CV = 0.158
#: the hottest expert's load over a mean expert's (tech blog 4 Table 1, no EPLB, by expert slot: 1 + 10.948)
HOT_EXPERT_RATIO = 11.95
# the standard normal density and distribution on the quadrature grid of expected_max_normal
_X = np.linspace(-9.0, 9.0, 3601)
_PHI = np.exp(-0.5 * _X * _X) / math.sqrt(2.0 * math.pi)
_CDF = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in _X]))


def expert_slots(c) -> np.ndarray:
    """Expert slots of an MoE layer: E, plus the ``redundant_experts`` copies where a balancer runs."""
    return np.maximum(c["moe_experts"], 1.0) + np.where(c["eplb"] > 0, c["redundant_experts"], 0.0)


def expected_max_normal(n) -> np.ndarray:
    """The expected largest of n independent standard normal variables, E max = integral of x n phi(x) Phi(x)^(n-1)
    dx (Cramer 1946 Sec. 28.6), by the trapezoid rule over |x| <= 9 once per distinct n (0 at n = 1; 1.029 at
    4, 2.070 at 32, where sqrt(2 ln n), its large-n limit, gives 1.665 and 2.633)."""
    n = np.asarray(n, dtype=np.float64)
    values, where = np.unique(n, return_inverse=True)
    density = _X * values[:, None] * _PHI * _CDF ** (values[:, None] - 1.0)
    return np.trapezoid(density, _X, axis=1)[where].reshape(n.shape)


def expert_imbalance(c, expert_load_cv) -> np.ndarray:
    """The busiest expert-parallel GPU's routed load over the mean (module doc), 1 where ep is 1."""
    ep = np.maximum(c["ep"], 1.0)
    experts = np.maximum(c["moe_experts"], 1.0)
    largest = expected_max_normal(ep)
    unbalanced = np.minimum(1.0 + expert_load_cv * largest / np.sqrt(np.maximum(experts / ep, 1.0)), IMBALANCE_MAX)
    copies = np.minimum(1.0 + c["redundant_experts"], ep)
    slots = np.maximum(expert_slots(c) / ep, 1.0)
    balanced = np.maximum(1.0 + EPLB_SLOT_CV * largest / np.sqrt(slots), HOT_EXPERT_RATIO * ep / (experts * copies))
    return np.where((c["eplb"] > 0) & (ep > 1.0), np.minimum(unbalanced, balanced), unbalanced)


def balance_layout_bad(c) -> np.ndarray:
    """True where redundant experts are asked for without a balancer (nothing routes to the copies). That ep
    divides the E + R slots is the mapping's rule (objectives/serving/memory.py, candidates.py)."""
    return (c["redundant_experts"] > 0) & ~(c["eplb"] > 0)
