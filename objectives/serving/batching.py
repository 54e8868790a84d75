"""Continuous batching with chunked prefill at steady state: step mix, latencies and throughput.

A fluid model of the schedulers of TensorRT-LLM (in-flight batching with chunked context), vLLM V1 and
SGLang (chunked prefill), as Sarathi-Serve (Agrawal et al. OSDI'24) describes them: every step runs each
decoding request's next token and, within the step's token budget C (``token_budget``), prefill tokens of
requests that have just arrived. With B requests in flight per instance over pp pipeline stages (pp
micro-batches of b = B / pp requests each, one per stage at a time, as TensorRT-LLM pipelines), a request
spends n_p steps in prefill (ceil(ISL / chunk)) and OSL - 1 in decode, so each step completes

    r = min(b / (OSL - 1 + n_p), C / (ISL + OSL - 1))     requests (the second term: the budget binds)

and carries D = r (OSL - 1) decode tokens and r ISL prefill tokens on average. Prefill arrives in chunks
of P_c = min(max(ISL, r ISL), C - D) tokens: a share f = r ISL / P_c of the steps is mixed (decode plus one
chunk), the others decode-only (objectives.serving.step times each). Then

    step  = f T(D, P_c) + (1 - f) T(D, 0);     TPOT = pp x step / tau (each token crosses every stage)
    output tokens/s per instance = r OSL / step;     TTFT = pp (step / 2 + n_res T(D, P_c))

with tau tokens a decode step emits per request (1; with speculative decoding the mean accepted plus one,
OSL - 1 over tau decode steps a request, objectives/serving/speculative.py) and n_res = (b - D) / r steps in
prefill (Little's law on the prefill phase; n_p unless the budget binds)
and half a step of waiting for the step under way. With ``prefix_hit_frac`` h the ISL of the schedule is
the prompt's uncached (1 - h) ISL, the tokens its prefill computes (objectives.serving.step; TensorRT-LLM
KV cache reuse, vLLM automatic prefix caching, SGLang RadixAttention); the KV reserved, and the context
decode reads, stay the whole prompt's (objectives.serving.memory). TTFT leaves out waiting for admission:
an offline benchmark that queues every request at once (trtllm-bench) reports minutes of queueing, which no
steady-state deployment has. E2E = TTFT + (OSL - 1) TPOT (inference-measurements.md 3.1).

The operating point (``concurrency``): given; or, with ``request_rate_per_s`` (over the deployment's
``replicas``), the B at which the instance completes its share of the requests, found by bisection
(throughput rises with B; Little's law, B = rate x E2E, holds at that point by construction), saturated at
``max_concurrency`` where the rate exceeds what it can serve; or, blank, the largest B up to
``max_concurrency`` meeting ``ttft_slo_s`` and ``tpot_slo_s`` (both rise with B), by bisection on log B.
With a request rate and no replicas, the deployment gets as many instances as the rate needs at that
largest B. A rented row (``cost_mode`` cloud on an instance of ``instance_gpus``) that does not fix
``replicas`` then rounds them up to fill the whole instances it pays for (objectives/serving/rentals.py:
1-GPU instances of the model on an 8-GPU instance, 8 replicas), each taking its share of the rate. A
disaggregated deployment's prefill pool is whole instances, the floor or the ceiling of replicas x ratio,
the cheaper per output token (objectives/serving/pool_size.py; the ceiling where a request rate is given).
"""

from __future__ import annotations

import numpy as np

from objectives.serving.designs import PerDesign
from objectives.serving.disaggregated import PREFILL_MAPPING, DisaggregatedPools
from objectives.serving.economics import COST_COLUMNS
from objectives.serving.memory import ServingMemory
from objectives.serving.pool_size import prefill_pool
from objectives.serving.prefill_pool import PREFILL_GPU_COLUMNS, PREFILL_GPU_EXTRA, prefill_gpu_constraint
from objectives.serving.rentals import fill_instances
from objectives.serving.step import STEP_COLUMNS, StepModel, step_design

