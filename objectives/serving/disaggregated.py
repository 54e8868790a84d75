"""Disaggregated serving (``serving: disaggregated``): prefill and decode on pools of their own, rate-matched.

Prefill is compute-bound and decode bandwidth- and capacity-bound; colocated, prompts interrupt decodes and
one mapping serves both (DistServe, OSDI'24; Splitwise, ISCA'24; TensorRT-LLM disaggregated serving, blog 5).
Disaggregated, a row's mapping (``n_gpus``, ``tp``, ``pp``, ``ep``, ``attn_dp``) is a *decode* instance's and
``prefill_n_gpus``, ``prefill_tp``, ``prefill_pp``, ``prefill_ep``, ``prefill_attn_dp`` a *prefill* instance's
(blank: the decode instance's). Per decode instance at concurrency B (b = B / pp per micro-batch):

- decode runs decode-only steps of b tokens (objectives.serving.step): r = b / (OSL - 1) requests complete a
  step, TPOT = pp x T_decode, X_d = r / T_decode requests per second, OSL tokens each (the first comes from
  the prefill);
- a prefill instance runs prefill-only steps, each of its attention groups taking as many whole prompts as
  its token budget holds (a longer prompt in chunks of the budget): X_p = attn_dp x (prompts a step) /
  T_prefill requests per second; a prompt's time to its first token pp x n_chunks x T_prefill, plus half a
  step of waiting for the batch under way;
- the KV of a prompt, kv_bytes_per_token x ISL, moves to the decode instance over NVLink where both fit in one
  NVLink domain (and run on one GPU type), over the scale-out NICs otherwise, at the slower side's NIC, in
  parallel over min(prefill, decode) GPUs
  (inference-measurements.md 2.3; overlapped with other requests' compute, as TensorRT-LLM, SGLang and
  Mooncake do, so it adds to TTFT, not to the steps);
- rate matching (TensorRT-LLM blog 5; inference-measurements.md 3.3): X_d / X_p prefill instances per decode
  instance, and output tokens/s per GPU = X_d OSL / (n_decode + X_d / X_p n_prefill), the figure at scale
  (fractional prefill instances); a deployment of ``replicas`` decode instances runs whole prefill
  instances, k = floor or ceil of replicas X_d / X_p (at least one), whichever costs less per output token
  (objectives/serving/pool_size.py): with the floor the prompts arrive at k X_p and the deployment serves
  replicas X_d OSL x k / (replicas X_d / X_p) output tokens/s, its decode instances below their rate; a
  row with a request rate keeps the ceiling (it must carry the rate).

TTFT = prefill + KV transfer + half a decode step (admission into the running batch). Blank prefill cells
are the decode instance's here; ``objectives.search_serving`` searches them (objectives/serving/
prefill_search.py). Not modelled: a prefill pool's own concurrency (it runs full budgets), queueing at the
prefill pool beyond the fluid steady state. ``prefill_gpu`` runs the prefill pool on another GPU
(objectives/serving/prefill_pool.py): its step, memory and NIC are that GPU's (``prefill_<field>`` columns).
"""

from __future__ import annotations

import numpy as np

from objectives.serving.memory import ServingMemory
from objectives.serving.prefill_pool import PREFILL_GPU_COLUMNS
from objectives.serving.step import StepModel
from objectives.training.collectives import Tiers

__all__ = ["PREFILL_MAPPING", "prefill_columns", "DisaggregatedPools"]

#: the prefill instance's mapping columns and the decode instance's column each defaults to
PREFILL_MAPPING = {"prefill_n_gpus": "n_gpus", "prefill_tp": "tp", "prefill_pp": "pp", "prefill_ep": "ep",
                   "prefill_attn_dp": "attn_dp"}
_MEMORY = ServingMemory()


def prefill_columns(c) -> dict:
    """The columns as a prefill instance sees them: its own mapping (the decode instance's where blank) and its
    own GPU's figures (``prefill_gpu``, objectives/serving/prefill_pool.py: the decode GPU's where the same)."""
    out = dict(c)
    for name, decode in PREFILL_MAPPING.items():
        given = c[name]
        out[decode] = np.where(np.isnan(given), c[decode], given)
    for field, name in PREFILL_GPU_COLUMNS.items():
        if name in c:
            out[field] = c[name]
    if "etp" in c:  # the prefill instance's experts over its own tp x attn_dp / ep (objectives/serving/experts.py)
        out["etp"] = np.broadcast_to(np.nan, np.shape(c["etp"]))
    return out


