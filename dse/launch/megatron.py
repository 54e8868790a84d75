"""A training design as Megatron-Bridge runs it: ConfigContainer overrides (``KEY=VALUE``, the form
``scripts/training/train.sh`` and ``run_recipe.py`` take after their own flags) and the launch command.

Each column of the design maps to the Megatron-Core field of the same meaning (dse/launch/options.yaml
names the version and source of each):

- tp, pp, cp, ep -> model.{tensor,pipeline,context,expert}_model_parallel_size; the experts' tensor
  parallelism the model derived (``etp``) -> model.expert_tensor_parallel_size on an MoE model;
- vp (virtual stages per pipeline rank) -> model.virtual_pipeline_model_parallel_size, None where 1;
- an uneven pipeline split (layers_first_stage, layers_last_stage) -> model.num_layers_in_{first,last}_
  pipeline_stage;
- micro_batch, global_batch, seq_len -> train.micro_batch_size, train.global_batch_size, dataset.seq_length;
- recompute: none -> recompute_granularity None; selective -> 'selective' with recompute_modules
  ['core_attn'] (and 'mla_up_proj' on an MLA model: objectives/training/memory.py recomputes its up projections);
  full -> 'full', recompute_method 'uniform', recompute_num_layers 1 (every layer);
- sequence_parallel -> model.sequence_parallel (only where tp > 1: Megatron-Core needs a TP group);
- zero_stage: 0 plain DDP; 1 the distributed optimizer (ddp. and optimizer.use_distributed_optimizer);
  2 Megatron-FSDP sharding optimizer state and gradients (data_parallel_sharding_strategy 'optim_grads');
  3 Megatron-FSDP 'optim_grads_params' on a Megatron stack, torch FSDP2 (dist.use_torch_fsdp2) on the
  ``pytorch-fsdp`` stack;
- precision and fp8_recipe -> the Megatron-Bridge mixed-precision recipe and the Megatron-Core fields it
  sets (model.bf16, model.fp8 and model.fp8_recipe as Megatron-Core names the recipes: tensor_delayed ->
  'delayed', tensor_current -> 'tensorwise', blockwise -> 'blockwise', mxfp8 -> 'mxfp8'; fp4 -> NVFP4).
"""

from __future__ import annotations

from dse.launch.design import Design, flag, gpus_per_node, label, nodes, whole
from dse.launch.output import Output, Raw, command_text, script, value_text

__all__ = ["FP8_RECIPES", "overrides", "training_files", "OVERRIDES_FILE", "TRAIN_FILE"]

OVERRIDES_FILE = "megatron-bridge-overrides.txt"
TRAIN_FILE = "megatron-bridge-train.sh"
#: the model's fp8_recipe -> (Megatron-Core fp8_recipe, fp8 format, Megatron-Bridge mixed-precision recipe),
#: as Megatron-Bridge v0.6.0's recipes pair them (mixed_precision.py)
FP8_RECIPES = {
    "tensor_delayed": ("delayed", "hybrid", "bf16_with_fp8_delayed_scaling_mixed"),
    "tensor_current": ("tensorwise", "hybrid", "bf16_with_fp8_current_scaling_mixed"),
    "blockwise": ("blockwise", "hybrid", "bf16_with_fp8_subchannel_scaling_mixed"),
    "mxfp8": ("mxfp8", "e4m3", "bf16_with_mxfp8_mixed"),
}


def _fp8_recipe(row) -> str:
    """The design's fp8 recipe; blank: the model's default for its GPU (objectives.training.quantization)."""
    recipe = label(row, "fp8_recipe")
    if recipe is None:
        import numpy as np

        from objectives.table import CATEGORIES
        from objectives.training.quantization import default_fp8_recipe

        fp4 = float(row.get("gpu_fp4_tflop_s", 0.0) or 0.0)
        recipe = CATEGORIES["fp8_recipe"][int(default_fp8_recipe(np.array([fp4]))[0])]
    return recipe


def _precision(row, out: dict, notes: list[str]) -> None:
    precision = label(row, "precision", "bf16")
    out["model.bf16"] = True
    if precision == "fp8":
        mcore, fmt, recipe = FP8_RECIPES[_fp8_recipe(row)]
        out.update({"mixed_precision": recipe, "model.fp8": fmt, "model.fp8_recipe": mcore})
        if mcore == "tensorwise":
            notes.append("Megatron-Bridge's bf16_with_fp8_current_scaling_mixed recipe keeps the first and the last "
                         "transformer layer in bf16 (first_last_layers_bf16)")
    elif precision == "fp4":
        out.update({"mixed_precision": "bf16_with_nvfp4_mixed", "model.fp8": None, "model.fp4": "e2m1",
                    "model.fp4_recipe": "nvfp4"})
    else:
        out.update({"mixed_precision": "bf16_mixed", "model.fp8": None})


def _recompute(row, out: dict) -> None:
    rc = label(row, "recompute", "none")
    if rc == "full":
        out.update({"model.recompute_granularity": "full", "model.recompute_method": "uniform",
                    "model.recompute_num_layers": 1})
    elif rc == "selective":
        modules = ["core_attn"] + (["mla_up_proj"] if (whole(row, "kv_lora_rank", 0) or 0) > 0 else [])
        out.update({"model.recompute_granularity": "selective", "model.recompute_method": None,
                    "model.recompute_num_layers": None, "model.recompute_modules": modules})
    else:
        out.update({"model.recompute_granularity": None, "model.recompute_method": None,
                    "model.recompute_num_layers": None})