__all__ = ["ServingBatching", "operating_point", "BISECTIONS"]

#: bisection steps of the concurrency searches (log-spaced: 2^16 requests to 1 in 1/1000 of an octave)
BISECTIONS = 24


def operating_point(step: StepModel, c, concurrency) -> dict[str, np.ndarray]:
    """Step mix, latencies and throughput of one instance at ``concurrency`` requests in flight (module doc).

    Under attention data parallelism (``attn_dp`` groups) each group has its own budget and schedules its
    own requests: the instance's budget is attn_dp x C, a group's chunk has the room its budget leaves
    beside its share of the decodes, and each group carries a chunk in a share p = r ISL / (attn_dp chunk)
    of the steps, independently of the others (TensorRT-LLM's attention-DP balancing, which would align
    them, is off by default: ``attention_dp_config.enable_balance``). A step waits for its slowest group
    (the expert all-gather joins them), so a share 1 - (1 - p)^attn_dp of the steps runs at the mixed
    step's pace; with ``attn_dp_balance`` 1 (enable_balance) the groups take their prompts in the same
    steps, a share p mixed, every group with a chunk."""
    osl, pp, groups = c["output_len"], c["pp"], c["attn_dp"]
    # the prompt tokens a request's prefill computes: ISL, or its uncached (1 - h) ISL under prefix caching
    # (objectives.serving.step, ``prefix_hit_frac``); the schedule below counts these
    isl = step.prefill_tokens
    budget = c["token_budget"]
    total = budget * groups
    b = np.maximum(concurrency, 1e-9) / pp
    # speculative decoding (objectives/serving/speculative.py): a step emits tau tokens a decoding request
    # and takes 1 + k of the token budget (the draft tokens verified count in max_num_tokens)
    tau, verify = _speculation(c)
    decode_steps = (osl - 1.0) / tau
    n_p = np.maximum(np.ceil(isl / budget), 1.0)
    r = np.minimum(b / (decode_steps + n_p), total / (isl + decode_steps * verify))
    for _ in range(2):  # the chunk, with the room the decodes leave, then the steps a prompt takes
        dec = r * decode_steps
        room = np.maximum(budget - dec * verify / groups, 1.0)
        chunk = np.minimum(np.maximum(isl, r * isl / groups), room)
        n_p = np.maximum(np.ceil(isl / chunk), 1.0)
        r = np.minimum(b / (decode_steps + n_p), total / (isl + decode_steps * verify))
    dec = r * decode_steps
    chunk = np.minimum(np.maximum(isl, r * isl / groups), np.maximum(budget - dec * verify / groups, 1.0))
    carry = np.minimum(r * isl / (groups * chunk), 1.0)  # a group's share of steps with a chunk
    # independent groups: a step is mixed where any group has a chunk; balanced (attention_dp_config
    # enable_balance: a group with a prompt waits until every group has one, TensorRT-LLM tech blog 10,
    # "ADP Balance Strategy": 1.33x on DeepSeek-V3 DEP8 on GB200) the chunks land in the same steps
    balanced = c["attn_dp_balance"] > 0
    mixed_frac = np.where(balanced, carry, 1.0 - (1.0 - carry) ** groups)
    # a mixed step's groups with a chunk: groups x carry / mixed_frac on average (at least one; all of them
    # balanced); the experts see all their prefill tokens, the slowest group paces the attention
    carrying = np.where(mixed_frac > 0, groups * carry / np.maximum(mixed_frac, 1e-12), 1.0)
    t_mixed = step.time(dec, chunk, mixed=True, pre_stage=chunk * carrying)
    t_decode = step.time(dec, 0.0, mixed=False)
    t_step = mixed_frac * t_mixed + (1.0 - mixed_frac) * t_decode
    in_prefill = np.maximum(b / r - decode_steps, n_p)
    ttft = pp * (0.5 * t_step + in_prefill * t_mixed)
    tpot = pp * t_step / tau
    return {"t_step": t_step, "t_mixed": t_mixed, "t_decode": t_decode, "mixed_frac": mixed_frac, "dec": dec,
            "chunk": chunk, "ttft": ttft, "tpot": tpot, "requests_per_s": r / t_step, "tokens_per_s": r * osl / t_step}


