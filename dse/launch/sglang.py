"""A serving instance on SGLang: the ``python -m sglang.launch_server`` command (server_args.py).

- SGLang's ``--tp-size`` is every GPU of a pipeline stage; with ``--enable-dp-attention`` and
  ``--dp-size`` attn_dp, attention runs in attn_dp groups of tp_size / dp_size GPUs: so tp x attn_dp ->
  ``--tp-size``, attn_dp -> ``--dp-size`` (where > 1), the design's tp is each group's; pp ->
  ``--pp-size``; ep -> ``--ep-size`` where > 1;
- the design's requests in flight (the whole instance's: SGLang divides ``--max-running-requests`` among
  its attention-DP groups) -> ``--max-running-requests``; the model's token budget per attention group x
  attn_dp (SGLang divides ``--chunked-prefill-size`` by the dp size under DP attention) ->
  ``--chunked-prefill-size``; input + output length -> ``--context-length``;
- the model's share of the HBM for weights and KV (0.88 by default) -> ``--mem-fraction-static``; an fp8
  KV cache -> ``--kv-cache-dtype fp8_e4m3`` (auto: the model's dtype);
- ep with tp x attn_dp: SGLang splits each expert over tp_size / ep_size ranks (``moe_tp_size``), the
  design's etp where ep x etp = tp x attn_dp (objectives/serving/experts.py): no flag of its own;
- speculative decoding (dse/launch/speculation.py) as a chain of k draft tokens: ``--speculative-num-steps``
  k, ``--speculative-eagle-topk 1``, ``--speculative-num-draft-tokens`` k + 1; MTP with
  ``--speculative-algorithm EAGLE`` (SGLang runs DeepSeek's NextN/MTP module on its EAGLE path, NEXTN
  being its alias: server_args.py ``_handle_speculative_decoding``; the module from the target's checkpoint),
  EAGLE-3 with ``EAGLE3`` and ``--speculative-draft-model-path`` the head of speculative.yaml; a separate
  draft model (``STANDALONE``) needs a checkpoint the catalog does not name: not written, said so;
- an expert load balancer (dse/launch/balancer.py; eplb 1) -> ``--enable-eplb`` and, with R copies,
  ``--ep-num-redundant-experts R`` (server_args.py; as SGLang's own DeepSeek tests launch it): online, from
  the trivial placement (``--init-expert-location`` trivial, the default), ``--enable-eplb`` setting the
  load recorder (``expert_distribution_recorder_mode`` stat) and static dispatch itself; SGLang asserts
  ep > 1, and ep must divide E + R: else a note;
- latency tuning -> ``--cuda-graph-max-bs 8`` (CUDA graphs up to the model's batch 8).
"""

from __future__ import annotations

from dse.launch.instance import Instance
from dse.launch.output import Output, Raw, command_text
from dse.launch.speculation import GRAPH_MAX_BATCH

__all__ = ["sglang_files"]


def sglang_files(inst: Instance, stem: str) -> tuple[Output, str]:
    """(no extra files, the launch_server command) for ``inst``."""
    out = Output()
    kv = out.kv_cache_dtype(inst.kv_precision, {"fp8": "fp8_e4m3", "bf16": "auto"}, "SGLang")
    dp = inst.attn_dp > 1
    model = Raw(f'"${{MODEL:?set MODEL to a checkpoint of {inst.model} with {inst.precision} weights}}"')
    args = {"--tp-size": inst.tp * inst.attn_dp, "--pp-size": inst.pp,
            "--dp-size": inst.attn_dp if dp else None, "--enable-dp-attention": True if dp else None,
            "--ep-size": inst.ep if inst.ep > 1 else None, **_balancer(inst, out),
            "--max-running-requests": inst.concurrency or None,
            "--chunked-prefill-size": inst.token_budget * inst.attn_dp if inst.token_budget else None,
            "--context-length": inst.max_seq_len or None,
            "--mem-fraction-static": round(inst.kv_frac, 4), "--kv-cache-dtype": kv,
            **_speculative(inst, out), "--cuda-graph-max-bs": GRAPH_MAX_BATCH if inst.spec.latency_tuned else None}
    args = {k: v for k, v in args.items() if v is not None}
    out.emit("sglang-launch-server", ["--model-path"])
    out.emit("sglang-launch-server", args)
    return out, command_text(["python", "-m", "sglang.launch_server", "--model-path", model], list(args.items()))


def _speculative(inst: Instance, out: Output) -> dict:
    """The speculative flags of the design (module doc); none, with a note, where the catalog names no draft."""
    spec = inst.spec
    if not spec.on:
        return {}
    algorithm = {"mtp": "EAGLE", "eagle3": "EAGLE3"}.get(spec.method)
    if algorithm is None or (spec.method == "eagle3" and not spec.draft):
        out.notes.append(f"the design speculates with {spec.method} ({spec.tokens} draft tokens), but "
                         "objectives/catalog/speculative.yaml names no draft checkpoint for it: no speculative flags are "
                         f"written (SGLang's --speculative-algorithm {'STANDALONE' if spec.method == 'draft' else 'EAGLE3'} "
                         "with --speculative-draft-model-path)")
        return {}
    return {"--speculative-algorithm": algorithm, "--speculative-draft-model-path": spec.draft,
            "--speculative-num-steps": spec.tokens, "--speculative-eagle-topk": 1,
            "--speculative-num-draft-tokens": spec.tokens + 1}


def _balancer(inst: Instance, out: Output) -> dict:
    """The expert load balancer's flags (module doc); none, with a note, where SGLang cannot run it."""
    balancer = inst.balancer
    if not balancer.on:
        return {}
    why = balancer.blocked(inst.ep, "SGLang")
    if why:
        out.notes.append(balancer.refused(why, "--enable-eplb", inst.role))
        return {}
    out.notes.append(f"--enable-eplb ({inst.role} instance): SGLang's online balancer over --ep-size {inst.ep} with "
                     f"{balancer.redundant} redundant experts, starting from the trivial placement and re-placing the "
                     "experts from the loads it records (expert_distribution_recorder_mode stat, which --enable-eplb "
                     "sets; every eplb_rebalance_num_iterations, 1000 by default)")
    return {"--enable-eplb": True, "--ep-num-redundant-experts": balancer.redundant or None}