def _sharding(row, out: dict, notes: list[str]) -> None:
    zero = whole(row, "zero_stage", 1)
    stack = label(row, "stack", "megatron-core")
    if zero >= 3 and stack == "pytorch-fsdp":
        out.update({"dist.use_torch_fsdp2": True, "ddp.use_distributed_optimizer": False,
                    "optimizer.use_distributed_optimizer": False})
        notes.append("ZeRO-3 on the pytorch-fsdp stack: torch FSDP2 (dist.use_torch_fsdp2), which Megatron-LM's "
                     "argument checks refuse with pipeline or expert parallelism and with the distributed optimizer")
    elif zero >= 2:
        out.update({"ddp.use_megatron_fsdp": True, "dist.use_megatron_fsdp": True,
                    "ddp.data_parallel_sharding_strategy": "optim_grads_params" if zero >= 3 else "optim_grads",
                    "ddp.use_distributed_optimizer": True, "optimizer.use_distributed_optimizer": True})
    else:
        on = zero >= 1
        out.update({"ddp.use_distributed_optimizer": on, "optimizer.use_distributed_optimizer": on})
    if stack in ("megatron-core-2024", "megatron-2021"):
        notes.append(f"the model scored this design on the {stack} stack; these overrides run it on current "
                     "Megatron-Core (Megatron-Bridge v0.6.0), for which the model's step time was not computed")


def overrides(design: Design) -> tuple[dict, list[str]]:
    """(ConfigContainer key -> value, notes) for the design, in the order the file lists them."""
    row, notes = design.row, []
    tp, pp = whole(row, "tp", 1), whole(row, "pp", 1)
    vp = whole(row, "vp", 1)
    out: dict = {
        "model.tensor_model_parallel_size": tp,
        "model.pipeline_model_parallel_size": pp,
        "model.virtual_pipeline_model_parallel_size": vp if vp and vp > 1 else None,
        "model.context_parallel_size": whole(row, "cp", 1),
        "model.expert_model_parallel_size": whole(row, "ep", 1),
    }
    if (whole(row, "moe_experts", 0) or 0) > 0:
        out["model.expert_tensor_parallel_size"] = whole(row, "etp", tp)
    out["model.sequence_parallel"] = flag(row, "sequence_parallel") and tp > 1
    n_layers, first, last = (whole(row, c) for c in ("n_layers", "layers_first_stage", "layers_last_stage"))
    if pp > 1 and n_layers and first is not None and last is not None and not (first == last == n_layers / pp):
        out["model.num_layers_in_first_pipeline_stage"] = first
        out["model.num_layers_in_last_pipeline_stage"] = last
    _recompute(row, out)
    _precision(row, out, notes)
    out.update({"train.micro_batch_size": whole(row, "micro_batch", 1),
                "train.global_batch_size": whole(row, "global_batch"),
                "dataset.seq_length": whole(row, "seq_len")})
    _sharding(row, out, notes)
    return out, notes


def training_files(design: Design) -> Output:
    """The overrides file and the launch script of a training design."""
    row = design.row
    values, notes = overrides(design)
    result = Output(notes=notes)
    result.emit("megatron-bridge", values)
    n, per, hosts = whole(row, "n_gpus", 1), gpus_per_node(row), nodes(row)
    gpu, model = row.get("gpu", "GPU"), row.get("model", "the model")
    if n % per:
        result.notes.append(f"{n} GPUs do not fill {hosts} nodes of {per}: the launcher's world size is "
                            f"{hosts * per}; give it {n} ranks (--gpus-per-node on the last node) by hand")
    head = [f"Megatron-Bridge v0.6.0 ConfigContainer overrides for design {design.name!r} of run {design.run_name}",
            f"({design.how}): {model} on {n} x {gpu}, {hosts} node(s) x {per} GPUs.",
            "Values are the model's choice; check them against Megatron-Bridge's and Megatron-Core's docs "
            "(dse/launch/options.yaml).",
            f"Pass them after train.sh's own flags, as {TRAIN_FILE} does."]
    lines = [f"# {h}" for h in head] + [f"{k}={value_text(v)}" for k, v in values.items()]
    result.files[OVERRIDES_FILE] = "\n".join(lines) + "\n"
    launcher = {"--nodes": hosts, "--gpus-per-node": per, "--recipe": Raw('"${RECIPE:?set RECIPE to the '
                f'Megatron-Bridge recipe of {model}, e.g. <model>_pretrain_config}}"'), "--mode": "pretrain"}
    result.emit("megatron-bridge-launcher", {k: v for k, v in launcher.items() if k != "--recipe"})
    result.emit("megatron-bridge-launcher", ["--recipe"])
    body = "\n".join([
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        f"mapfile -t OVERRIDES < <(grep -v -e '^#' -e '^$' \"$HERE/{OVERRIDES_FILE}\")",
        command_text(["./scripts/training/train.sh"], list(launcher.items())) + ' \\\n    "$@" "${OVERRIDES[@]}"'])
    comment = [f"Train {model} on {n} x {gpu} ({hosts} node(s) x {per} GPUs) as design {design.name!r} of run "
               f"{design.run_name} ({design.how}).",
               "Run from a Megatron-Bridge v0.6.0 checkout with RECIPE set; the cluster's own train.sh flags",
               "(account, partition, container image) go after this script's name; the overrides come last."]
    result.files[TRAIN_FILE] = script(comment, body)
    return result
