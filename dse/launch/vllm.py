"""A serving instance on vLLM: the ``vllm serve`` command (vLLM 0.11 engine args, V1 engine).

- tp -> ``--tensor-parallel-size``, pp -> ``--pipeline-parallel-size``, attn_dp -> ``--data-parallel-size``
  (vLLM's data-parallel attention for MoE models: each rank its own engine and scheduler);
  ep > 1 -> ``--enable-expert-parallel``, which spreads the experts over all tp x dp ranks of the instance
  (a design whose ep is not tp x attn_dp is noted: vLLM has no other EP size);
- the design's requests in flight per data-parallel rank -> ``--max-num-seqs``; the model's token budget
  -> ``--max-num-batched-tokens``; input + output length -> ``--max-model-len``;
- the model's share of the whole HBM for weights, activations and KV (0.90 by default) ->
  ``--gpu-memory-utilization``; the KV cache's precision -> ``--kv-cache-dtype`` (fp8, or auto: the
  model's dtype).
"""

from __future__ import annotations

from dse.launch.instance import Instance
from dse.launch.output import Output, Raw, command_text

__all__ = ["vllm_files"]


def vllm_files(inst: Instance, stem: str) -> tuple[Output, str]:
    """(no extra files, the ``vllm serve`` command) for ``inst``."""
    out = Output()
    kv = out.kv_cache_dtype(inst.kv_precision, {"fp8": "fp8", "bf16": "auto"}, "vLLM")
    if inst.ep > 1 and inst.ep != inst.tp * inst.attn_dp:
        out.notes.append(f"the {inst.role} instance's ep is {inst.ep}; vLLM's --enable-expert-parallel spreads "
                         f"the experts over all tp x dp = {inst.tp * inst.attn_dp} ranks")
    args = {"--tensor-parallel-size": inst.tp, "--pipeline-parallel-size": inst.pp,
            "--data-parallel-size": inst.attn_dp if inst.attn_dp > 1 else None,
            "--enable-expert-parallel": True if inst.ep > 1 else None,
            "--max-num-seqs": inst.per_group(inst.concurrency) if inst.concurrency else None,
            "--max-num-batched-tokens": inst.token_budget, "--max-model-len": inst.max_seq_len or None,
            "--gpu-memory-utilization": round(inst.kv_frac, 4), "--kv-cache-dtype": kv}
    args = {k: v for k, v in args.items() if v is not None}
    out.emit("vllm-serve", args)
    model = Raw(f'"${{MODEL:?set MODEL to a checkpoint of {inst.model} with {inst.precision} weights}}"')
    return out, command_text(["vllm", "serve", model], list(args.items()))
