"""The serving model against hand-derived references (objectives/serving; docs/serving.md).

Each expected value is worked out below from the architecture's published numbers, the catalog's GPU
figures and the formulas the modules document; calibrations are given explicitly where a figure depends
on them, so that a refit does not move the references.
"""

import numpy as np
import pytest

from objectives import InputError
from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving.step import experts_touched

#: a calibration with round numbers: HBM at 80%, GEMMs at the catalog's rate, no host time
ROUND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                           expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(0.0,) * 4,
                           host_request_s=(0.0,) * 4)


BASE = {"gpu": "h200-sxm", "n_gpus": 1, "tp": 1, "input_len": 1000, "output_len": 1000}


def one(**row):
    """One row (BASE's columns unless given) evaluated at the ROUND calibration."""
    out = evaluate_serving({k: [v] for k, v in {**BASE, **row}.items()}, cal=ROUND)
    return {k: (v[0] if np.ndim(v) else v) for k, v in out.items()}


def test_kv_bytes_per_token_llama31_70b_gqa():
    # 2 (K and V) x 80 layers x 8 KV heads x 128 (d_head) x 2 bytes = 327,680 B at bf16; half at fp8;
    # NVFP4 0.5 byte + one E4M3 scale per 16 values = 0.5625 bytes: 92,160 B
    for precision, expected in (("bf16", 327_680), ("fp8", 163_840), ("fp4", 92_160)):
        row = one(model="llama3-70b", kv_precision=precision, gpu="b200")
        assert row["kv_bytes_per_token"] == pytest.approx(expected, rel=1e-12)


def test_kv_bytes_per_token_deepseek_v3_mla():
    # 61 layers x (kv_lora_rank 512 + qk_rope_dim 64) x 2 bytes = 70,272 B: the latent, once per layer
    row = one(n_gpus=8, attn_dp=8, ep=8, model="deepseek-v3", precision="fp8")
    assert row["kv_bytes_per_token"] == pytest.approx(70_272, rel=1e-12)
    # and whole on a GPU of the attention group (attention data parallelism: tp 1)
    assert row["kv_bytes_per_token_gpu"] == pytest.approx(70_272, rel=1e-12)


def test_gqa_kv_split_over_tp_and_replicated_beyond_the_kv_heads():
    # Llama 3 70B (8 KV heads): tp 4 holds 2 heads a GPU, tp 8 one; tp 16 still one (replicated)
    per_gpu = {tp: one(n_gpus=tp, tp=tp, model="llama3-70b", gpu="h100-sxm")["kv_bytes_per_token_gpu"]
               for tp in (4, 8)}
    assert per_gpu[4] == pytest.approx(327_680 / 4) and per_gpu[8] == pytest.approx(327_680 / 8)


def test_decode_step_of_a_weight_bound_batch_of_one():
    # Llama 3 8B in bf16 on one H100, one request: the step streams every weight once. Per layer attention
    # 2*4096*4096 + 2*4096*1024 = 41,943,040 and SwiGLU 3*4096*14336 = 176,160,768 parameters, x 32 layers
    # = 6,979,321,856 x 2 B, plus the bf16 output layer 128,256 x 4,096 x 2 B = 1,050,673,152 B:
    # 15,009,316,864 B at 0.8 x 3.35 TB/s = 5.600 ms (the KV of 129 tokens and one token's activations add
    # 0.01 ms; the GEMMs' FLOPs, 2 x 7.5e9 at 794 TFLOP/s, 0.02 ms, hide under the reads)
    row = one(model="llama3-8b", gpu="h100-sxm", input_len=128, output_len=2, concurrency=1)
    weights = 15_009_316_864
    assert row["step_time_decode_s"] == pytest.approx(weights / (3.35e12 * 0.8), rel=0.005)
    assert row["step_time_decode_s"] > weights / (3.35e12 * 0.8)


