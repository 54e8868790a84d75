"""A serving design's launch files, by its engine: ``trtllm-serve.sh`` with ``extra-llm-api-options.yaml``
(TensorRT-LLM), ``vllm-serve.sh`` (vLLM) or ``sglang-launch.sh`` (SGLang); for a disaggregated design the
decode pool's command there, the prefill pool's in ``<name>-prefill.sh``, and ``disaggregated.txt`` saying
how the two make the deployment."""

from __future__ import annotations

from dse.launch.design import Design, gpus_per_node, number, whole
from dse.launch.instance import Instance, instances
from dse.launch.output import Output, script
from dse.launch.sglang import sglang_files
from dse.launch.trtllm import trtllm_files
from dse.launch.vllm import vllm_files

__all__ = ["ENGINE_FILES", "serving_files", "DISAGGREGATED_FILE"]

#: engine -> (the command file's stem, its writer)
ENGINE_FILES = {"trtllm": ("trtllm-serve", trtllm_files), "trtllm-2024": ("trtllm-serve", trtllm_files),
                "vllm": ("vllm-serve", vllm_files), "sglang": ("sglang-launch", sglang_files)}
DISAGGREGATED_FILE = "disaggregated.txt"


def _mapping(inst: Instance) -> str:
    parts = [f"tp {inst.tp}", f"pp {inst.pp}"] + [f"{c} {getattr(inst, c)}" for c in ("ep", "attn_dp")
                                                  if getattr(inst, c) > 1]
    if inst.ep > 1 and inst.etp > 1:
        parts.append(f"etp {inst.etp}")
    return " x ".join(parts)


def _tuning(inst: Instance) -> str:
    """', mtp with 3 draft tokens, latency-tuned, expert load balancer with 32 redundant experts'
    (dse/launch/speculation.py, dse/launch/balancer.py), or ''."""
    spec, balancer = inst.spec, inst.balancer
    words = ([f"{spec.method} with {spec.tokens} draft tokens"] if spec.on else []) \
        + (["latency-tuned"] if spec.latency_tuned else []) \
        + ([f"expert load balancer with {balancer.redundant} redundant experts"] if balancer.on else [])
    return "".join(f", {w}" for w in words)


def _comment(design: Design, inst: Instance) -> list[str]:
    row = design.row
    load = f", {inst.concurrency} requests in flight" if inst.concurrency else ""
    return [f"Serve {inst.model} on {inst.n_gpus} x {row.get('gpu', 'GPU')} ({_mapping(inst)}{load}{_tuning(inst)}): "
            f"the {inst.role} "
            f"instance of design {design.name!r}", f"of run {design.run_name} ({design.how}).",
            f"MODEL: a checkpoint of {inst.model} with {inst.precision} weights (the engine takes the weights' "
            "precision from the checkpoint).", "Values are the model's choice; check them against the engine's docs "
            "(dse/launch/options.yaml names the version)."]


def serving_files(design: Design) -> Output:
    """The design's command files (one per pool), with the notes the README gives."""
    row = design.row
    insts = instances(design)
    stem, writer = ENGINE_FILES[insts[0].engine]
    out = Output()
    commands = {}
    for inst in insts:
        name = stem if inst.role != "prefill" else f"{stem}-prefill"
        written, command = writer(inst, name)
        out.merge(written)
        body = 'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n' + command
        out.files[f"{name}.sh"] = script(_comment(design, inst), body)
        commands[inst.role] = (f"{name}.sh", command)
        per = gpus_per_node(row)
        if inst.n_gpus > per:
            out.notes.append(f"the {inst.role} instance's {inst.n_gpus} GPUs span {-(-inst.n_gpus // per)} nodes of "
                             f"{per}: start it with the engine's multi-node launch")
    replicas = whole(row, "replicas_used", 1) or 1
    if replicas > 1:
        out.notes.append(f"the deployment runs {replicas} {insts[0].role} instances of {insts[0].n_gpus} GPUs "
                         "behind a load balancer, each started with the same command")
    if len(insts) > 1:
        out.notes.append("the model does not size the prefill pool's batch (it runs whole token budgets), and "
                         "derives its token budget from the prefill instance's own memory without storing it: "
                         f"{commands['prefill'][0]} sets neither (unless the space gave max_num_tokens), the "
                         "engine's defaults apply")
        out.files[DISAGGREGATED_FILE] = _disaggregated(design, insts, commands, replicas)
    return out


def _below(pool: int, size: int, ratio: float | None, replicas: int) -> str:
    """', the decode pool fed at 97.5% of its rate' where the deployment took fewer whole prefill instances
    than replicas x ratio, the cheaper per token (objectives/serving/pool_size.py); '' otherwise."""
    if ratio is None or not size or pool / size >= replicas * ratio - 1e-9:
        return ""
    return f", the decode pool fed at {100 * pool / size / (replicas * ratio):.4g}% of its rate"


def _disaggregated(design: Design, insts: list[Instance], commands: dict, replicas: int) -> str:
    decode, prefill = insts
    row = design.row
    ratio = number(row, "prefill_instances_per_decode")
    pool = whole(row, "prefill_gpus")
    lines = [f"Design {design.name!r} of run {design.run_name} is disaggregated: prefill and decode run on pools "
             "of their own, each instance started with its own command.", "",
             f"decode pool:  {replicas} instance(s) of {decode.n_gpus} GPUs ({_mapping(decode)}), "
             f"each: {commands['decode'][0]}",
             f"prefill pool: {ratio:.3g} prefill instance(s) per decode instance, rate-matched" if ratio is not None
             else "prefill pool: as many prefill instances as keep up with the decode pool",
             f"              ({pool // max(prefill.n_gpus, 1)} whole instance(s), {pool} prefill GPUs in the deployment"
             f"{_below(pool, prefill.n_gpus, ratio, replicas)}), each of {prefill.n_gpus} GPUs "
             f"({_mapping(prefill)}): {commands['prefill'][0]}" if pool is not None else
             f"              each of {prefill.n_gpus} GPUs ({_mapping(prefill)}): {commands['prefill'][0]}", "",
             "A prompt's KV cache moves from its prefill instance to a decode instance: connect the pools with the "
             "engine's disaggregated-serving setup (its router and KV-transfer configuration), which these files do "
             "not write. No Dynamo graph is written.", ""]
    for role in ("decode", "prefill"):
        lines += [f"--- {role} instance ({commands[role][0]}) ---", commands[role][1], ""]
    return "\n".join(lines)
