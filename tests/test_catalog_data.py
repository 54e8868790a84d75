"""Data checks for objectives/catalog: gpus.yaml, models.yaml and training_runs.csv.

These files are what the model is calibrated against, so the checks are about sources, units and
internal consistency, plus a few throughputs recomputed by hand.
"""
from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "objectives" / "catalog"
SHARED_DATA = REPO.parent / "shared" / "data"

GPU_IDS = ["a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h800", "h200-sxm", "b200", "b300", "gb200",
           "gb300", "mi300x", "mi325x", "mi355x"]
GPU_FIELDS = ["gpu_bf16_tflop_s", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8",
              "gpu_gemm_eff_fp4", "gpu_hbm_gb", "gpu_hbm_tbyte_s", "scaleup_size", "scaleup_gbyte_s", "nic_gbyte_s",
              "gpu_tdp_w"]
NULLABLE = {"gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_fp8", "gpu_gemm_eff_fp4"}
CONFIDENCE = {"spec", "meas", "rep", "est", "rec", "announced"}
#: systems announced and not shipped (the December-2026 roadmap review): figures announced or estimated, some
#: ranged (low / high), some null where nothing is published (objectives/catalog/estimates.py)
ANNOUNCED = {"vera-rubin-nvl72", "rubin-cpx", "rubin-ultra-nvl576", "mi455x"}
#: an announced system's power may be unpublished: null, and a design on it infeasible with the reason
NULLABLE_ANNOUNCED = {"gpu_tdp_w"}

MODEL_IDS = ["gpt3-175b", "gpt3-13b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3.1-405b",
             "mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"]
MODEL_FIELDS = ["n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "ffn_kind", "vocab_size", "seq_len",
                "moe_experts", "moe_topk", "tied_embeddings", "source"]

RUN_COLUMNS = ["run_id", "source_key", "source", "model", "n_layers", "d_model", "n_heads", "n_kv_heads",
               "d_head", "d_ff", "ffn_kind", "vocab_size", "seq_len", "global_batch", "moe_experts",
               "moe_topk", "precision", "gpu", "n_gpus", "tp", "pp", "cp", "ep", "vp", "micro_batch",
               "recompute", "sequence_parallel", "zero_stage", "tied_embeddings",
               "measured_tokens_per_s_per_gpu", "measured_basis", "include", "exclude_reason"]
INT_COLUMNS = ["n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab_size", "seq_len",
               "global_batch", "moe_experts", "moe_topk", "n_gpus", "tp", "pp", "cp", "ep", "vp",
               "micro_batch", "sequence_parallel", "zero_stage", "tied_embeddings"]


@pytest.fixture(scope="module")
def gpus():
    return yaml.safe_load((CATALOG / "gpus.yaml").read_text())["gpus"]


@pytest.fixture(scope="module")
def models():
    return yaml.safe_load((CATALOG / "models.yaml").read_text())["models"]