def test_largest_batch_that_fits():
    # Llama 3 70B fp8 on one H200 (141 GiB = 151,397,597,184 B), fp8 KV, TensorRT-LLM keeping 0.9 of the
    # memory left: weights 68,451,041,280 linear parameters x 1 B + embeddings 2 x 128,256 x 8,192 x 2 B =
    # 72,653,733,888 B; workspace at max_num_tokens 8,192 and max_batch_size 256: 8,192 x 2 B x (4 x 8,192 +
    # 2 x 28,672) + 256 x 128,256 x 4 B = 1,607,729,152 B; CUDA context 2 GB. KV capacity 0.9 x
    # (151,397,597,184 - 2e9 - 72,653,733,888 - 1,607,729,152) = 67,622,520,730 B; one request reserves
    # (1,000 + 1,000) x 163,840 B = 327,680,000 B: 206 requests (206.36)
    row = one(model="llama3-70b", precision="fp8", kv_precision="fp8", kv_mem_frac=0.9, max_num_tokens=8192,
              max_batch_size=256)
    assert row["weights_gb"] * 1e9 == pytest.approx(72_653_733_888, rel=1e-9)
    assert row["kv_cache_gb"] * 1e9 == pytest.approx(67_622_520_730, rel=1e-9)
    assert row["max_concurrency"] == 206
    assert row["concurrency"] == 206 and row["feasible"]  # blank concurrency, no target: the largest that fits
    # the batch limit binds below that
    assert one(model="llama3-70b", precision="fp8", kv_precision="fp8", kv_mem_frac=0.9, max_num_tokens=8192,
               max_batch_size=128)["max_concurrency"] == 128


def test_no_request_fits_is_infeasible_with_its_reason():
    # 70B in bf16 (141 GB of weights) on one 80 GB H100
    row = one(model="llama3-70b", gpu="h100-sxm")
    assert not row["feasible"] and row["con_memory"] > 0 and row["max_concurrency"] == 0
    assert row["infeasible_reason"].startswith("memory: one request needs 0.66 GB of KV cache per GPU")


def test_a_concurrency_beyond_the_kv_cache_is_infeasible():
    row = one(model="llama3-70b", precision="fp8", kv_precision="fp8", concurrency=1000)
    assert not row["feasible"] and row["infeasible_reason"].startswith("memory: concurrency 1000 needs")


def test_experts_touched():
    # Mixtral (8 experts, top 2): one token reads 2 experts, two tokens 8 (1 - 0.75^2) = 3.5, many all 8
    assert experts_touched(1, 2, 8) == pytest.approx(2.0)
    assert experts_touched(2, 2, 8) == pytest.approx(3.5)
    assert experts_touched(200, 2, 8) == pytest.approx(8.0, rel=1e-12)


def test_tpot_slo_search_finds_the_knee():
    table = {**BASE, "model": "llama3.3-70b", "precision": "fp8", "kv_precision": "fp8", "tpot_slo_s": 0.05}
    row = one(**table)
    assert row["tpot_s"] <= 0.05 and row["feasible"] and 1 < row["concurrency"] < row["max_concurrency"]
    above = one(**{**table, "concurrency": row["concurrency"] + 1})
    assert above["tpot_s"] > 0.05 and not above["feasible"] and above["infeasible_reason"].startswith("slo: ")


def test_a_target_no_concurrency_meets_is_infeasible():
    row = one(model="llama3.3-70b", precision="fp8", kv_precision="fp8", tpot_slo_s=0.001)
    assert not row["feasible"] and row["concurrency"] == 1 and row["con_slo"] > 0


def test_littles_law_at_a_request_rate():
    # below saturation the instance serves the offered rate, and requests in flight = rate x latency
    row = one(model="llama3.3-70b", precision="fp8", kv_precision="fp8", request_rate_per_s=1.0, replicas=1)
    assert row["requests_per_s"] == pytest.approx(1.0, rel=1e-3) and not row["saturated"]
    assert row["concurrency"] == pytest.approx(1.0 * row["e2e_latency_s"], rel=0.03)
    # a rate beyond what it serves saturates at max_concurrency
    far = one(model="llama3.3-70b", precision="fp8", kv_precision="fp8", request_rate_per_s=1000.0, replicas=1)
    assert far["saturated"] and far["concurrency"] == far["max_concurrency"]


