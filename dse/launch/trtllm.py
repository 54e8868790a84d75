"""A serving instance on TensorRT-LLM: the ``trtllm-serve`` command and its ``--extra_llm_api_options``
YAML (TensorRT-LLM 1.0, PyTorch backend; ``trtllm-2024`` designs on the TensorRT backend).

- tp x attn_dp GPUs per pipeline stage -> ``--tp_size`` (TensorRT-LLM's tensor-parallel world of a stage),
  ``enable_attention_dp`` where attn_dp > 1; pp -> ``--pp_size``; ep -> ``--ep_size`` where > 1;
- the design's requests in flight per attention-DP rank -> ``--max_batch_size`` (TensorRT-LLM schedules
  each attention-DP rank's own batch; the model's batch limit is max_batch_size x attn_dp), and CUDA graphs
  captured for decode batches up to it (``cuda_graph_config.batch_sizes``, padded);
- the model's token budget per attention group -> ``--max_num_tokens``; input + output length ->
  ``--max_seq_len``;
- the KV cache's share of the memory left after weights and activations (the model's, 0.90 by default) ->
  ``kv_cache_config.free_gpu_memory_fraction``; an fp8 KV cache -> ``kv_cache_config.dtype: fp8``.
"""

from __future__ import annotations

import yaml

from dse.launch.instance import Instance, cuda_graph_sizes
from dse.launch.options import keys_in
from dse.launch.output import Output, Raw, command_text

__all__ = ["trtllm_files", "extra_options"]


def extra_options(inst: Instance) -> tuple[dict, list[str]]:
    """(the --extra_llm_api_options YAML as a mapping, notes)."""
    notes, extra = [], {}
    pytorch = inst.engine != "trtllm-2024"
    if inst.attn_dp > 1 and pytorch:
        extra["enable_attention_dp"] = True
        if inst.tp > 1:
            notes.append(f"the {inst.role} instance's attention groups are tp {inst.tp} each; TensorRT-LLM's "
                         "enable_attention_dp makes every rank of --tp_size its own attention group: check the "
                         "engine's docs for attention tensor parallelism inside a group")
    if pytorch and inst.concurrency:
        extra["cuda_graph_config"] = {"enable_padding": True,
                                      "batch_sizes": cuda_graph_sizes(inst.per_group(inst.concurrency))}
    kv = {"free_gpu_memory_fraction": round(inst.kv_frac, 4)}
    if inst.kv_precision == "fp8" and pytorch:
        kv["dtype"] = "fp8"
    elif inst.kv_precision == "fp4":
        notes.append("the design's KV cache is fp4; no TensorRT-LLM 1.0 kv_cache_config.dtype for it is "
                     "documented in dse/launch/options.yaml, so none is written (the engine's default, auto)")
    elif inst.kv_precision == "fp8":
        notes.append("TensorRT backend: the KV cache's fp8 dtype is the engine build's (its quantization), "
                     "not an LLM-API option")
    extra["kv_cache_config"] = kv
    if not pytorch:
        notes.append("a trtllm-2024 design: TensorRT-LLM's TensorRT backend (--backend tensorrt) without CUDA "
                     "graphs, as the model scores it; the PyTorch backend's options (cuda_graph_config, "
                     "enable_attention_dp, kv_cache_config.dtype) are not written"
                     + (f", so the design's attention data parallelism (attn_dp {inst.attn_dp}) is not either"
                        if inst.attn_dp > 1 else ""))
    return extra, notes


def trtllm_files(inst: Instance, stem: str) -> tuple[Output, str]:
    """(``<stem>.sh`` and its extra-options YAML, the command's text) for ``inst``."""
    out = Output()
    extra, notes = extra_options(inst)
    out.notes += notes
    options_file = f"extra-llm-api-options{stem[len('trtllm-serve'):]}.yaml"
    out.emit("trtllm-llm-api", dict(zip(keys_in(extra), _leaves(extra))))
    args = {"--backend": "pytorch" if inst.engine != "trtllm-2024" else "tensorrt",
            "--tp_size": inst.tp * inst.attn_dp, "--pp_size": inst.pp,
            "--ep_size": inst.ep if inst.ep > 1 else None,
            "--max_batch_size": inst.per_group(inst.concurrency) if inst.concurrency else None,
            "--max_num_tokens": inst.token_budget, "--max_seq_len": inst.max_seq_len or None}
    args = {k: v for k, v in args.items() if v is not None}
    out.emit("trtllm-serve", args)
    args["--extra_llm_api_options"] = Raw(f'"$HERE/{options_file}"')
    out.emit("trtllm-serve", ["--extra_llm_api_options"])
    model = Raw(f'"${{MODEL:?set MODEL to a checkpoint of {inst.model} with {inst.precision} weights}}"')
    command = command_text(["trtllm-serve", model], list(args.items()))
    header = (f"# TensorRT-LLM 1.0 LLM-API options for the {inst.role} instance (trtllm-serve "
              "--extra_llm_api_options); values are the model's choice, check them against the docs\n")
    out.files[options_file] = header + yaml.safe_dump(extra, sort_keys=False)
    return out, command


def _leaves(tree: dict) -> list:
    out = []
    for value in tree.values():
        out += _leaves(value) if isinstance(value, dict) and value else [value]
    return out