@pytest.fixture(scope="module")
def runs():
    with open(CATALOG / "training_runs.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def included(runs):
    return [r for r in runs if r["include"] == "1"]


def val(gpus, gid, field):
    return gpus[gid][field]["value"]


# ----------------------------------------------------------------------------------------- GPUs

def test_every_gpu_has_every_field_with_a_source(gpus):
    assert set(GPU_IDS) <= set(gpus)
    for gid, spec in gpus.items():
        assert isinstance(spec.get("name"), str) and spec["name"], gid
        for f in GPU_FIELDS:
            e = spec.get(f)
            assert isinstance(e, dict), f"{gid}.{f} missing"
            assert {"value", "source", "confidence"} <= set(e) <= {"value", "source", "confidence", "low", "high"}, \
                f"{gid}.{f}: {sorted(e)}"
            assert isinstance(e["source"], str) and len(e["source"]) >= 20, f"{gid}.{f}: source needs a key and a title"
            assert e["confidence"] in CONFIDENCE, f"{gid}.{f}: {e['confidence']}"
            assert (e["confidence"] == "announced") <= (gid in ANNOUNCED), f"{gid}.{f}: announced on a shipped part"
            if e["value"] is None:
                assert f in NULLABLE or (gid in ANNOUNCED and f in NULLABLE_ANNOUNCED), f"{gid}.{f} is null"
            else:
                assert isinstance(e["value"], (int, float)) and not isinstance(e["value"], bool), f"{gid}.{f}"
                assert e["value"] > 0, f"{gid}.{f}"
            if e["confidence"] in ("est", "rec"):
                assert len(e["source"]) > 20, f"{gid}.{f}: an estimate needs its reasoning"


def test_sources_file_lists_every_key_used(gpus):
    import re
    text = (CATALOG / "SOURCES.md").read_text()
    used = set()
    for spec in gpus.values():
        for f in GPU_FIELDS:
            used |= set(re.findall(r"\b([SX]\d+)\b", spec[f]["source"]))
    assert used, "no S-/X-keys cited"
    for key in sorted(used):
        assert f"[{key}]" in text, f"{key} cited in gpus.yaml but not listed in SOURCES.md"


def test_h100_reference_numbers(gpus):
    assert val(gpus, "h100-sxm", "gpu_bf16_tflop_s") == 989
    assert val(gpus, "h100-sxm", "gpu_fp8_tflop_s") == 1979
    assert val(gpus, "h100-sxm", "gpu_fp4_tflop_s") is None
    assert val(gpus, "h100-sxm", "gpu_hbm_gb") == 80
    assert val(gpus, "h100-sxm", "gpu_hbm_tbyte_s") == pytest.approx(3.35)
    assert val(gpus, "h100-sxm", "scaleup_size") == 8
    assert val(gpus, "h100-sxm", "scaleup_gbyte_s") == 450  # 900 GB/s bidirectional
    assert val(gpus, "h100-sxm", "nic_gbyte_s") == 50  # 400 Gb/s ConnectX-7 / 8
    assert val(gpus, "h100-sxm", "gpu_tdp_w") == 700


def test_other_reference_numbers(gpus):
    for gid in ("a100-sxm-40gb", "a100-sxm-80gb"):
        assert val(gpus, gid, "gpu_bf16_tflop_s") == 312
        assert val(gpus, gid, "gpu_fp8_tflop_s") is None
        assert val(gpus, gid, "gpu_fp4_tflop_s") is None
        assert val(gpus, gid, "gpu_gemm_eff_fp8") is None
        assert val(gpus, gid, "scaleup_gbyte_s") == 300
        assert val(gpus, gid, "nic_gbyte_s") == 25  # 200 Gb/s HDR per GPU
    assert val(gpus, "a100-sxm-40gb", "gpu_hbm_gb") == 40
    assert val(gpus, "a100-sxm-40gb", "gpu_hbm_tbyte_s") == pytest.approx(1.555)
    assert val(gpus, "a100-sxm-80gb", "gpu_hbm_gb") == 80
    assert val(gpus, "a100-sxm-80gb", "gpu_hbm_tbyte_s") == pytest.approx(2.039)
    assert val(gpus, "h800", "scaleup_gbyte_s") == 200  # NVLink cut to 400 GB/s bidirectional
    assert val(gpus, "h800", "gpu_bf16_tflop_s") == val(gpus, "h100-sxm", "gpu_bf16_tflop_s")
    assert val(gpus, "h200-sxm", "gpu_hbm_gb") == 141
    assert val(gpus, "h200-sxm", "gpu_hbm_tbyte_s") == pytest.approx(4.8)
    assert val(gpus, "b200", "gpu_bf16_tflop_s") == 2250
    assert val(gpus, "b200", "scaleup_gbyte_s") == 900
    assert val(gpus, "b200", "gpu_fp4_tflop_s") == 9000
    for gid in ("gb200", "gb300"):
        assert val(gpus, gid, "scaleup_size") == 72
        assert val(gpus, gid, "scaleup_gbyte_s") == 900
    for gid in ("b300", "gb300"):
        assert val(gpus, gid, "nic_gbyte_s") == 100  # 800G ConnectX-8
    assert val(gpus, "gb200", "nic_gbyte_s") == 50
    for gid in GPU_IDS:
        if gid not in ("gb200", "gb300"):
            assert val(gpus, gid, "scaleup_size") == 8, gid


def test_every_gpu_is_a_system_that_fixes_its_nvlink_domain(gpus):
    """A gpus.yaml entry is the GPU as sold in one system: an HGX/DGX or OAM 8-GPU server (8-GPU domain, one
    price per 8) or an NVL72 rack (72-GPU domain with its 9 NVLink switch trays, one price per 72, built into
    a liquid-cooled facility at $20M per MW of IT, S50/S69). The NIC is the system's: GB200 trays carry
    400G ConnectX-7 (X13), GB300 trays 800G ConnectX-8 (X6)."""
    import re
    text = (CATALOG / "SOURCES.md").read_text()
    for gid, spec in gpus.items():
        e = spec.get("system")
        assert isinstance(e, dict) and set(e) == {"value", "source", "confidence"}, gid
        assert isinstance(e["value"], str) and len(e["source"]) >= 20 and e["confidence"] in CONFIDENCE, gid
        for key in re.findall(r"\b([SX]\d+)\b", e["source"] + spec.get("facility_usd_per_mw", {}).get("source", "")):
            assert f"[{key}]" in text, (gid, key)
        if gid in ANNOUNCED:  # announced racks, each one domain of its packages (dies counted by the name)
            assert e["confidence"] == "announced" and "rack" in e["value"], gid
            assert val(gpus, gid, "facility_usd_per_mw") == 20_000_000, gid  # liquid-cooled, as NVL72 (est)
            continue
        rack = "NVL72 rack" in e["value"]
        size = 72 if rack else 8
        assert val(gpus, gid, "scaleup_size") == val(gpus, gid, "server_gpus") == size, gid
        assert ("8-GPU" in e["value"]) != rack, gid
        if rack:
            assert val(gpus, gid, "facility_usd_per_mw") == 20_000_000, gid
        else:
            assert "facility_usd_per_mw" not in spec, gid  # prices.yaml's average build price
    assert {gid for gid in gpus if "NVL72 rack" in gpus[gid]["system"]["value"]} - ANNOUNCED == {"gb200", "gb300"}
    # Vera Rubin was announced as NVL144 (dies) and sells as NVL72 (packages); Rubin Ultra's NVL576 counts 4 dies
    # a package; Rubin CPX sits in the NVL144 CPX rack on PCIe, outside the NVLink domain (X33-X35, X41-X43)
    domains = {gid: (val(gpus, gid, "scaleup_size"), val(gpus, gid, "server_gpus")) for gid in ANNOUNCED}
    assert domains == {"vera-rubin-nvl72": (72, 72), "rubin-ultra-nvl576": (144, 144), "mi455x": (72, 72),
                       "rubin-cpx": (1, 144)}
    assert "ConnectX-7" in val(gpus, "gb200", "system") and "ConnectX-8" in val(gpus, "gb300", "system")


def test_gpu_numeric_sanity(gpus):
    for gid, spec in gpus.items():
        v = {f: spec[f]["value"] for f in GPU_FIELDS}
        for prec in ("bf16", "fp8", "fp4"):
            peak, eff = v[f"gpu_{prec}_tflop_s"], v[f"gpu_gemm_eff_{prec}"]
            assert (peak is None) == (eff is None), f"{gid}: {prec} peak and efficiency must both be set or null"
            if eff is not None:
                assert 0.3 < eff <= 1.0, f"{gid} {prec} efficiency {eff}"
        if v["gpu_fp8_tflop_s"] is not None:  # dense FP8 is twice dense BF16 on every listed part
            assert v["gpu_fp8_tflop_s"] == pytest.approx(2 * v["gpu_bf16_tflop_s"], rel=0.01), gid
        if v["gpu_fp4_tflop_s"] is not None:
            assert v["gpu_fp4_tflop_s"] >= v["gpu_fp8_tflop_s"], gid
        # shipped parts, and (a wider window) the announced 2026-27 parts: a 4-die Rubin Ultra package has 1 TB
        # HBM4e at 32 TB/s and NVLink 7 at 3.6 TB/s per direction, MI455X a 300 GB/s NIC (X42, X43)
        roadmap = gid in ANNOUNCED
        assert 100 <= v["gpu_bf16_tflop_s"] <= (20_000 if roadmap else 5000), gid
        assert 16 <= v["gpu_hbm_gb"] <= (1024 if roadmap else 512), gid
        assert 1 <= v["gpu_hbm_tbyte_s"] <= (40 if roadmap else 20), gid  # TB/s, not GB/s
        assert 50 <= v["scaleup_gbyte_s"] <= (6000 if roadmap else 2000), gid  # GB/s per direction
        assert 10 <= v["nic_gbyte_s"] <= (400 if roadmap else 200), gid  # GB/s per direction, not Gb/s
        assert v["gpu_tdp_w"] is None and roadmap or 250 <= v["gpu_tdp_w"] <= (4000 if roadmap else 2000), gid
        assert float(v["scaleup_size"]).is_integer(), gid


# ----------------------------------------------------------------------------------------- models

def test_models_have_fields_and_sources(models):
    assert set(MODEL_IDS) <= set(models)
    for mid, m in models.items():
        for f in MODEL_FIELDS:
            assert f in m, f"{mid}.{f} missing"
        assert isinstance(m["source"], str) and len(m["source"]) > 10, mid
        assert m["ffn_kind"] in ("gelu", "swiglu"), mid
        assert isinstance(m["tied_embeddings"], bool), mid
        for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                  "moe_experts", "moe_topk"):
            assert isinstance(m[f], int) and not isinstance(m[f], bool), f"{mid}.{f}"
        assert m["n_heads"] % m["n_kv_heads"] == 0, mid
        if "d_head" in m:  # only where it departs from d_model / n_heads
            assert m["d_head"] * m["n_heads"] != m["d_model"], mid
        else:
            assert m["d_model"] % m["n_heads"] == 0, mid
        assert (m["moe_experts"] == 0) == (m["moe_topk"] == 0), mid
        assert m["moe_topk"] <= m["moe_experts"], mid