def test_replicas_sized_from_a_request_rate():
    best = one(model="llama3.3-70b", precision="fp8", kv_precision="fp8", tpot_slo_s=0.05)
    row = one(model="llama3.3-70b", precision="fp8", kv_precision="fp8", tpot_slo_s=0.05,
              request_rate_per_s=10.0 * best["requests_per_s"])
    assert row["replicas_used"] == 10 and row["deployment_gpus"] == 10


def test_cloud_cost_per_million_output_tokens():
    # cloud: GPU-hours at the catalog price; $/Mtok = price x GPUs / (tokens/s x 3600) x 1e6
    row = one(n_gpus=2, tp=2, model="llama3.3-70b", gpu="h100-sxm", precision="fp8",
              kv_precision="fp8", cost_mode="cloud", replicas=3)
    assert row["usd_per_hr"] == pytest.approx(6 * 3.24)
    assert row["usd_per_mtok_out"] == pytest.approx(6 * 3.24 / (row["output_tokens_per_s"] * 3600) * 1e6, rel=1e-12)
    assert row["output_tokens_per_s"] == pytest.approx(3 * row["output_tokens_per_s_instance"])
    assert row["output_tokens_per_s_per_gpu"] == pytest.approx(row["output_tokens_per_s_instance"] / 2)


def test_pipeline_stages_multiply_tpot_not_throughput_per_stage_step():
    # two stages: each token crosses both, and two micro-batches are in flight
    row = one(n_gpus=2, pp=2, model="llama3-70b", gpu="h100-sxm", precision="fp8",
              kv_precision="fp8", concurrency=64)
    assert row["tpot_s"] == pytest.approx(2 * row["step_time_s"])


def test_fp4_needs_blackwell_and_the_mapping_must_make_the_instance():
    row = one(model="llama3-70b", precision="fp4")
    assert not row["feasible"] and row["infeasible_reason"].startswith("precision: the GPU has no tensor cores")
    with pytest.raises(InputError, match="tp\\*attn_dp\\*pp = 2\\*1\\*1 = 2 is not n_gpus = 4"):
        evaluate_serving({**BASE, "model": "llama3-70b", "n_gpus": 4, "tp": 2})
    with pytest.raises(InputError, match="prefill_tp\\*prefill_attn_dp\\*prefill_pp = 2\\*1\\*1 = 2 is not prefill_n_gpus = 1"):
        evaluate_serving({**BASE, "model": "llama3-70b", "serving": "disaggregated", "prefill_tp": 2})
    with pytest.raises(InputError, match="column 'input_len'"):
        evaluate_serving({**BASE, "model": "llama3-70b", "input_len": 0})


def test_mapping_search_fills_blank_cells_with_the_best_feasible_mapping():
    from objectives.serving import search_serving

    table = {**BASE, "n_gpus": [8, 8], "tp": [np.nan, 8], "pp": [np.nan, 1], "ep": [np.nan, 1], "attn_dp": [np.nan, 1],
             "model": "llama3.3-70b", "gpu": "h100-sxm", "precision": "fp8", "kv_precision": "fp8", "tpot_slo_s": 0.05}
    out = search_serving(table, cal=ROUND)
    # a dense model: tp x pp = 8, no attention data or expert parallelism; tp 1, 2, 4, 8 with pp 8, 4, 2, 1
    assert out["n_mappings_tried"].tolist() == [4, 1]
    assert out["tp"][0] * out["pp"][0] == 8 and out["ep"][0] == 1 and out["attn_dp"][0] == 1
    # the winner serves at least as many tokens per GPU as the fixed tp 8 mapping, within the target
    assert out["output_tokens_per_s_per_gpu"][0] >= out["output_tokens_per_s_per_gpu"][1] * (1 - 1e-12)
    assert out["tpot_s"][0] <= 0.05 and out["feasible"].all()
    # every candidate it tried is no better: evaluate them one by one
    best = max(one(n_gpus=8, tp=tp, pp=8 // tp, model="llama3.3-70b", gpu="h100-sxm", precision="fp8",
                   kv_precision="fp8", tpot_slo_s=0.05)["output_tokens_per_s_per_gpu"] for tp in (1, 2, 4, 8))
    assert out["output_tokens_per_s_per_gpu"][0] == pytest.approx(best, rel=1e-12)


