"""``dse launch``: the files that run a run's chosen design, and the README that says which design, which
files, and where each option name was checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dse.errors import UserError
from dse.launch.design import Design, gpus_per_node, label, nodes, objectives_text, pick, whole
from dse.launch.megatron import OVERRIDES_FILE, TRAIN_FILE, training_files
from dse.launch.options import targets
from dse.launch.output import Output
from dse.launch.serving import DISAGGREGATED_FILE
from dse.report.data import load_run, mapping_label
from dse.store import atomic_write_bytes

__all__ = ["Launched", "write_launch", "launch_files", "README"]

README = "README.txt"
#: what each file is, for the README (a prefill pool's script: "<name>-prefill.sh")
WHAT = {
    OVERRIDES_FILE: "Megatron-Bridge ConfigContainer overrides (KEY=VALUE, one a line) for the design",
    TRAIN_FILE: "the launch command: scripts/training/train.sh with the nodes, GPUs per node and the overrides",
    "trtllm-serve.sh": "the trtllm-serve command of the (decode) instance",
    "extra-llm-api-options.yaml": "its --extra_llm_api_options: CUDA graphs, KV cache, attention DP, speculative "
                                  "decoding, the expert load balancer",
    "trtllm-serve-prefill.sh": "the trtllm-serve command of a prefill instance",
    "extra-llm-api-options-prefill.yaml": "the prefill instance's --extra_llm_api_options",
    "vllm-serve.sh": "the vllm serve command of the (decode) instance",
    "vllm-serve-prefill.sh": "the vllm serve command of a prefill instance",
    "sglang-launch.sh": "the sglang.launch_server command of the (decode) instance",
    "sglang-launch-prefill.sh": "the sglang.launch_server command of a prefill instance",
    DISAGGREGATED_FILE: "how the prefill and decode pools make the deployment, with both commands",
}


@dataclass
class Launched:
    design: Design
    out: Path
    paths: list[Path]
    output: Output


def launch_files(design: Design, serving: bool) -> Output:
    """The files of ``design`` (a serving deployment where ``serving``), README included."""
    if serving:
        from dse.launch.serving import serving_files

        result = serving_files(design)
    else:
        result = training_files(design)
    result.files[README] = readme(design, result, serving)
    return result


def _size(design: Design, serving: bool) -> str:
    row = design.row
    n, gpu = whole(row, "n_gpus", 1), row.get("gpu", "GPUs")
    inst = row.get("instance")
    rented = f" rented as {inst}" if isinstance(inst, str) and inst not in ("", "owned") else ""
    if serving:
        words = [f"{n} x {gpu} per instance{rented}", mapping_label(row)]
        words += [f"{label(row, c)} {c.replace('_', ' ')}" for c in ("precision", "kv_precision", "engine", "serving")
                  if label(row, c)]
        if whole(row, "concurrency") is not None:
            words.append(f"{whole(row, 'concurrency')} requests in flight")
        return ", ".join(w for w in words if w)
    words = [f"{n} x {gpu}{rented} ({nodes(row)} node(s) x {gpus_per_node(row)} GPUs)", mapping_label(row),
             f"{label(row, 'precision', 'bf16')}" + (f" ({label(row, 'fp8_recipe')})" if label(row, "precision") == "fp8"
                                                      else ""), f"stack {label(row, 'stack', 'megatron-core')}"]
    return ", ".join(w for w in words if w)


def readme(design: Design, result: Output, serving: bool) -> str:
    trial = whole(design.row, "trial")
    lines = [f"dse launch: design {design.name!r} of run {design.run_name}",
             f"{design.how}{f'; trial {trial}' if trial is not None else ''}.", "",
             "Its objectives, as the model predicts them:"] + [f"  {t}" for t in objectives_text(design)]
    lines += ["", f"The design: {_size(design, serving)}.", "", "Files:"]
    names = sorted(result.files) if README in result.files else sorted([*result.files, README])
    width = max(len(n) for n in names)
    for name in names:
        lines.append(f"  {name.ljust(width)}  {WHAT.get(name, 'this file' if name == README else '')}".rstrip())
    if result.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in result.notes]
    lines += ["", "Every value here is the model's choice (the analytical model dse sweeps: objectives/), not a measured",
              "setting: check each against the engine's documentation before you rely on it. Every option name",
              "written is one dse/launch/options.yaml documents, from these versions:"]
    for target in sorted(result.emitted):
        lines.append(f"  {target}: {targets()[target]['version']}")
    return "\n".join(lines) + "\n"


def write_launch(run_dir: str | Path, number: int | None = None, out: str | Path | None = None) -> Launched:
    """Write the launch files of front design #``number`` of the run in ``run_dir`` (None: the recommended
    one) into ``out`` (default ``RUN_DIR/launch``), removing there the launch files of an earlier design
    that this one does not write. Bad input (no run, an empty front, a number off the front, an output
    folder that cannot be written) is a UserError in one line."""
    run = load_run(run_dir)
    design = pick(run, number)
    result = launch_files(design, run.serving)
    out = Path(out) if out is not None else run.root / "launch"
    paths = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in WHAT:  # a launch file of an earlier design that this one has not (a prefill pool's)
            if name not in result.files and (out / name).is_file():
                (out / name).unlink()
        for name, text in result.files.items():
            path = out / name
            atomic_write_bytes(path, text.encode())
            if name.endswith(".sh"):
                path.chmod(0o755)
            paths.append(path)
    except OSError as exc:
        raise UserError(f"cannot write the launch files ({exc.strerror or exc})", where=str(out)) from None
    return Launched(design, out, paths, result)