def test_model_reference_numbers(models):
    assert models["gpt3-175b"] | {} == models["gpt3-175b"]
    g = models["gpt3-175b"]
    assert (g["n_layers"], g["d_model"], g["n_heads"], g["d_ff"], g["vocab_size"], g["seq_len"]) == \
        (96, 12288, 96, 49152, 50257, 2048)
    assert g["ffn_kind"] == "gelu" and g["tied_embeddings"] is True and g["moe_experts"] == 0
    m = models["llama3.1-405b"]
    assert (m["n_layers"], m["d_model"], m["n_heads"], m["n_kv_heads"], m["d_ff"], m["vocab_size"],
            m["seq_len"], m["ffn_kind"]) == (126, 16384, 128, 8, 53248, 128256, 8192, "swiglu")
    x = models["mixtral-8x7b"]
    assert (x["n_layers"], x["d_model"], x["n_heads"], x["n_kv_heads"], x["d_ff"], x["moe_experts"],
            x["moe_topk"], x["vocab_size"], x["seq_len"]) == (32, 4096, 32, 8, 14336, 8, 2, 32000, 4096)
    assert models["qwen3-30b-a3b"]["d_head"] == 128
    assert models["gpt-oss-120b"]["d_head"] == 64


# ----------------------------------------------------------------------------------------- runs

