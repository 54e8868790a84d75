"""`dse launch`: the files that run a run's design. Real (model-scored) tiny sweeps, a training one
(spaces/small.yaml) and serving ones (spaces/serving-llama3.3-70b.yaml on each engine, and
spaces/serving-deepseek-r1.yaml for attention data parallelism, expert parallelism and disaggregated pools),
each launched through the command line; the written values are the design's columns in pareto.parquet,
every written option name is one dse/launch/options.yaml documents, and that list's names have the syntax
of their kind. Bad input is one line and exit 2."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dse.cli import main
from dse.launch import launch_files
from dse.launch.design import label, pick
from dse.launch.options import SYNTAX, TARGETS, documented, flags_in, keys_in, targets
from dse.launch.output import Output
from dse.report.buyer import recommend
from dse.report.data import load_run
from dse.report.names import design_names

ROOT = Path(__file__).resolve().parents[1]
#: written file -> the options.yaml target its option names belong to
FILE_TARGETS = (("megatron-bridge-overrides.txt", "megatron-bridge"), ("megatron-bridge-train.sh", "megatron-bridge-launcher"),
                ("trtllm-serve", "trtllm-serve"), ("extra-llm-api-options", "trtllm-llm-api"),
                ("vllm-serve", "vllm-serve"), ("sglang-launch", "sglang-launch-server"))
WRITTEN: dict[str, dict[str, str]] = {}  # every launch of the module: its folder -> file name -> text


def sweep(space: Path, out: Path, trials: int, engine: str | None = None) -> Path:
    if engine is not None:  # the same space on another engine
        text = space.read_text().replace("engine: trtllm", f"engine: {engine}")
        space = out.parent / f"{out.name}.yaml"
        space.write_text(text)
    assert main(["sweep", str(space), "--no-ray", "--quiet", "--trials", str(trials), "--out", str(out)]) == 0
    return out


def launch(run: Path, *args: str) -> dict[str, str]:
    """`dse launch RUN [args]`, and the files it wrote (name -> text)."""
    out = Path(args[args.index("--out") + 1]) if "--out" in args else run / "launch"
    shutil.rmtree(out, ignore_errors=True)
    assert main(["launch", str(run), *args]) == 0
    files = {p.name: p.read_text() for p in sorted(out.iterdir())}
    WRITTEN[str(out)] = files
    return files


@pytest.fixture(scope="module")
def train_run(tmp_path_factory) -> Path:
    return sweep(ROOT / "spaces" / "small.yaml", tmp_path_factory.mktemp("launch") / "train", 32)


@pytest.fixture(scope="module", params=["trtllm", "vllm", "sglang"])
def serving_run(request, tmp_path_factory) -> Path:
    return sweep(ROOT / "spaces" / "serving-llama3.3-70b.yaml", tmp_path_factory.mktemp("launch") / request.param, 32,
                 request.param)


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory) -> Path:
    return sweep(ROOT / "spaces" / "serving-deepseek-r1.yaml", tmp_path_factory.mktemp("launch") / "deepseek", 48)


def row_of(run: Path, files: dict[str, str]) -> pd.Series:
    """The launched design's row of pareto.parquet, by the trial the README names."""
    trial = int(re.search(r"; trial (\d+)\.", files["README.txt"]).group(1))
    front = pd.read_parquet(run / "pareto.parquet")
    return front[front["trial"] == trial].iloc[0]


