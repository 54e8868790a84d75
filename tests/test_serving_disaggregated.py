"""Disaggregated serving (objectives/serving/disaggregated.py, prefill_search.py) against hand-derived references.

Rate matching (TensorRT-LLM disaggregated-serving blog 5; inference-measurements.md 3.3): a decode instance
completes X_d requests per second, a prefill instance X_p, so X_d / X_p prefill instances serve each decode
instance and output tokens/s per GPU = X_d OSL / (n_decode + X_d / X_p n_prefill). The case below makes
every step last exactly one second (a host-bound engine: TensorRT-LLM overlaps a 1 s host step with a GPU
step of milliseconds), so every figure follows by hand.
"""

import itertools

import numpy as np
import pytest

from objectives.serving import ServingCalibration, evaluate_serving, search_serving

#: every TensorRT-LLM step takes max(GPU, 1 s) = 1 s; no host time per request
ONE_SECOND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                                expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(1.0, 0.0, 0.0, 0.0),
                                host_request_s=(0.0,) * 4)
ROUND = ONE_SECOND.replace(host_step_s=(0.0,) * 4)


def rows(cal=ONE_SECOND, **columns):
    base = dict(model="llama3-8b", gpu="b200", n_gpus=1, tp=1, precision="fp8", kv_precision="fp8", engine="trtllm",
                serving="disaggregated", input_len=1000, output_len=101, concurrency=100, max_num_tokens=4000)
    return evaluate_serving({**base, **columns}, cal=cal)