def test_run_columns_and_ids(runs):
    assert runs, "training_runs.csv is empty"
    assert set(RUN_COLUMNS) <= set(runs[0])
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids))
    for r in runs:
        assert r["include"] in ("0", "1")
        assert (r["include"] == "0") == bool(r["exclude_reason"].strip()), r["run_id"]
        assert r["source_key"] and r["source"], r["run_id"]


def test_included_runs_are_describable(included, gpus):
    assert len(included) > 200
    for r in included:
        rid = r["run_id"]
        assert r["gpu"] in gpus, f"run {rid}: unknown gpu {r['gpu']}"
        for c in INT_COLUMNS:
            if r[c] != "":
                assert r[c].lstrip("-").isdigit(), f"run {rid}: {c}={r[c]!r} is not an integer"
        for c in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                  "global_batch", "n_gpus", "moe_experts", "moe_topk", "cp"):
            assert r[c] != "", f"run {rid}: {c} blank"
        assert r["ffn_kind"] in ("gelu", "swiglu"), rid
        assert r["precision"] in ("bf16", "fp8", "fp4"), rid
        assert val(gpus, r["gpu"], f"gpu_{r['precision']}_tflop_s") is not None, f"run {rid}: precision unsupported"
        assert r["recompute"] in ("", "none", "selective", "full"), rid
        assert r["zero_stage"] in ("", "0", "1", "2", "3"), rid
        assert r["sequence_parallel"] in ("", "0", "1"), rid
        assert int(r["n_heads"]) % int(r["n_kv_heads"]) == 0, rid
        if "" not in (r["tp"], r["pp"], r["cp"]):
            mp = int(r["tp"]) * int(r["pp"]) * int(r["cp"])
            assert int(r["n_gpus"]) % mp == 0, f"run {rid}: tp*pp*cp={mp} does not divide {r['n_gpus']}"
            if r["micro_batch"]:
                dp = int(r["n_gpus"]) // mp
                assert int(r["global_batch"]) % (dp * int(r["micro_batch"])) == 0, rid
        if int(r["moe_experts"]) == 0:
            assert r["moe_topk"] == "0" and r["ep"] in ("", "1"), rid
        t = float(r["measured_tokens_per_s_per_gpu"])
        assert math.isfinite(t) and t > 0, rid
        assert r["measured_basis"], rid