def test_mapping_search_of_an_instance_no_choice_makes_is_infeasible():
    from objectives.serving import search_serving

    out = search_serving({**BASE, "n_gpus": [72], "tp": [np.nan], "model": "llama3-70b", "gpu": "gb200"}, cal=ROUND)
    assert not out["feasible"][0] and out["n_mappings_tried"][0] == 0
    assert out["infeasible_reason"][0].startswith("mapping: no tp x attn_dp x pp")


def test_a_rented_deployment_pays_whole_instances():
    # renting an 8-GPU instance for a 4-GPU instance of the model: the bill is for 8 GPUs
    from objectives.catalog import instance_ids

    rented = [i for i in instance_ids() if i.startswith("aws-p5.")][0]
    row = one(n_gpus=4, tp=4, model="llama3.3-70b", instance=rented, precision="fp8", kv_precision="fp8",
              gpu=None)
    assert row["gpu"] == "h100-sxm" and row["cost_mode"] == "cloud" and row["instance_gpus"] == 8
    assert row["usd_per_hr"] == pytest.approx(8 * row["cloud_usd_per_gpu_hr"]) and row["capex_usd"] == 0


def test_disaggregated_rate_matching():
    # a prefill instance's prompts per second X_p and a decode instance's requests X_d: X_d / X_p prefill
    # instances per decode instance; per GPU, X_d OSL over the decode instance's GPUs and that share of a
    # prefill instance's (TensorRT-LLM blog 5)
    row = one(model="llama3.3-70b", gpu="b200", n_gpus=2, tp=2, prefill_n_gpus=1, prefill_tp=1, precision="fp8",
              kv_precision="fp8", serving="disaggregated", concurrency=256, replicas=4)
    ratio = row["prefill_instances_per_decode"]
    assert 0 < ratio < 4
    assert row["output_tokens_per_s_per_gpu"] == pytest.approx(row["output_tokens_per_s_instance"] / (2 + ratio * 1))
    assert row["prefill_gpus"] == np.ceil(4 * ratio) and row["deployment_gpus"] == 4 * 2 + np.ceil(4 * ratio)
    # decode-only steps: TPOT is the decode step, no prompt interleaved
    assert row["tpot_s"] == pytest.approx(row["step_time_decode_s"]) and row["mixed_step_frac"] == 0
    # the prompt's KV (160 KiB a token at fp8 x 1,000 tokens) crosses NVLink inside the 8-GPU board
    assert row["kv_transfer_s"] == pytest.approx(163_840 * 1000 / (1 * 900e9 * 0.8) + 3e-6, rel=1e-6)
    same = one(model="llama3.3-70b", gpu="b200", n_gpus=2, tp=2, precision="fp8", kv_precision="fp8", concurrency=256,
               replicas=4)
    # with the prompts elsewhere the decode steps are shorter than the aggregated instance's mean step
    assert row["tpot_s"] < same["tpot_s"]



