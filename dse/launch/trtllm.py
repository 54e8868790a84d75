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
  ``kv_cache_config.free_gpu_memory_fraction``; an fp8 KV cache -> ``kv_cache_config.dtype: fp8``;
- expert tensor parallelism beside expert parallelism (1 < etp, ep > 1) -> ``moe_tensor_parallel_size``
  (TensorRT-LLM: tp_size = moe_tensor_parallel_size x moe_expert_parallel_size; blank it derives
  tp_size / ep_size, so it is written only where both split);
- speculative decoding (dse/launch/speculation.py) -> ``speculative_config``: MTP as ``decoding_type: MTP``
  with ``num_nextn_predict_layers`` = the draft length (TensorRT-LLM runs DeepSeek's one MTP module that many
  times: tech blog 2, "MTP Eagle"; the DeepSeek-R1 min-latency guide writes 3); EAGLE-3 as ``decoding_type:
  Eagle``, ``max_draft_len`` = the draft length, ``speculative_model_dir`` the head of speculative.yaml and
  ``eagle3_one_model: true`` (tech blog 6, the Llama 4 Maverick guide); a separate draft model's
  (``DraftTarget``) needs a checkpoint the catalog does not name: not written, said so;
- an expert load balancer (dse/launch/balancer.py; eplb 1) -> ``moe_config.load_balancer: {num_slots: E + R,
  layer_updates_per_iter: 1}``: the online balancer, which re-places one MoE layer's experts each iteration
  from the loads it measures and needs no statistics run (examples/wide_ep/README.md writes it inline so,
  with 1; 0 is the offline one, a static placement from ``initial_global_assignments`` that a recorded
  statistics run generates, examples/wide_ep/ep_load_balancer); ep > 1 with ep dividing E + R, else a note;
- latency tuning -> ``cuda_graph_config: {enable_padding: true, max_batch_size: 8}`` (the Maverick guide's),
  ``disable_overlap_scheduler: false`` (the overlap scheduler, 1.0's default, stated) and
  ``TRTLLM_ENABLE_PDL=1`` before the command (both guides' environment); the all-reduce's fusion with
  RMSNorm is the models' own (tech blog 1 Modules 9 and 13), no option.
"""

from __future__ import annotations

import yaml

from dse.launch.instance import Instance, cuda_graph_sizes
from dse.launch.options import keys_in
from dse.launch.output import Output, Raw, command_text
from dse.launch.speculation import GRAPH_MAX_BATCH

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
    spec = inst.spec
    if pytorch and spec.latency_tuned:
        extra["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": GRAPH_MAX_BATCH}
        extra["disable_overlap_scheduler"] = False
    elif pytorch and inst.concurrency:
        extra["cuda_graph_config"] = {"enable_padding": True,
                                      "batch_sizes": cuda_graph_sizes(inst.per_group(inst.concurrency))}
    if pytorch and inst.etp > 1 and inst.ep > 1:
        extra["moe_tensor_parallel_size"] = inst.etp
    balancer = inst.balancer
    if balancer.on:
        why = "TensorRT-LLM's TensorRT backend takes no load balancer" if not pytorch else \
            (balancer.blocked(inst.ep, "TensorRT-LLM") or (None if balancer.slots else "the model's expert count is unknown"))
        if why:
            notes.append(balancer.refused(why, "moe_config.load_balancer", inst.role))
        else:
            extra["moe_config"] = {"load_balancer": {"num_slots": balancer.slots, "layer_updates_per_iter": 1}}
            notes.append(f"moe_config.load_balancer ({inst.role} instance): the online balancer, {balancer.slots} expert "
                         f"slots ({balancer.experts} experts + {balancer.redundant} copies, {balancer.slots // inst.ep} a "
                         "GPU), layer_updates_per_iter 1 re-placing one MoE layer's experts each iteration from the "
                         "loads it measures (0 would be a static placement from a recorded statistics run, "
                         "examples/wide_ep/ep_load_balancer). It keeps every expert's weights in host shared memory "
                         "(examples/wide_ep/README.md: its prerequisites, TRTLLM_EPLB_SHM_NAME); a release that takes "
                         "load_balancer only as a file's path (1.0's wide-EP README) needs these two keys in a YAML "
                         "file named there")
    if spec.on and pytorch:
        config = _speculative_config(inst, notes)
        if config:
            extra["speculative_config"] = config
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
    if not pytorch and (spec.on or spec.latency_tuned):
        notes.append(f"the design {'speculates (' + spec.method + ')' if spec.on else ''}"
                     f"{' and ' if spec.on and spec.latency_tuned else ''}"
                     f"{'is latency-tuned' if spec.latency_tuned else ''}: TensorRT-LLM's TensorRT backend takes "
                     "neither from LLM-API options (its engine is built for them); none is written")
    if not pytorch:
        notes.append("a trtllm-2024 design: TensorRT-LLM's TensorRT backend (--backend tensorrt) without CUDA "
                     "graphs, as the model scores it; the PyTorch backend's options (cuda_graph_config, "
                     "enable_attention_dp, kv_cache_config.dtype) are not written"
                     + (f", so the design's attention data parallelism (attn_dp {inst.attn_dp}) is not either"
                        if inst.attn_dp > 1 else ""))
    return extra, notes


def _speculative_config(inst: Instance, notes: list[str]) -> dict | None:
    """The ``speculative_config`` of the design's speculation (module doc), None with a note where TensorRT-LLM
    cannot be told it from what the design names."""
    spec = inst.spec
    if spec.method == "mtp":
        return {"decoding_type": "MTP", "num_nextn_predict_layers": spec.tokens}
    if spec.method == "eagle3" and spec.draft:
        notes.append(f"speculative_model_dir names the EAGLE-3 head {spec.draft} (objectives/catalog/speculative.yaml); "
                     "TensorRT-LLM 1.0 loads it from a local directory: download it and put that path there")
        return {"decoding_type": "Eagle", "max_draft_len": spec.tokens, "speculative_model_dir": spec.draft,
                "eagle3_one_model": True}
    what = ("an EAGLE-3 head for " + inst.model if spec.method == "eagle3" else "the design's draft model")
    notes.append(f"the design speculates with {spec.method} ({spec.tokens} draft tokens), but "
                 f"objectives/catalog/speculative.yaml names no checkpoint of {what}: no speculative_config is written "
                 f"(add decoding_type {'Eagle' if spec.method == 'eagle3' else 'DraftTarget'}, max_draft_len "
                 f"{spec.tokens} and speculative_model_dir with the checkpoint)")
    return None


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
    # programmatic dependent launch, as both min-latency guides run it (tech blogs 1 and 6: TRTLLM_ENABLE_PDL=1)
    head = (["TRTLLM_ENABLE_PDL=1"] if inst.spec.latency_tuned and inst.engine != "trtllm-2024" else []) + ["trtllm-serve"]
    command = command_text([*head, model], list(args.items()))
    header = (f"# TensorRT-LLM 1.0 LLM-API options for the {inst.role} instance (trtllm-serve "
              "--extra_llm_api_options); values are the model's choice, check them against the docs\n")
    out.files[options_file] = header + yaml.safe_dump(extra, sort_keys=False)
    return out, command


def _leaves(tree: dict) -> list:
    out = []
    for value in tree.values():
        out += _leaves(value) if isinstance(value, dict) and value else [value]
    return out