def _run(runs, rid):
    (r,) = [r for r in runs if r["run_id"] == str(rid)]
    return r


def test_derived_throughput_narayanan_table1(runs):
    # GPT 1.7B, Narayanan Table 1: 137 TFLOP/s/GPU, B=512, s=2048, l=24, h=2304, V=51200.
    # FLOPs per token (incl. recompute) = 96*l*h^2*(1 + s/(6h) + V/(16*l*h))
    #   96*24*2304^2 = 2304^3 = 12,230,590,464
    #   s/(6h) = 2048/13,824 = 0.148148;  V/(16*l*h) = 51,200/884,736 = 0.057870;  sum 1.206019
    #   -> 12,230,590,464 * 1.206019 = 1.47503e10 FLOP/token
    # tokens/s/GPU = 137e12 / 1.47503e10 = 9,287.9
    r = _run(runs, 1)
    assert r["measured_basis"].startswith("derived-from-tflops")
    assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(9287.9, abs=0.1)


def test_derived_throughput_megatron_core_readme(runs):
    # GPT 177B, Megatron-Core README r0.8.0: 432.8 TFLOP/s/GPU, l=96, h=12288, 96 heads (MHA), d_ff=4h,
    # V=131072, s=4096, gelu. Megatron model FLOPs per token (no recompute, non-causal):
    #   12*l*h^2 = 12*96*12288^2 = 173,946,175,488
    #   bracket = (1 + g/a + s/h) + f/h + V/(2*l*h) = (1 + 1 + 0.333333) + 4 + 0.055556 = 6.388889
    #   -> 173,946,175,488 * 6.388889 = 1.111323e12 FLOP/token
    # tokens/s/GPU = 432.8e12 / 1.111323e12 = 389.4
    r = _run(runs, 37)
    assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(389.4, abs=0.1)
    # Strong-scaling endpoint (same model, only MFU published): 47% x 989 = 464.83 TFLOP/s
    #   -> 464.83e12 / 1.111323e12 = 418.3 tokens/s/GPU
    r = _run(runs, 40)
    assert r["measured_basis"].startswith("derived-from-mfu")
    assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(418.3, abs=0.1)


def test_derived_throughput_nemo_long_sequence(runs):
    # Llama2-7B at 4K, NeMo 24.03 long-sequence table: 768 TFLOP/s/GPU, l=32, h=4096, 32 heads, 32 KV
    # heads, d_ff=11008 (SwiGLU), V=32000, s=4096:
    #   12*l*h^2 = 12*32*4096^2 = 6,442,450,944
    #   bracket = (1 + 1 + 4096/4096) + (11008/4096)*1.5 + 32000/(2*32*4096) = 3 + 4.03125 + 0.122070 = 7.153320
    #   -> 6,442,450,944 * 7.153320 = 4.608492e10 FLOP/token
    # tokens/s/GPU = 768e12 / 4.608492e10 = 16,664.9
    r = _run(runs, 86)
    assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(16664.9, abs=0.1)


def test_derived_throughput_megatron_2020_iteration_time(runs):
    # GPT-2 1B on 1 A100, Megatron-LM README 2020: batch 16, seq 1024, iteration 1.076 s
    #   tokens/s/GPU = 16*1024 / (1.076*1) = 15,226.8
    r = _run(runs, 23)
    assert float(r["measured_tokens_per_s_per_gpu"]) == pytest.approx(15226.8, abs=0.1)