def overrides(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def command(text: str) -> dict[str, str | bool]:
    """Flag -> value (True for a switch) of the script's command (its lines after the comments)."""
    body = " ".join(line for line in text.replace("\\\n", " ").splitlines() if not line.startswith(("#", "HERE=", "set ")))
    tokens = shlex.split(body)
    return {t: (tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") else True)
            for i, t in enumerate(tokens) if t.startswith("--")}


def whole(row: pd.Series, column: str) -> int:
    return int(round(float(row[column])))


def check_training(files: dict[str, str], row: pd.Series) -> None:
    from objectives.table import CATEGORIES

    o = overrides(files["megatron-bridge-overrides.txt"])
    tp, vp = whole(row, "tp"), whole(row, "vp")
    assert int(o["model.tensor_model_parallel_size"]) == tp
    assert int(o["model.pipeline_model_parallel_size"]) == whole(row, "pp")
    assert o["model.virtual_pipeline_model_parallel_size"] == (str(vp) if vp > 1 else "null")
    assert int(o["model.context_parallel_size"]) == whole(row, "cp")
    assert int(o["model.expert_model_parallel_size"]) == whole(row, "ep")
    assert int(o["train.micro_batch_size"]) == whole(row, "micro_batch")
    assert int(o["train.global_batch_size"]) == whole(row, "global_batch")
    assert int(o["dataset.seq_length"]) == whole(row, "seq_len")
    assert o["model.sequence_parallel"] == str(bool(row["sequence_parallel"]) and tp > 1).lower()
    rc = row["recompute"]
    assert o["model.recompute_granularity"] == {"none": "null", "selective": "selective", "full": "full"}[rc]
    if rc == "full":
        assert (o["model.recompute_method"], o["model.recompute_num_layers"]) == ("uniform", "1")
    on = str(whole(row, "zero_stage") >= 1).lower()
    assert o["ddp.use_distributed_optimizer"] == o["optimizer.use_distributed_optimizer"] == on
    assert o["model.bf16"] == "true"
    if row["precision"] == "fp8":  # the model's recipe (a code in the table) as Megatron-Core names it
        recipe = CATEGORIES["fp8_recipe"][whole(row, "fp8_recipe")]
        names = {"tensor_delayed": "delayed", "tensor_current": "tensorwise", "blockwise": "blockwise", "mxfp8": "mxfp8"}
        assert o["model.fp8_recipe"] == names[recipe]
        assert o["model.fp8"] == ("e4m3" if recipe == "mxfp8" else "hybrid")
    else:
        assert o["model.fp8"] == "null" and o["mixed_precision"] == "bf16_mixed"
    launcher = command(files["megatron-bridge-train.sh"])
    per = min(whole(row, "server_gpus"), whole(row, "n_gpus"))
    assert int(launcher["--gpus-per-node"]) == per
    assert int(launcher["--nodes"]) == math.ceil(whole(row, "n_gpus") / per)


def test_training_recommendation(train_run):
    files = launch(train_run)
    assert set(files) == {"megatron-bridge-overrides.txt", "megatron-bridge-train.sh", "README.txt"}
    rec = recommend(load_run(train_run))
    row = row_of(train_run, files)
    assert row["trial"] == rec.row["trial"]
    check_training(files, row)
    readme = files["README.txt"]
    assert f"design {rec.name!r}" in readme and "recommended" in readme
    assert "time_to_train_days (min)" in readme and "run_cost_usd (min)" in readme
    assert "model's choice" in readme and "Megatron-Bridge v0.6.0" in readme


def test_training_every_front_design_by_number(train_run, tmp_path):
    run = load_run(train_run)
    names = design_names(run.front, run.design_columns)
    for n in range(1, len(run.front) + 1):
        files = launch(train_run, str(n), "--out", str(tmp_path / f"d{n}"))
        row = row_of(train_run, files)
        assert whole(row, "front_index") == n  # numbered as the report and pareto.parquet number them
        assert f"design {names[n - 1]!r}" in files["README.txt"] and f"front design #{n} of" in files["README.txt"]
        check_training(files, row)


def test_serving_engine(serving_run):
    files = launch(serving_run)
    row = row_of(serving_run, files)
    assert row["trial"] == recommend(load_run(serving_run)).row["trial"]
    engine, tp, pp = row["engine"], whole(row, "tp"), whole(row, "pp")
    budget, seq = whole(row, "token_budget"), whole(row, "input_len") + whole(row, "output_len")
    load = whole(row, "concurrency")
    if engine == "trtllm":
        cmd = command(files["trtllm-serve.sh"])
        assert (int(cmd["--tp_size"]), int(cmd["--pp_size"])) == (tp * whole(row, "attn_dp"), pp)
        assert (int(cmd["--max_batch_size"]), int(cmd["--max_num_tokens"]), int(cmd["--max_seq_len"])) == (load, budget, seq)
        extra = yaml.safe_load(files["extra-llm-api-options.yaml"])
        assert extra["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9, "dtype": "fp8"}
        if whole(row, "latency_tuned"):  # the min-latency guides' graphs up to batch 8 (objectives/serving/latency.py)
            assert extra["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 8}
            assert extra["disable_overlap_scheduler"] is False
        else:
            assert extra["cuda_graph_config"]["batch_sizes"][-1] == load and extra["cuda_graph_config"]["enable_padding"]
        assert cmd["--extra_llm_api_options"].endswith("/extra-llm-api-options.yaml")
    elif engine == "vllm":
        cmd = command(files["vllm-serve.sh"])
        assert (int(cmd["--tensor-parallel-size"]), int(cmd["--pipeline-parallel-size"])) == (tp, pp)
        assert (int(cmd["--max-num-seqs"]), int(cmd["--max-num-batched-tokens"]), int(cmd["--max-model-len"])) == \
            (load, budget, seq)
        assert (cmd["--kv-cache-dtype"], float(cmd["--gpu-memory-utilization"])) == ("fp8", 0.9)
    else:
        cmd = command(files["sglang-launch.sh"])
        assert (int(cmd["--tp-size"]), int(cmd["--pp-size"])) == (tp, pp)
        assert (int(cmd["--max-running-requests"]), int(cmd["--chunked-prefill-size"]), int(cmd["--context-length"])) == \
            (load, budget, seq)
        assert (cmd["--kv-cache-dtype"], float(cmd["--mem-fraction-static"])) == ("fp8_e4m3", 0.88)
    assert f"with {row['precision']} weights" in next(t for n, t in files.items() if n.endswith(".sh"))
    # the space sweeps EAGLE-3 and the latency-tuned step: the recommended design's, as each engine spells them
    k = whole(row, "spec_draft_tokens") if label(row, "spec_decode") == "eagle3" else 0
    if engine == "trtllm":
        assert extra.get("speculative_config", {}).get("max_draft_len", 0) == k
    elif engine == "vllm":
        assert json.loads(cmd.get("--speculative-config", '{"num_speculative_tokens": 0}'))["num_speculative_tokens"] == k
        assert int(cmd.get("--max-cudagraph-capture-size", 0)) == 8 * whole(row, "latency_tuned")
    else:
        assert int(cmd.get("--speculative-num-steps", 0)) == k
        assert int(cmd.get("--cuda-graph-max-bs", 0)) == 8 * whole(row, "latency_tuned")


def test_disaggregated_pools_with_attention_dp(deepseek):
    front = pd.read_parquet(deepseek / "pareto.parquet")
    pick_ = front[(front["serving"] == "disaggregated") & (front["attn_dp"] > 1) & (front["ep"] > 1)]
    assert len(pick_), "the sample has a disaggregated attention-DP design on its front"
    row = pick_.iloc[0]
    files = launch(deepseek, str(whole(row, "front_index")))
    assert {"trtllm-serve.sh", "trtllm-serve-prefill.sh", "extra-llm-api-options-prefill.yaml", "disaggregated.txt"} <= set(files)
    decode, prefill = command(files["trtllm-serve.sh"]), command(files["trtllm-serve-prefill.sh"])
    assert int(decode["--tp_size"]) == whole(row, "tp") * whole(row, "attn_dp")
    assert (int(decode["--pp_size"]), int(decode["--ep_size"])) == (whole(row, "pp"), whole(row, "ep"))
    assert int(decode["--max_batch_size"]) == math.ceil(whole(row, "concurrency") / whole(row, "attn_dp"))
    assert yaml.safe_load(files["extra-llm-api-options.yaml"])["enable_attention_dp"] is True
    assert int(prefill["--tp_size"]) == whole(row, "prefill_tp") * whole(row, "prefill_attn_dp")
    assert int(prefill["--pp_size"]) == whole(row, "prefill_pp") and "--max_batch_size" not in prefill
    note = files["disaggregated.txt"]
    assert "trtllm-serve.sh" in note and "trtllm-serve-prefill.sh" in note
    assert f"{float(row['prefill_instances_per_decode']):.3g} prefill instance(s) per decode instance" in note
    # the same design on vLLM and SGLang (its row with the engine swapped): each pool its own command
    run = load_run(deepseek)
    design = pick(run, whole(row, "front_index"))
    for engine, stem in (("vllm", "vllm-serve"), ("sglang", "sglang-launch")):
        design.row = design.row.copy()
        design.row["engine"] = engine
        written = launch_files(design, serving=True)
        WRITTEN[f"{deepseek}:{engine}"] = written.files
        d, p = command(written.files[f"{stem}.sh"]), command(written.files[f"{stem}-prefill.sh"])
        if engine == "vllm":
            assert (int(d["--tensor-parallel-size"]), int(d["--data-parallel-size"])) == (whole(row, "tp"), whole(row, "attn_dp"))
            assert d["--enable-expert-parallel"] is True
            assert int(p["--data-parallel-size"]) == whole(row, "prefill_attn_dp")
        else:
            assert (int(d["--tp-size"]), int(d["--dp-size"])) == (whole(row, "tp") * whole(row, "attn_dp"), whole(row, "attn_dp"))
            assert d["--enable-dp-attention"] is True and int(d["--ep-size"]) == whole(row, "ep")
            assert int(d["--chunked-prefill-size"]) == whole(row, "token_budget") * whole(row, "attn_dp")


def written_names(name: str, text: str) -> tuple[str | None, list[str]]:
    """(the options.yaml target of a written file, the option names it writes)."""
    target = next((t for prefix, t in FILE_TARGETS if name.startswith(prefix)), None)
    if target is None:
        return None, []
    if name.endswith(".txt"):
        return target, list(overrides(text))
    if name.endswith(".yaml"):
        return target, keys_in(yaml.safe_load(text))
    return target, flags_in("\n".join(line for line in text.splitlines() if not line.startswith("#")))


def assert_documented(files: dict[str, str]) -> None:
    for name, text in files.items():
        target, names = written_names(name, text)
        extra = [n for n in names if target and n not in documented(target)]
        assert not extra, f"{name} writes {extra}, not in dse/launch/options.yaml's {target}"


def speculating(design, engine: str, **columns):
    """The design on ``engine`` with ``columns`` set (a speculative or latency-tuned variant of its row), launched."""
    design.row = design.row.copy()
    design.row["engine"] = engine
    for k, v in columns.items():
        design.row[k] = v
    written = launch_files(design, serving=True)
    WRITTEN[f"{design.run_name}:{engine}:{sorted(columns.items())}"] = written.files
    assert_documented(written.files)
    return written


def test_mtp_deepseek_r1_latency_tuned_with_expert_tensor_parallelism(deepseek):
    """DeepSeek-R1 with MTP (3 draft tokens) and the latency-tuned step on 8 GPUs, tp 8 with ep 4 (etp 2): each
    engine's speculative, CUDA-graph and expert options, every name one options.yaml documents, every value
    the design's."""
    run = load_run(deepseek)
    mtp = dict(serving="aggregated", n_gpus=8, tp=8, attn_dp=1, pp=1, ep=4, etp=np.nan, spec_decode="mtp",
               spec_tokens=3, spec_draft_tokens=3, latency_tuned=1, concurrency=4)
    written = speculating(pick(run, None), "trtllm", **mtp)
    extra = yaml.safe_load(written.files["extra-llm-api-options.yaml"])
    assert extra["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 3}
    assert extra["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 8}  # objectives/serving/latency.py
    assert extra["disable_overlap_scheduler"] is False and extra["moe_tensor_parallel_size"] == 2
    script = written.files["trtllm-serve.sh"]
    assert "TRTLLM_ENABLE_PDL=1 trtllm-serve" in script
    cmd = command(script)
    assert (int(cmd["--tp_size"]), int(cmd["--ep_size"])) == (8, 4)  # tp_size = moe_tp 2 x moe_ep 4
    assert "mtp with 3 draft tokens, latency-tuned" in script and "ep 4 x etp 2" in script

    cmd = command(speculating(pick(run, None), "vllm", **mtp).files["vllm-serve.sh"])
    assert json.loads(cmd["--speculative-config"]) == {"method": "mtp", "num_speculative_tokens": 3}
    assert int(cmd["--max-cudagraph-capture-size"]) == 8

    written = speculating(pick(run, None), "sglang", **mtp)
    cmd = command(written.files["sglang-launch.sh"])
    assert cmd["--speculative-algorithm"] == "EAGLE" and "--speculative-draft-model-path" not in cmd
    assert (int(cmd["--speculative-num-steps"]), int(cmd["--speculative-eagle-topk"]),
            int(cmd["--speculative-num-draft-tokens"])) == (3, 1, 4)  # a chain of 3 drafts: 3 + 1 tokens verified
    assert int(cmd["--cuda-graph-max-bs"]) == 8 and int(cmd["--ep-size"]) == 4
    # a latency-tuned row off: the CUDA graphs as before, no PDL, no overlap key
    off = speculating(pick(run, None), "trtllm", **{**mtp, "latency_tuned": 0, "spec_decode": "none"})
    extra = yaml.safe_load(off.files["extra-llm-api-options.yaml"])
    assert "speculative_config" not in extra and "disable_overlap_scheduler" not in extra
    assert extra["cuda_graph_config"]["batch_sizes"] == [1, 2, 4] and "PDL" not in off.files["trtllm-serve.sh"]


def test_eagle3_llama_on_each_engine(serving_run):
    """Llama 3.3 70B with EAGLE-3 (4 draft tokens): the head speculative.yaml names, the draft length exact."""
    run = load_run(serving_run)
    design = pick(run, None)
    engine = label(design.row, "engine")
    written = speculating(design, engine, spec_decode="eagle3", spec_tokens=4, spec_draft_tokens=4, latency_tuned=0)
    head = "RedHatAI/Llama-3.3-70B-Instruct-speculator.eagle3"
    if engine == "trtllm":
        extra = yaml.safe_load(written.files["extra-llm-api-options.yaml"])
        assert extra["speculative_config"] == {"decoding_type": "Eagle", "max_draft_len": 4,
                                               "speculative_model_dir": head, "eagle3_one_model": True}
        assert "cuda_graph_config" in extra and "disable_overlap_scheduler" not in extra
        assert "download it" in written.files["README.txt"]
    elif engine == "vllm":
        cmd = command(written.files["vllm-serve.sh"])
        assert json.loads(cmd["--speculative-config"]) == {"method": "eagle3", "model": head, "num_speculative_tokens": 4}
        assert "--max-cudagraph-capture-size" not in cmd
    else:
        cmd = command(written.files["sglang-launch.sh"])
        assert (cmd["--speculative-algorithm"], cmd["--speculative-draft-model-path"]) == ("EAGLE3", head)
        assert (int(cmd["--speculative-num-steps"]), int(cmd["--speculative-num-draft-tokens"])) == (4, 5)
    # a draft model the catalog names no checkpoint for: nothing speculative written, the README says so
    written = speculating(pick(run, None), engine, spec_decode="draft", spec_tokens=4, spec_draft_tokens=4)
    names = [n for name, text in written.files.items() for n in written_names(name, text)[1]]
    assert names and not [n for n in names if "speculative" in n]
    assert "objectives/catalog/speculative.yaml names no" in written.files["README.txt"]


BALANCER_OPTIONS = {"trtllm-llm-api": ["moe_config.load_balancer.num_slots", "moe_config.load_balancer.layer_updates_per_iter"],
                    "vllm-serve": ["--enable-eplb", "--eplb-config"],
                    "sglang-launch-server": ["--enable-eplb", "--ep-num-redundant-experts"]}


def test_expert_load_balancer_deepseek_r1_on_each_engine(deepseek):
    """DeepSeek-R1 on 32 GPUs, attention DP 32 with EP 32, an expert load balancer with 32 redundant experts
    (objectives/serving/balance.py): each engine's online balancer with E + R = 256 + 32 = 288 slots, 9 a GPU,
    every name one options.yaml documents; eplb 0 (or the columns blank, as in runs older than the balancer)
    writes none of them; an instance without expert parallelism gets a README line, not a flag."""
    run = load_run(deepseek)
    dep = dict(serving="aggregated", n_gpus=32, tp=1, attn_dp=32, pp=1, ep=32, etp=np.nan, spec_decode="none",
               latency_tuned=0, concurrency=2048, eplb=1, redundant_experts=32)
    written = speculating(pick(run, None), "trtllm", **dep)
    extra = yaml.safe_load(written.files["extra-llm-api-options.yaml"])
    assert extra["moe_config"] == {"load_balancer": {"num_slots": 288, "layer_updates_per_iter": 1}}
    assert int(command(written.files["trtllm-serve.sh"])["--ep_size"]) == 32  # 288 slots over 32 ranks: 9 a GPU
    assert "288 expert slots (256 experts + 32 copies, 9 a GPU)" in written.files["README.txt"]

    cmd = command(speculating(pick(run, None), "vllm", **dep).files["vllm-serve.sh"])
    assert cmd["--enable-expert-parallel"] is True and cmd["--enable-eplb"] is True
    assert json.loads(cmd["--eplb-config"]) == {"num_redundant_experts": 32}
    assert (int(cmd["--tensor-parallel-size"]), int(cmd["--data-parallel-size"])) == (1, 32)  # vLLM's EP: tp x dp

    cmd = command(speculating(pick(run, None), "sglang", **dep).files["sglang-launch.sh"])
    assert cmd["--enable-eplb"] is True and int(cmd["--ep-num-redundant-experts"]) == 32
    assert int(cmd["--ep-size"]) == 32 and "--init-expert-location" not in cmd  # the trivial start, SGLang's default

    # the balancer written, each option in its engine's list; eplb 0, or the columns blank: none of them
    for engine, target in (("trtllm", "trtllm-llm-api"), ("vllm", "vllm-serve"), ("sglang", "sglang-launch-server")):
        assert set(BALANCER_OPTIONS[target]) <= documented(target)
        on = speculating(pick(run, None), engine, **dep)
        assert set(BALANCER_OPTIONS[target]) <= set(on.emitted[target])
        for off_columns in ({"eplb": 0, "redundant_experts": 0}, {"eplb": np.nan, "redundant_experts": np.nan}):
            off = speculating(pick(run, None), engine, **{**dep, **off_columns})
            names = [n for name, text in off.files.items() for n in written_names(name, text)[1]]
            assert names and not set(names) & set(BALANCER_OPTIONS[target]), (engine, off_columns)
            assert "redundant experts" not in off.files["README.txt"] + "".join(t for n, t in off.files.items() if n.endswith(".sh"))
        # no expert parallelism (ep 1, tp 32): no balancer option, the README says why
        flat = speculating(pick(run, None), engine, **{**dep, "tp": 32, "attn_dp": 1, "ep": 1})
        names = [n for name, text in flat.files.items() for n in written_names(name, text)[1]]
        assert not set(names) & set(BALANCER_OPTIONS[target])
        assert "expert load balancer with 32 redundant experts (288 slots), but" in flat.files["README.txt"]
    # 288 slots do not divide over 64 ranks: a note instead
    odd = speculating(pick(run, None), "sglang", **{**dep, "n_gpus": 64, "attn_dp": 64, "ep": 64})
    assert "--enable-eplb" not in command(odd.files["sglang-launch.sh"])
    assert "288 slots do not divide over SGLang's 64 expert-parallel ranks" in odd.files["README.txt"]


def test_every_written_option_is_documented(train_run, deepseek):
    """Every launch of this module (training, each engine, both pools), its files read back: each option name
    is one options.yaml documents for the file's target, and every target was written."""
    launch(train_run)
    launch(deepseek)
    design = pick(load_run(deepseek), None)
    for engine in ("vllm", "sglang"):  # the recommended design on the other engines
        design.row = design.row.copy()
        design.row["engine"] = engine
        WRITTEN[f"{deepseek}:recommended:{engine}"] = launch_files(design, serving=True).files
    seen = set()
    for where, files in WRITTEN.items():
        for name, text in files.items():
            target = next((t for prefix, t in FILE_TARGETS if name.startswith(prefix)), None)
            if target is None:
                continue
            if name.endswith(".txt"):
                names = list(overrides(text))
            elif name.endswith(".yaml"):
                names = keys_in(yaml.safe_load(text))
            else:
                names = flags_in("\n".join(line for line in text.splitlines() if not line.startswith("#")))
            extra = [n for n in names if n not in documented(target)]
            assert not extra, f"{where}/{name} writes {extra}, not in dse/launch/options.yaml's {target}"
            seen.add(target)
    assert seen == set(TARGETS), f"not exercised: {set(TARGETS) - seen}"


def test_the_option_list_is_sourced_and_well_formed():
    listed = targets()
    assert set(listed) == set(TARGETS)
    for target, entry in listed.items():
        assert entry["kind"] in SYNTAX and entry["version"].strip(), target
        assert entry["sources"] and all(s.startswith("https://") for s in entry["sources"]), target
        options = entry["options"]
        assert len(options) == len(set(options)), f"{target}: a name listed twice"
        bad = [o for o in options if not SYNTAX[entry["kind"]].fullmatch(o)]
        assert not bad, f"{target}: {bad} are not {entry['kind']}"
        assert set(entry.get("values") or {}) <= set(options), target
    # each engine's own spelling: TensorRT-LLM's flags with underscores, vLLM's and SGLang's with dashes
    assert all("-" not in o[2:] for o in listed["trtllm-serve"]["options"])
    assert all("_" not in o for t in ("vllm-serve", "sglang-launch-server") for o in listed[t]["options"])


def test_an_undocumented_option_or_value_is_refused():
    with pytest.raises(ValueError, match="does not document"):
        Output().emit("vllm-serve", ["--max-num-seqs", "--made-up-flag"])
    with pytest.raises(ValueError, match="not among the values"):
        Output().emit("sglang-launch-server", {"--kv-cache-dtype": "fp8"})  # SGLang spells it fp8_e4m3


def test_scripts_are_valid_bash(train_run):
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    files = launch(train_run)
    script = train_run / "launch" / "megatron-bridge-train.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert script.stat().st_mode & 0o111 and files["megatron-bridge-train.sh"].startswith("#!/usr/bin/env bash")


def test_a_later_launch_replaces_the_files_of_an_earlier_one(train_run, deepseek, tmp_path):
    """A disaggregated design's files (its pools' commands and the note), then a training design's into the
    same folder: only the training files remain."""
    out = tmp_path / "launch"
    front = pd.read_parquet(deepseek / "pareto.parquet")
    row = front[front["serving"] == "disaggregated"].iloc[0]
    assert "disaggregated.txt" in launch(deepseek, str(whole(row, "front_index")), "--out", str(out))
    assert main(["launch", str(train_run), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.txt", "megatron-bridge-overrides.txt", "megatron-bridge-train.sh"]


def one_line_error(capsys, argv: list[str], *fragments: str) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse launch: error: "), err
    for f in fragments:
        assert f in err, err


def test_bad_input_is_one_line_exit_2(train_run, tmp_path, capsys):
    n = len(pd.read_parquet(train_run / "pareto.parquet"))
    one_line_error(capsys, ["launch", str(train_run), str(n + 1)], f"design #{n + 1} is not on the front",
                   f"#1 to #{n}")
    one_line_error(capsys, ["launch", str(train_run), "0"], "design #0 is not on the front")
    one_line_error(capsys, ["launch", str(train_run), "two"], "invalid int value")
    one_line_error(capsys, ["launch", str(tmp_path / "nowhere")], "not a run directory")
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(capsys, ["launch", str(train_run), "--out", str(blocker / "sub")], "cannot write the launch files")


def test_a_run_with_an_empty_front_is_one_line(tmp_path, capsys):
    text = (ROOT / "spaces" / "small.yaml").read_text().replace("time_to_train_days <= 60", "time_to_train_days <= 0.001")
    space = tmp_path / "impossible.yaml"
    space.write_text(text)
    run = tmp_path / "run"
    assert main(["sweep", str(space), "--no-ray", "--quiet", "--trials", "8", "--out", str(run)]) == 0
    one_line_error(capsys, ["launch", str(run)], "front is empty")
    assert not (run / "launch").exists()