def test_rate_matching_by_hand():
    """Decode: 100 requests, 100 decode steps each (the first token comes from the prefill): r = 100 / 100 = 1
    request completes a 1 s step, X_d = 1 request/s, 101 output tokens/s. Prefill: a 4,000-token budget takes
    floor(4000 / 1000) = 4 whole prompts a step, X_p = 4 requests/s: X_d / X_p = 0.25 prefill instances per
    decode instance. One prefill GPU: 101 / (1 + 0.25 x 1) = 80.8 tokens/s per GPU; a two-stage prefill
    instance of 2 GPUs: the same 4 prompts a second (pipelined), 101 / (1 + 0.25 x 2) = 67.33. TTFT = pp x 1 s
    of prefill + half a prefill step + the KV transfer + half a decode step: 2 s (3 s at pp 2) + the transfer;
    TPOT is the 1 s decode step. Replicas 4 and 6: ceil(4 x 0.25) = 1 and ceil(1.5) = 2 prefill instances (the
    floor, 1, would feed 6 decode GPUs 4 requests/s: 7 GPUs for 4 against 8 for 6, dearer per token)."""
    out = rows(prefill_n_gpus=[1, 2, 1], prefill_tp=1, prefill_pp=[1, 2, 1], replicas=[4, 4, 6])
    np.testing.assert_allclose(out["step_time_decode_s"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(out["step_time_mixed_s"], 1.0, rtol=1e-12)  # the prefill instance's step
    np.testing.assert_allclose(out["requests_per_s"], [4.0, 4.0, 6.0], rtol=1e-12)  # 1 request/s a decode instance
    np.testing.assert_allclose(out["output_tokens_per_s_instance"], 101.0, rtol=1e-12)
    np.testing.assert_allclose(out["prefill_instances_per_decode"], 0.25, rtol=1e-12)
    np.testing.assert_allclose(out["output_tokens_per_s_per_gpu"], [101 / 1.25, 101 / 1.5, 101 / 1.25], rtol=1e-12)
    np.testing.assert_allclose(out["tpot_s"], 1.0, rtol=1e-12)
    # llama3-8b's KV at fp8: 2 x 32 layers x 8 KV heads x 128 x 1 byte = 65,536 B a token; 1,000 tokens over
    # NVLink (1 + 1 GPUs inside B200's 8-GPU domain), one lane of 900 GB/s at scaleup_eff 0.8, plus 3 us
    transfer = 65_536 * 1000 / (900e9 * 0.8) + 3e-6
    np.testing.assert_allclose(out["kv_transfer_s"], transfer, rtol=1e-6)
    np.testing.assert_allclose(out["ttft_s"], np.array([2.0, 3.0, 2.0]) + transfer, rtol=1e-9)
    np.testing.assert_allclose(out["prefill_gpus"], [1.0, 2.0, 2.0])
    np.testing.assert_allclose(out["deployment_gpus"], [5.0, 6.0, 8.0])
    assert out["feasible"].all()


def test_kv_transfer_crosses_the_nics_outside_the_nvlink_domain():
    """A decode instance of 8 B200s (tp 8) and a prefill instance of 8 fill more than one 8-GPU NVLink domain:
    the prompt's KV crosses the scale-out NICs, over min(8, 8) lanes: kv x ISL / (8 x NIC bytes/s x
    scaleout_eff x net_eff_rel) + the scale-out latency (inference-measurements.md 2.3)."""
    out = rows(cal=ROUND, model="llama3.3-70b", n_gpus=8, tp=8, prefill_n_gpus=[8, 4], prefill_tp=[8, 4],
               concurrency=256, output_len=1000)
    base = ROUND.base
    nic = out["nic_gbyte_s"][0] * 1e9 * base.scaleout_eff * out["net_eff_rel"][0]
    kv = 163_840 * 1000  # llama 3 70B at fp8: 2 x 80 x 8 x 128 bytes a token
    assert out["kv_transfer_s"][0] == pytest.approx(kv / (8 * nic) + base.scaleout_latency_s, rel=1e-9)
    # 8 + 4 GPUs: still more than the domain; four lanes
    assert out["kv_transfer_s"][1] == pytest.approx(kv / (4 * nic) + base.scaleout_latency_s, rel=1e-9)


def test_prefill_mapping_search_tries_every_candidate_and_keeps_the_best():
    """A dense model's decode instance of 4 H200s (tp 4), the prefill pool blank: prefill instances of 1, 2 or
    4 GPUs (no larger than the decode one) as tp x pp: (1, 1); (1, 2), (2, 1); (1, 4), (2, 2), (4, 1) = 6
    candidates. The search keeps the one serving the most output tokens per GPU, no worse than the prefill
    instance at the decode instance's mapping (the blank cells' meaning in evaluate_serving)."""
    row = dict(model="llama3.3-70b", gpu="h200-sxm", n_gpus=[4], tp=[4], precision="fp8", kv_precision="fp8",
               engine="trtllm", serving="disaggregated", input_len=2000, output_len=500, concurrency=128)
    out = search_serving(row, cal=ROUND)
    assert out["n_prefill_mappings_tried"][0] == 6 and out["n_mappings_tried"][0] == 1
    candidates = [(1, 1, 1), (2, 1, 2), (2, 2, 1), (4, 1, 4), (4, 2, 2), (4, 4, 1)]  # n, tp, pp
    each = [evaluate_serving({**row, "prefill_n_gpus": n, "prefill_tp": t, "prefill_pp": p}, cal=ROUND)
            for n, t, p in candidates]
    best = max(e["output_tokens_per_s_per_gpu"][0] for e in each if e["feasible"][0])
    assert out["output_tokens_per_s_per_gpu"][0] == pytest.approx(best, rel=1e-12)
    chosen = (out["prefill_n_gpus"][0], out["prefill_tp"][0], out["prefill_pp"][0])
    assert chosen in candidates
    as_decode = evaluate_serving(row, cal=ROUND)  # prefill at the decode instance's tp 4
    assert out["output_tokens_per_s_per_gpu"][0] >= as_decode["output_tokens_per_s_per_gpu"][0] * (1 - 1e-12)


def test_prefill_search_respects_given_cells_and_leaves_aggregated_rows_alone():
    """A given prefill_tp fixes it (n and pp searched); an aggregated row has no prefill pool to search."""
    row = dict(model="llama3.3-70b", gpu="h200-sxm", n_gpus=[4, 4], tp=[4, 4], precision="fp8", kv_precision="fp8",
               serving=["disaggregated", "aggregated"], prefill_tp=[2, np.nan], input_len=2000, output_len=500,
               concurrency=128)
    out = search_serving(row, cal=ROUND)
    assert out["prefill_tp"][0] == 2 and out["n_prefill_mappings_tried"].tolist() == [2, 1]  # (2, 2, 1), (4, 2, 2)
    assert np.isnan(out["prefill_n_gpus"][1]) and out["prefill_gpus"][1] == 0


@pytest.mark.parametrize("gpu", ["gb200", "b200"])
def test_moe_prefill_search_beats_the_decode_mapping(gpu):
    """DeepSeek-R1 on 16 GPUs, decode under attention DP (tp 1, attn_dp 16, ep 16): the prefill pool searched
    serves at least as many tokens per GPU as one at the decode mapping, and its mapping makes its instance."""
    row = dict(model="deepseek-r1", gpu=gpu, n_gpus=[16], tp=[1], pp=[1], ep=[16], attn_dp=[16], precision="fp8",
               kv_precision="fp8", serving="disaggregated", input_len=1000, output_len=1000, concurrency=1024)
    out = search_serving(row)
    fixed = evaluate_serving(row)
    assert out["output_tokens_per_s_per_gpu"][0] >= fixed["output_tokens_per_s_per_gpu"][0] * (1 - 1e-12)
    n, t, p, a = (out[f"prefill_{c}"][0] for c in ("n_gpus", "tp", "pp", "attn_dp"))
    assert t * a * p == n <= 16 and out["feasible"][0]
    domain = 72 if gpu == "gb200" else 8  # tp inside the NVLink domain; ep splits tp x attn_dp and 256 experts
    choices = (1, 2, 4, 8, 16, 32, 64)
    expected = sum(1 for n_, t_, p_, e_, a_ in itertools.product((1, 2, 4, 8, 16), choices, (1, 2, 3, 4, 6, 8), choices,
                                                                   choices)
                   if t_ * a_ * p_ == n_ and t_ <= domain and (t_ * a_) % e_ == 0 and 256 % e_ == 0)
    assert out["n_prefill_mappings_tried"][0] == expected


def test_whole_prefill_instances_the_cheaper_of_floor_and_ceil():
    """Whole prefill instances (objectives/serving/pool_size.py), every step 1 s as above: X_p = 4 requests/s
    a prefill instance, a request's latency 102 s (2 s to the first token, 100 steps). B = 402 decoding requests
    complete 4.02 requests/s, ratio 1.005; B = 404, 4.04, ratio 1.01; B = 640, 6.4, ratio 1.6. An owned
    deployment inside one NVLink domain has no fabric, so its cost per hour is u per GPU (u: the 1-GPU
    aggregated row's usd_per_hr), cost per token u x GPUs / tokens. The floor is a choice only where its
    requests' wait for the pool, (ratio / floor - 1) x 102 s, is within one 1 s decode step.

    - ratio 1.005, 1 decode GPU: ceil 2 prefill GPUs, 3 GPUs for 4.02 x 101 = 406.02 tokens/s (0.00739 u);
      floor 1, 2 GPUs, the prompts at 4 requests/s, 404 tokens/s (0.00495 u), a wait of 0.51 s: the floor,
      throughput x 1 / 1.005. Replicas 3: 3.015, floor 3 (6 / 1212 against 7 / 1218.06).
    - ratio 1.01: the floor is cheaper (2 / 404 against 3 / 408.04) but its wait, 1.02 s, is longer than a
      step: the ceiling.
    - ratio 1.6: ceil 2 prefill GPUs, 3 GPUs for 646.4 tokens/s (0.00464 u), cheaper than the floor (2 / 404).
      A 2-GPU prefill instance (pp 2, the same 4 requests/s): the floor, 3 GPUs for 404 (0.00743 u), would
      beat the ceiling's 5 for 646.4 (0.00774 u), but its requests would wait 61 s: the ceiling.
    - sized from a request rate of 4.04/s (one instance, B = 404 at that rate): the ceiling, the rate carried.
    The tokens per GPU at scale stay the rate match's."""
    out = rows(concurrency=[402, 402, 404, 640, 640], prefill_n_gpus=[1, 1, 1, 1, 2], prefill_tp=1,
               prefill_pp=[1, 1, 1, 1, 2], replicas=[np.nan, 3, np.nan, np.nan, np.nan])
    u = rows(serving="aggregated", concurrency=1)["usd_per_hr"][0]
    np.testing.assert_allclose(out["prefill_instances_per_decode"], [1.005, 1.005, 1.01, 1.6, 1.6], rtol=1e-12)
    np.testing.assert_allclose(out["prefill_gpus"], [1, 3, 2, 2, 4])
    np.testing.assert_allclose(out["deployment_gpus"], [2, 6, 3, 3, 5])
    np.testing.assert_allclose(out["output_tokens_per_s"], [404.0, 1212.0, 408.04, 646.4, 646.4], rtol=1e-12)
    np.testing.assert_allclose(out["requests_per_s"], [4.0, 12.0, 4.04, 6.4, 6.4], rtol=1e-12)
    np.testing.assert_allclose(out["output_tokens_per_s_per_gpu"], [406.02 / 2.005, 406.02 / 2.005, 408.04 / 2.01,
                                                                    646.4 / 2.6, 646.4 / 4.2], rtol=1e-12)
    np.testing.assert_allclose(out["usd_per_hr"], u * np.array([2, 6, 3, 3, 5]), rtol=1e-12)
    per_mtok = 1e6 / 3600 * u
    np.testing.assert_allclose(out["usd_per_mtok_out"],
                               per_mtok * np.array([2 / 404, 6 / 1212, 3 / 408.04, 3 / 646.4, 5 / 646.4]), rtol=1e-12)
    # the floor rows cheaper than their ceiling; the long-wait rows dearer than their floor would have been
    assert out["usd_per_mtok_out"][0] < per_mtok * 3 / 406.02 and out["usd_per_mtok_out"][1] < per_mtok * 7 / 1218.06
    assert out["usd_per_mtok_out"][2] > per_mtok * 2 / 404 and out["usd_per_mtok_out"][4] > per_mtok * 3 / 404
    np.testing.assert_allclose(out["energy_j_per_tok_out"] * out["output_tokens_per_s"], out["power_mw"] * 1e6,
                               rtol=1e-12)
    sized = rows(concurrency=None, request_rate_per_s=4.04, prefill_n_gpus=1, prefill_tp=1)
    assert sized["replicas_used"][0] == 1 and sized["prefill_gpus"][0] == 2
    assert sized["prefill_instances_per_decode"][0] == pytest.approx(1.01, rel=1e-4)  # the bisection's tolerance
    assert sized["output_tokens_per_s"][0] == pytest.approx(408.04, rel=1e-4)  # the rate, carried
    # the floor holds the concurrency: a request's cycle takes 1 / share as long (Little's law), the extra spent
    # waiting for the prefill pool before its first token: 1.005 x the full-rate latency at ratio 1.005 (1 s
    # steps: the same 102 s at any concurrency); the ceiling's TTFT is the operating point's; TPOT unchanged
    assert out["e2e_latency_s"][2] == pytest.approx(102.0, rel=1e-3)
    assert out["e2e_latency_s"][0] == pytest.approx(1.005 * out["e2e_latency_s"][2], rel=1e-9)
    assert out["ttft_s"][0] - out["ttft_s"][2] == pytest.approx(0.005 * out["e2e_latency_s"][2], rel=1e-9)
    np.testing.assert_allclose(out["tpot_s"], 1.0, rtol=1e-9)


def test_recommendation_says_the_decode_instances_run_below_their_rate():
    """The report's sentence on a disaggregated design (dse/report/serving_buyer.py) says where the whole
    prefill pool is the floor: ratio 1.005, one prefill instance, the decode instance at 1 / 1.005 = 99.5% of
    its rate; at the ceiling (ratio 1.6 here) nothing is added."""
    import pandas as pd

    from dse.report.serving_buyer import profile

    out = rows(concurrency=[402, 640], prefill_n_gpus=1, prefill_tp=1)
    frame = pd.DataFrame({k: np.broadcast_to(np.asarray(v), (2,)) for k, v in out.items()})
    floor, ceil = (" ".join(profile(frame.iloc[i])) for i in (0, 1))
    assert "1 prefill GPUs in the deployment, whole instances: the decode instances at 99.5% of their rate" in floor
    assert "2 prefill GPUs in the deployment)" in ceil and "of their rate" not in ceil