def test_a_deployment_inside_one_nvlink_domain_buys_no_scale_out_fabric():
    """Replicas of an instance that fits one NVLink domain never talk to each other over the NICs: no
    fabric is bought for them (8 x 1-GPU H200 replicas); an instance of 16 H200s spans two 8-GPU servers and
    pays for the fat tree of its 16 GPUs, whose servers' price and power are the same per GPU either way."""
    inside = one(model="llama3-8b", n_gpus=1, replicas=8, concurrency=16)
    spanning = one(model="llama3-8b", n_gpus=16, tp=2, pp=8, replicas=1, concurrency=16)
    assert inside["net_capex_usd"] == 0.0
    assert spanning["net_capex_usd"] > 0.0
    # the same 16 GPUs of servers in each; the spanning one adds exactly its fabric to the capex
    servers = lambda r: r["capex_usd"] - r["net_capex_usd"]
    assert servers(spanning) == pytest.approx(2 * servers(inside), rel=0.02)


QWEN3_DEP8 = dict(model="qwen3-235b-a22b", n_gpus=8, tp=1, attn_dp=8, ep=8, precision="fp8", kv_precision="fp8",
                  kv_mem_frac=0.95, engine="trtllm", input_len=1000, output_len=1000)


def test_attention_dp_moe_workspace_of_the_gathered_tokens():
    # Qwen3-235B-A22B (h 4,096, experts' d_ff 1,536, top-8) on 8 H200, TensorRT-LLM, attention DP 8, ep 8,
    # max_num_tokens 2,048 and max_batch_size 512 a rank. The step's own workspace: 2,048 x 2 B x (4 x 4,096
    # + 2 x 8 x 1,536) = 167,772,160 B and fp32 logits 512 x 151,936 x 4 B = 311,164,928 B. The MoE runs on the
    # tokens gathered from the 8 ranks, in the dry run (2,048 a rank) and in the largest decode CUDA graph's
    # pool (512 a rank): 8 x (2,048 + 512) = 20,480 tokens x 8 rows x 2 B x (2 x 4,096 + 3 x 1,536) =
    # 4,194,304,000 B (memory.py module doc: _util.py's dry run, moe_kernels.cu's workspace)
    row = one(**QWEN3_DEP8, max_num_tokens=2048, max_batch_size=512)
    assert row["act_workspace_gb"] * 1e9 == pytest.approx(167_772_160 + 311_164_928 + 4_194_304_000, rel=1e-12)
    # vLLM's data-parallel attention has no such dry run or graph pool in the model: the step's own only
    vllm = one(**{**QWEN3_DEP8, "engine": "vllm"}, max_num_tokens=2048, max_batch_size=512)
    assert vllm["act_workspace_gb"] * 1e9 == pytest.approx(167_772_160 + 311_164_928, rel=1e-12)
    # one attention group (tp 8, no attention DP): none either
    tp8 = one(**{**QWEN3_DEP8, "tp": 8, "attn_dp": 1}, max_num_tokens=2048, max_batch_size=512)
    assert tp8["act_workspace_gb"] * 1e9 == pytest.approx(2048 * 2 * (4 * 4096 + 2 * 8 * 1536 / 8)
                                                         + 512 * 151_936 * 4, rel=1e-12)


def test_trtllm_bench_batch_counts_every_attention_group():
    # trtllm-bench's heuristic knows --tp 8 only: it counts the requests the 8 GPUs' KV cache holds and sets
    # that as max_batch_size, which the engine applies to each attention-DP rank. One rank's KV holds
    # f = 0.95 x (151,397,597,184 - 2e9 - weights) / ((1,000 + 1,000) x 94 layers x 2 x 4 heads x 128 x 1 B)
    # requests; the batch is min(ceil(8 f), 4,096) a rank (the budget 2,048 here: 8,192 the largest token count)
    row = one(**QWEN3_DEP8)
    fits = 0.95 * (151_397_597_184 - 2e9 - row["weights_gb"] * 1e9) / (2000 * 94 * 2 * 4 * 128)
    batch = min(np.ceil(8 * fits), 4096)
    assert batch == 4096 and row["batch_limit"] == 8 * batch
    assert row["token_budget"] == 8192  # ceil(4,096 x 2 / 256) x 256 = 8,192, above ISL + batch = 5,096
