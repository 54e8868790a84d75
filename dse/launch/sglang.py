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
  KV cache -> ``--kv-cache-dtype fp8_e4m3`` (auto: the model's dtype).
"""

from __future__ import annotations

from dse.launch.instance import Instance
from dse.launch.output import Output, Raw, command_text

__all__ = ["sglang_files"]


def sglang_files(inst: Instance, stem: str) -> tuple[Output, str]:
    """(no extra files, the launch_server command) for ``inst``."""
    out = Output()
    kv = out.kv_cache_dtype(inst.kv_precision, {"fp8": "fp8_e4m3", "bf16": "auto"}, "SGLang")
    dp = inst.attn_dp > 1
    model = Raw(f'"${{MODEL:?set MODEL to a checkpoint of {inst.model} with {inst.precision} weights}}"')
    args = {"--tp-size": inst.tp * inst.attn_dp, "--pp-size": inst.pp,
            "--dp-size": inst.attn_dp if dp else None, "--enable-dp-attention": True if dp else None,
            "--ep-size": inst.ep if inst.ep > 1 else None,
            "--max-running-requests": inst.concurrency or None,
            "--chunked-prefill-size": inst.token_budget * inst.attn_dp if inst.token_budget else None,
            "--context-length": inst.max_seq_len or None,
            "--mem-fraction-static": round(inst.kv_frac, 4), "--kv-cache-dtype": kv}
    args = {k: v for k, v in args.items() if v is not None}
    out.emit("sglang-launch-server", ["--model-path"])
    out.emit("sglang-launch-server", args)
    return out, command_text(["python", "-m", "sglang.launch_server", "--model-path", model], list(args.items()))