def _speculation(c):
    """(tau, 1 + k): the mean tokens a verify step emits per decoding request and the tokens it verifies
    (1, 1 without speculation; objectives/serving/speculative.py)."""
    if "spec_draft_tokens" not in c:
        return 1.0, 1.0
    return c["spec_accept_tokens_per_step"], 1.0 + c["spec_draft_tokens"]


def _bisect(lo, hi, ok, steps=BISECTIONS):
    """The largest x in [lo, hi] (log scale) with ok(x) True, ok rising to False; lo where ok(lo) is False."""
    lo, hi = np.log(lo), np.log(np.maximum(hi, lo))
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        good = ok(np.exp(mid))
        lo, hi = np.where(good, mid, lo), np.where(good, hi, mid)
    return np.exp(lo)


class ServingBatching(PerDesign):
    requires = tuple(dict.fromkeys(STEP_COLUMNS + ServingMemory.requires + tuple(PREFILL_MAPPING) + (
        "token_budget", "max_concurrency", "concurrency", "request_rate_per_s", "replicas", "ttft_slo_s", "tpot_slo_s",
        "n_gpus", "serving", "kv_bytes_per_token", "attn_dp_balance", "cost_mode", "instance_gpus", "spec_draft_tokens",
        "spec_accept_tokens_per_step", "spec_draft_layers") + tuple(PREFILL_GPU_COLUMNS.values()) + PREFILL_GPU_EXTRA
        + COST_COLUMNS))
    provides = {
        "concurrency": "requests; requests in flight per instance at the operating point",
        "ttft_s": "s; time to first token at steady state (no admission queueing)",
        "tpot_s": "s; time per output token (mean inter-token latency)",
        "e2e_latency_s": "s; a request's latency, ttft_s + (output_len - 1) x tpot_s",
        "tokens_per_s_per_user": "tokens/s; one request's output rate, 1 / tpot_s",
        "output_tokens_per_s_instance": "tokens/s; output tokens per second of one instance",
        "output_tokens_per_s": "tokens/s; output tokens per second of the deployment (replicas instances; "
                               "disaggregated, fed by its whole prefill instances, objectives/serving/pool_size.py)",
        "output_tokens_per_s_per_gpu": "tokens/s; output tokens per second per GPU (disaggregated: at scale, "
                                       "the rate match's fractional prefill instances per decode instance)",
        "requests_per_s": "requests/s; requests the deployment completes per second",
        "replicas_used": "count; instances of the deployment (replicas, or sized from request_rate_per_s; "
                         "rented without replicas, as many as fill the whole cloud instances it pays for)",
        "step_time_s": "s; mean step of one pipeline stage (decode-only and mixed steps)",
        "step_time_decode_s": "s; a decode-only step",
        "step_time_mixed_s": "s; a step with a prefill chunk",
        "mixed_step_frac": "ratio; share of steps carrying a prefill chunk",
        "decode_tokens_per_step": "tokens; decode tokens per step over one stage's micro-batch",
        "prefill_chunk_tokens": "tokens; prefill tokens in a mixed step",
        "saturated": "flag; 1 where the offered request rate exceeds what the instances serve at max_concurrency",
        "con_slo": "ratio; the worse of ttft_s / ttft_slo_s and tpot_s / tpot_slo_s, minus 1 (> 0: a target missed)",
        "con_concurrency": "requests; concurrency minus max_concurrency (> 0: its KV cache or the engine's batch does not "
                           "hold it)",
        "prefill_instances_per_decode": "ratio; disaggregated: prefill instances a decode instance needs (rate "
                                        "matching; 0 aggregated)",
        "prefill_gpus": "count; disaggregated: GPUs of the deployment's whole prefill instances, floor or ceil of "
                        "replicas x ratio, the cheaper per output token (objectives/serving/pool_size.py; 0 aggregated)",
        "kv_transfer_s": "s; disaggregated: one prompt's KV from its prefill instance to its decode instance (0 aggregated)",
        "con_prefill_memory": "GB; disaggregated: the prefill instance's KV for one step's prompts minus its capacity "
                              "(> 0: it does not fit)",
        "con_prefill_layout": "flag; disaggregated: 1 where the prefill instance's mapping cannot lay out",
        "con_prefill_gpu": "code; > 0 where the prefill GPU (prefill_gpu) cannot serve the row: 1 aggregated, 2 engine "
                           "vendor, 3 precision, 4 no published price, 5 no published power (objectives/serving/prefill_pool.py)",
    }

    #: what the design part reads: the step's columns but the request shape (objectives.serving.step.step_design)
    design_requires = tuple(k for k in STEP_COLUMNS if k not in ("input_len", "output_len", "prefix_hit_frac"))

    def design_compute(self, c, cal):
        """The step's constants of the design alone (objectives/serving/designs.py)."""
        return step_design(c, cal)

    def row_compute(self, c, d, cal):
        """The request's step terms, the operating point and its metrics, per row (``d``: the design part)."""
        step = StepModel(c, cal, d)
        cap = np.maximum(c["max_concurrency"], 1.0)
        ttft_slo = np.where(np.isnan(c["ttft_slo_s"]), np.inf, c["ttft_slo_s"])
        tpot_slo = np.where(np.isnan(c["tpot_slo_s"]), np.inf, c["tpot_slo_s"])
        given = ~np.isnan(c["concurrency"])
        rate = c["request_rate_per_s"]
        by_rate = ~given & ~np.isnan(rate)
        replicas_given = ~np.isnan(c["replicas"])

        disaggregated = c["serving"] == 1
        pools = DisaggregatedPools(c, cal, step) if np.any(disaggregated) else None

        def point(x):
            """The operating point at concurrency x: aggregated, or disaggregated where the row is."""
            op = operating_point(step, c, x)
            if pools is None:
                return op
            other = pools.operating_point(x)
            return {k: np.where(disaggregated, other[k], op[k]) for k in op} | \
                {"ratio": np.where(disaggregated, other["ratio"], 0.0), "gpus": np.where(disaggregated, other["gpus"],
                                                                                        c["n_gpus"])}

        def meets(b):
            op = point(b)
            return (op["ttft"] <= ttft_slo) & (op["tpot"] <= tpot_slo)

        searched = ~given & ~(by_rate & replicas_given)
        best = cap
        if np.any(searched & (np.isfinite(ttft_slo) | np.isfinite(tpot_slo))):
            best = np.where(meets(cap), cap, np.maximum(np.floor(_bisect(1.0, cap, meets)), 1.0))
        replicas = np.where(replicas_given, c["replicas"], 1.0)
        sized = by_rate & ~replicas_given
        # rented, replicas not given: as many as fill the whole instances paid for (objectives/serving/rentals.py)
        fill = ~replicas_given & (c["cost_mode"] == 1) & (c["instance_gpus"] > 0)
        first = None  # the operating point before the rate's share: the best (or given) concurrency
        if np.any(sized) or (pools is not None and np.any(fill & disaggregated)):
            first = point(np.where(given, c["concurrency"], best))
        if np.any(sized):  # sized: instances the rate needs at the best concurrency
            replicas = np.where(sized, np.maximum(np.ceil(rate / first["requests_per_s"]), 1.0), replicas)
        if np.any(fill):
            ratio = first.get("ratio", 0.0) if first is not None else 0.0  # prefill instances per decode instance
            # a prefill pool on another GPU is not in the decode GPU's cloud instances: billed per GPU
            # (objectives/serving/economics.py), the decode instances alone fill theirs
            ratio = np.where(c["prefill_gpu_differs"] > 0, 0.0, ratio)
            prefill_gpus = pools.p["n_gpus"] if pools is not None else c["n_gpus"]
            replicas = np.where(fill, fill_instances(replicas, c["n_gpus"], ratio, prefill_gpus, c["instance_gpus"]),
                                replicas)
        b = np.where(given, c["concurrency"], best)
        saturated = np.zeros((), dtype=bool)  # one value, broadcast: no row's rate is given
        if np.any(by_rate):
            share = rate / replicas  # each instance's requests per second
            saturated = by_rate & (point(cap)["requests_per_s"] < share)
            at_rate = _bisect(1e-3, cap, lambda x: point(x)["requests_per_s"] <= share)
            b = np.where(by_rate, np.where(saturated, cap, at_rate), b)
        op = point(b)
        ratio, gpus = op.get("ratio", 0.0), op.get("gpus", c["n_gpus"])
        tokens = op["tokens_per_s"] * replicas
        pool, share = 0.0, 1.0  # aggregated throughout: no prefill pool, every instance at its rate
        latency = op["ttft"] + (c["output_len"] - 1.0) * op["tpot"]  # a request's, at the instance's rate
        if pools is not None:  # whole prefill instances, floor or ceil of replicas x ratio (pool_size.py)
            pool, share = prefill_pool(c, cal, replicas, ratio, pools.p["n_gpus"], tokens, ~by_rate, latency,
                                       op["t_decode"])
        zero = np.zeros(np.shape(b) if pools is not None else ())  # aggregated throughout: one value, broadcast
        # fewer whole prefill instances than the rate match asks (share < 1): with b requests kept in flight a
        # request's cycle takes 1 / share as long (Little's law, b = rate x latency), the extra waiting for the
        # prefill pool, before its first token
        ttft = op["ttft"] + (1.0 / share - 1.0) * latency
        slo = np.maximum(ttft / ttft_slo, op["tpot"] / tpot_slo) - 1.0
        return {
            "concurrency": b,
            "ttft_s": ttft,
            "tpot_s": op["tpot"],
            "e2e_latency_s": ttft + (c["output_len"] - 1.0) * op["tpot"],
            "tokens_per_s_per_user": 1.0 / op["tpot"],
            "output_tokens_per_s_instance": op["tokens_per_s"],
            "output_tokens_per_s": tokens * share,
            # the at-scale figure: the rate match's fractional prefill instances, whole pools at any scale
            "output_tokens_per_s_per_gpu": op["tokens_per_s"] / gpus,
            "requests_per_s": op["requests_per_s"] * replicas * share,
            "replicas_used": replicas,
            "step_time_s": op["t_step"],
            "step_time_decode_s": op["t_decode"],
            "step_time_mixed_s": op["t_mixed"],
            "mixed_step_frac": op["mixed_frac"],
            "decode_tokens_per_step": op["dec"],
            "prefill_chunk_tokens": op["chunk"],
            "saturated": saturated.astype(np.float64),
            "con_slo": slo,
            "con_concurrency": b - c["max_concurrency"],
            "prefill_instances_per_decode": zero + ratio,
            "prefill_gpus": zero if pools is None else pool * pools.p["n_gpus"],
            "kv_transfer_s": zero if pools is None else np.where(disaggregated, pools.transfer, 0.0),
            "con_prefill_memory": zero - 1.0 if pools is None else np.where(disaggregated, pools.con_memory, -1.0),
            "con_prefill_layout": zero if pools is None else np.where(disaggregated, pools.con_layout, 0.0),
            "con_prefill_gpu": prefill_gpu_constraint(c, 0.0 if pools is None else pools.con_precision),
        }