def test_exclusions_are_the_documented_ones(runs):
    by_model = {}
    for r in runs:
        by_model.setdefault(r["include"], []).append(r)
    for r in by_model.get("0", []):
        reason = r["exclude_reason"]
        assert any(k in reason for k in ("DeepSeek", "Nemotron-3", "internally inconsistent",
                                         "parenthesized", "recalled", "not derivable", "missing",
                                         "does not divide", "gpt-oss", "software stack not modeled",
                                         "superseded", "container regression", "activation offloading",
                                         "Qwen3 MXFP8 recipe not describable")), reason
    # a container regression is shown by the tables themselves (an identical row >= 1.5x faster in the next
    # container): only Qwen3-30B-A3B in 26.02 (run 312, 5,113 tokens/s/GPU on 16 H100, then 9,058 in 26.02.01,
    # run 275: 1.77x), and 25.11 where it ran an identical row at the 26.02 level (B200 run 311 9,691 in 26.02,
    # runs 327 and 353 in 25.11). The GB200 jump of 26.04.01 -> 26.06 (run 182 26,112 -> run 142 40,706) is
    # no regression: 26.06's Qwen3 MXFP8 recipe switched on fp8 attention and full-iteration CUDA graphs
    # (excluded as not describable), so 26.04.01 and 26.02.01 (runs 184, 275) are kept
    assert sorted(int(r["run_id"]) for r in runs if r["exclude_reason"].startswith("container regression")) == \
        [311, 327, 353]
    # the Qwen3 MXFP8 rows of GB200 / GB300 / B300 from container 26.06 on run that recipe
    qwen_fp8_attn = sorted(int(r["run_id"]) for r in runs if r["exclude_reason"].startswith("Qwen3 MXFP8"))
    assert {101, 102, 103, 104, 143} <= set(qwen_fp8_attn)
    assert all(r["source_key"] in ("mbridge-26.06", "mbridge-26.06.01", "mbridge-26.08") and r["fp8_recipe"] == "mxfp8"
               for r in runs if r["exclude_reason"].startswith("Qwen3 MXFP8"))
    # nothing describable is excluded for being hard to predict: every Mosaic row is kept
    assert all(r["include"] == "1" for r in runs if r["source_key"].startswith("mosaic-"))


@pytest.mark.skipif(not (SHARED_DATA / "training-measurements.csv").is_file(),
                    reason="shared data not available (only in the development checkout)")
def test_build_script_reproduces_csv(tmp_path):
    out = tmp_path / "runs.csv"
    subprocess.run([sys.executable, str(REPO / "tools" / "build_training_runs.py"), str(SHARED_DATA),
                    "--out", str(out), "--no-md"], check=True, capture_output=True)
    assert out.read_text() == (CATALOG / "training_runs.csv").read_text()


def test_gb300_gemm_rate_is_b300s_at_its_power_limit():
    """GB300's GEMM rate: B300's measured MAMF (X27; 1,769 bf16 and 3,353.3 fp8 TFLOP/s at 1,100 W) at 1,400 W.

    By hand: (1400 / 1100)^(1/3) = 1.27273^(1/3) = 1.0837; bf16 1,769 x 1.0837 = 1,917.1 TFLOP/s = 0.767 of 2,500;
    fp8 3,353.3 x 1.0837 = 3,634.0 = 0.727 of 5,000. GB200 at its 1,200 W keeps its own measurement (0.723 fp8),
    so at one mapping GB300's fp8 GEMMs run 0.727 / 0.723 = 1.005x GB200's and its bf16 GEMMs 0.767 / 0.729 = 1.052x.
    """
    from objectives.catalog.power_limit import power_limited_tflop_s

    assert power_limited_tflop_s(1769.0, 1100.0, 1400.0) == pytest.approx(1917.1, abs=0.1)
    assert power_limited_tflop_s(3353.3, 1100.0, 1400.0) == pytest.approx(3634.0, abs=0.1)
    gpus = yaml.safe_load((CATALOG / "gpus.yaml").read_text())["gpus"]
    gb300, gb200 = gpus["gb300"], gpus["gb200"]
    assert gb300["gpu_gemm_eff_bf16"]["value"] == pytest.approx(1917.1 / 2500, abs=5e-4)
    assert gb300["gpu_gemm_eff_fp8"]["value"] == pytest.approx(3634.0 / 5000, abs=5e-4)
    assert gb300["gpu_tdp_w"]["value"] == 1400 and gb200["gpu_tdp_w"]["value"] == 1200


def test_power_limit_law_reproduces_the_measured_b200_to_gb200_step():
    """The cube-root law on the one measured pair of one die at two caps: B200 1,000 W -> GB200 1,200 W.

    By hand: (1200/1000)^(1/3) = 1.0627; fp8 3,432.5 x 1.0627 = 3,647.7 against GB200's measured 3,615.6
    (+0.9%); bf16 1,745 x 1.0627 = 1,854.4 against 1,822 (+1.8%). Within 2% both.
    """
    from objectives.catalog.power_limit import power_limited_tflop_s

    assert power_limited_tflop_s(3432.5, 1000.0, 1200.0) == pytest.approx(3615.6, rel=0.02)
    assert power_limited_tflop_s(1745.0, 1000.0, 1200.0) == pytest.approx(1822.0, rel=0.02)
    with pytest.raises(ValueError, match="positive"):
        power_limited_tflop_s(1745.0, 0.0, 1200.0)
