"""A serving instance on vLLM: the ``vllm serve`` command (vLLM 0.11 engine args, V1 engine).

- tp -> ``--tensor-parallel-size``, pp -> ``--pipeline-parallel-size``, attn_dp -> ``--data-parallel-size``
  (vLLM's data-parallel attention for MoE models: each rank its own engine and scheduler);
  ep > 1 -> ``--enable-expert-parallel``, which spreads the experts over all tp x dp ranks of the instance
  (a design whose ep is not tp x attn_dp is noted: vLLM has no other EP size);
- the design's requests in flight per data-parallel rank -> ``--max-num-seqs``; the model's token budget
  -> ``--max-num-batched-tokens``; input + output length -> ``--max-model-len``;
- the model's share of the whole HBM for weights, activations and KV (0.90 by default) ->
  ``--gpu-memory-utilization``; the KV cache's precision -> ``--kv-cache-dtype`` (fp8, or auto: the
  model's dtype);
- speculative decoding (dse/launch/speculation.py) -> ``--speculative-config`` JSON (vllm/config/speculative.py
  SpeculativeConfig): ``method`` mtp (the target's own MTP module; vLLM takes the draft from the target's
  checkpoint) or eagle3 with ``model`` the head of speculative.yaml, ``num_speculative_tokens`` = the draft
  length; a separate draft model (``draft_model``) needs a checkpoint the catalog does not name: not written;
- an expert load balancer (dse/launch/balancer.py; eplb 1) -> ``--enable-eplb`` and, with R copies,
  ``--eplb-config '{"num_redundant_experts":R}'`` (EPLBConfig, vllm/config/parallel.py; the older
  ``--num-redundant-experts`` is deprecated in 0.11); vLLM balances online over its expert-parallel ranks,
  all tp x dp of them, and refuses EPLB without ``--enable-expert-parallel``: written only where ep > 1 and
  tp x dp divides E + R, else a note;
- latency tuning -> ``--max-cudagraph-capture-size 8`` (CUDA graphs up to the model's batch 8); vLLM's
  all-reduce fusion and async scheduling are not written (no vLLM 0.11 source read confirms them with
  speculative decoding), said so.
"""

from __future__ import annotations

import json

from dse.launch.instance import Instance
from dse.launch.output import Output, Raw, command_text
from dse.launch.speculation import GRAPH_MAX_BATCH

__all__ = ["vllm_files"]


def vllm_files(inst: Instance, stem: str) -> tuple[Output, str]:
    """(no extra files, the ``vllm serve`` command) for ``inst``."""
    out = Output()
    kv = out.kv_cache_dtype(inst.kv_precision, {"fp8": "fp8", "bf16": "auto"}, "vLLM")
    if inst.ep > 1 and inst.ep != inst.tp * inst.attn_dp:
        out.notes.append(f"the {inst.role} instance's ep is {inst.ep} (each expert over etp {inst.etp} GPUs); vLLM's "
                         "--enable-expert-parallel spreads whole experts over all tp x dp = "
                         f"{inst.tp * inst.attn_dp} ranks (etp 1), and without it splits every expert over them: it "
                         "has no expert tensor parallelism inside an expert group")
    spec = inst.spec
    speculative = None
    if spec.on:
        config = {"mtp": {"method": "mtp"}, "eagle3": {"method": "eagle3", "model": spec.draft}}.get(spec.method)
        if config is None or (spec.method == "eagle3" and not spec.draft):
            out.notes.append(f"the design speculates with {spec.method} ({spec.tokens} draft tokens), but "
                             "objectives/catalog/speculative.yaml names no draft checkpoint for it: no "
                             "--speculative-config is written (vLLM's method "
                             f"{'draft_model' if spec.method == 'draft' else 'eagle3'} with its model and "
                             f"num_speculative_tokens {spec.tokens})")
        else:
            speculative = json.dumps({**config, "num_speculative_tokens": spec.tokens}, separators=(",", ":"))
    eplb = _balancer(inst, out)
    if spec.latency_tuned:
        out.notes.append(f"latency-tuned: CUDA graphs up to batch {GRAPH_MAX_BATCH} (--max-cudagraph-capture-size); "
                         "vLLM's fused all-reduce and async scheduling are not written (not confirmed for vLLM 0.11 "
                         "with these options)")
    args = {"--tensor-parallel-size": inst.tp, "--pipeline-parallel-size": inst.pp,
            "--data-parallel-size": inst.attn_dp if inst.attn_dp > 1 else None,
            "--enable-expert-parallel": True if inst.ep > 1 else None,
            "--max-num-seqs": inst.per_group(inst.concurrency) if inst.concurrency else None,
            "--max-num-batched-tokens": inst.token_budget, "--max-model-len": inst.max_seq_len or None,
            "--gpu-memory-utilization": round(inst.kv_frac, 4), "--kv-cache-dtype": kv,
            **eplb, "--speculative-config": speculative,
            "--max-cudagraph-capture-size": GRAPH_MAX_BATCH if spec.latency_tuned else None}
    args = {k: v for k, v in args.items() if v is not None}
    out.emit("vllm-serve", args)
    model = Raw(f'"${{MODEL:?set MODEL to a checkpoint of {inst.model} with {inst.precision} weights}}"')
    return out, command_text(["vllm", "serve", model], list(args.items()))


def _balancer(inst: Instance, out: Output) -> dict:
    """The expert load balancer's flags (module doc); none, with a note, where vLLM cannot run it."""
    balancer = inst.balancer
    if not balancer.on:
        return {}
    why = "vLLM's EPLB needs --enable-expert-parallel" if inst.ep <= 1 else \
        balancer.blocked(inst.tp * inst.attn_dp, "vLLM")
    if why:
        out.notes.append(balancer.refused(why, "--enable-eplb", inst.role))
        return {}
    out.notes.append(f"--enable-eplb ({inst.role} instance): vLLM's online balancer over its {inst.tp * inst.attn_dp} "
                     f"expert-parallel ranks with {balancer.redundant} redundant experts, re-placing the experts every "
                     "step_interval steps from a window of measured loads (EPLBConfig's defaults: 3000 and 1000)")
    config = json.dumps({"num_redundant_experts": balancer.redundant}, separators=(",", ":")) if balancer.redundant else None
    return {"--enable-eplb": True, "--eplb-config": config}