class DisaggregatedPools:
    """The prefill pool's constants (its step, its memory) and the disaggregated operating point."""

    def __init__(self, c, cal, decode: StepModel):
        p = prefill_columns(c)
        memory = _MEMORY.compute(p, cal)
        p.update(memory)
        self.prefill = StepModel(p, cal)
        self.decode = decode
        self.c, self.p = c, p
        budget = memory["token_budget"]
        isl = c["input_len"]
        # the prompt tokens a prefill computes: ISL, or the uncached (1 - h) ISL (objectives.serving.step)
        new = self.prefill.prefill_tokens
        self.prompts = np.maximum(np.floor(budget / new), 1.0)  # whole prompts a group's step takes
        self.chunk = np.minimum(self.prompts * new, budget)  # prefill tokens of a group's step
        self.n_chunks = np.maximum(np.ceil(new / budget), 1.0)
        # the prefill instance holds the KV of the prompts it is working on: at least one budget's worth,
        # and their cached prefixes, h ISL each (its own cache: the prefix its prefill attends)
        held = self.chunk + self.prompts * (isl - new)
        self.con_memory = (held * memory["kv_bytes_per_token_gpu"] / 1e9 - memory["kv_cache_gb"]) \
            * (c["serving"] == 1)
        self.con_layout = memory["con_layout"] * (c["serving"] == 1)
        self.con_precision = memory["con_precision"]  # on the prefill GPU (prefill_pool.prefill_gpu_constraint)
        # bytes of one prompt's KV (full-attention layers), the cached prefix's included: the decode instance
        # is taken to hold none of it (a prefix cache on the decode side is not modelled)
        kv = c["kv_bytes_per_token"] * isl
        lanes = np.minimum(p["n_gpus"], c["n_gpus"])
        # one NVLink domain holds one GPU type (gpus.yaml ``system``; a Rubin CPX has no NVLink, X41): pools on
        # two GPU types send the KV over the NICs, at the slower side's (p's is the prefill GPU's)
        inside = (p["n_gpus"] + c["n_gpus"] <= c["scaleup_size"]) & ~(np.asarray(c.get("prefill_gpu_differs", 0.0)) > 0)
        nic = np.minimum(c["nic_gbyte_s"], p["nic_gbyte_s"])
        tiers = Tiers(size=c["scaleup_size"], bw_up=c["scaleup_gbyte_s"] * 1e9 * cal.base.scaleup_eff,
                      bw_out=nic * 1e9 * cal.base.scaleout_eff * c["net_eff_rel"], lat_up=0.0,
                      lat_out=cal.base.scaleout_latency_s)
        self.transfer = np.where(inside, kv / (lanes * tiers.bw_up) + cal.base.scaleup_latency_s,
                                 kv / (lanes * tiers.bw_out) + cal.base.scaleout_latency_s)

    def operating_point(self, concurrency) -> dict[str, np.ndarray]:
        """Latencies and throughput per decode instance at ``concurrency`` decoding requests (module doc)."""
        c, p = self.c, self.p
        osl = c["output_len"]
        b = np.maximum(concurrency, 1e-9) / c["pp"]
        # speculative decoding: tau tokens a decode step per request (objectives/serving/speculative.py)
        tau = c["spec_accept_tokens_per_step"] if "spec_draft_tokens" in c else 1.0
        r = b / np.maximum((osl - 1.0) / tau, 1e-9)
        t_decode = self.decode.time(b, 0.0, mixed=False)
        # every attention group of the prefill instance runs its prompts at once: the experts see them all
        t_prefill = self.prefill.time(0.0, self.chunk, mixed=True, pre_stage=p["attn_dp"] * self.chunk)
        x_d = r / t_decode
        x_p = p["attn_dp"] * self.prompts / (self.n_chunks * t_prefill)
        ratio = x_d / x_p
        ttft = p["pp"] * self.n_chunks * t_prefill + 0.5 * t_prefill + self.transfer + 0.5 * t_decode
        return {"t_step": t_decode, "t_mixed": t_prefill, "t_decode": t_decode, "mixed_frac": np.zeros_like(t_decode),
                "dec": b, "chunk": self.chunk, "ttft": ttft, "tpot": c["pp"] * t_decode / tau, "requests_per_s": x_d,
                "tokens_per_s": x_d * osl, "ratio": ratio, "gpus": c["n_gpus"] + ratio * p["n_gpus"]}
