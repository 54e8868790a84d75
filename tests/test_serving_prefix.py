"""Prefix caching in the serving model (``prefix_hit_frac``; objectives/serving/step.py, batching.py; docs/serving.md).

One design throughout: Llama 3.3 70B (80 layers, d_model 8192, 64 heads, 8 KV heads, d_head 128, FFN 28,672)
in fp8 with an fp8 KV cache on one B200 under trtllm, 4,000 tokens in and 500 out, one request in flight, at
a calibration of round numbers (HBM at 80%, GEMMs at the catalog's rate, no host time; tests/test_serving_model.py).

With a share h of the prompt served from a prefix cache the prefill computes P = (1 - h) 4,000 tokens:
4,000 at h = 0, 2,000 at h = 0.5, 1,000 at h = 0.75. The step's GEMMs read 80 x (2 x 8192^2 + 2 x 8192 x 1024 +
3 x 8192 x 28672) = 68,451,041,280 weights, 2 FLOPs each per token: the prefill's GEMM FLOPs
2 x 68,451,041,280 x 4,000 = 5.476e14 at h = 0 and x 1,000 = 1.369e14 at h = 0.75, a quarter.

Each computed token attends the whole context before it, the cached prefix included: over positions
hs .. s of a causal layer, K = s (1 + h) / 2 keys a token (2,000, 3,000, 3,500), at 2 x 64 heads x (128 + 128)
FLOPs a key a layer x 80 layers = 2,621,440 FLOPs, at the B200's flash-attention rate 0.5 x 2,250 TFLOP/s:
A = 2.33017e-9 s per computed token and key. The prefill's attention, P x K: 8.0e6, 6.0e6 and 3.5e6
token-keys, 7/16 of h = 0's at h = 0.75 (not a quarter: the suffix still reads the prefix's KV).

Per computed token the mixed step also pays G: the GEMMs at 4,500 TFLOP/s x 0.763 (MAMF) x 8192 / (8192 +
gemm_n_half) (both GEMM widths 8,192), the KV written (163,840 B at 6.4 TB/s) and the 16-bit activations
(2 B x 80 x (4 x 8192 + 64 x 256 + 2 x 8 x 128 + 2 x 8192 + 6 x 28672) = 38,338,560 B at 6.4 TB/s, 5.99e-6 s).
The rest, F, is the step's fixed cost (the decoding token, the output layer, a GEMM's rows' fixed cost):
T_mixed = F + G P + A P K, which the three runs must satisfy with the hand-derived G and A.

At one request in flight a request spends one step in prefill and 499 in decode: r = 1/500 requests a step,
a share 1/500 of the steps mixed, TTFT = T_step / 2 + T_mixed, TPOT = T_step = (T_mixed + 499 T_decode) / 500,
output tokens/s = r x 500 / T_step = 1 / T_step. The decode step is the same at every h (the KV read is the
whole prompt's), so TPOT falls only by the mixed step's share, and the throughput rises by it.
"""

import numpy as np
import pytest

from objectives import InputError
from objectives.serving import ServingCalibration, evaluate_serving

ROUND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                           expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(0.0,) * 4,
                           host_request_s=(0.0,) * 4)
ROW = {"model": "llama3.3-70b", "gpu": "b200", "n_gpus": 1, "tp": 1, "precision": "fp8", "kv_precision": "fp8",
       "engine": "trtllm", "input_len": 4000, "output_len": 500, "concurrency": 1}
WEIGHTS = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672)  # 68,451,041,280


def run(**row):
    """Each column of the rows evaluated (ROW's columns unless given), at the ROUND calibration."""
    table = {k: v if np.ndim(v) else [v] for k, v in {**ROW, **row}.items()}
    n = max(len(v) for v in table.values())
    out = evaluate_serving({k: v * n if len(v) == 1 else v for k, v in table.items()}, cal=ROUND)
    return {k: np.asarray(v) for k, v in out.items()}


def test_prefill_computes_the_uncached_suffix_against_the_whole_context():
    out = run(prefix_hit_frac=[0.0, 0.5, 0.75])
    assert WEIGHTS == 68_451_041_280
    tokens = out["prefill_chunk_tokens"]
    np.testing.assert_array_equal(tokens, [4000.0, 2000.0, 1000.0])
    flops = 2.0 * WEIGHTS * tokens  # the prefill step's GEMM FLOPs
    assert flops[0] == pytest.approx(5.476e14, rel=1e-3) and flops[2] == pytest.approx(1.369e14, rel=1e-3)
    assert flops[2] / flops[0] == 0.25
    # the mixed step: F + G P + A P K, G and A by hand (module doc)
    gemm = 2.0 * WEIGHTS / (4500e12 * 0.763 * 8192 / (8192 + ROUND.base.gemm_n_half))
    g = gemm + 163_840 / 6.4e12 + 2.0 * 80 * (4 * 8192 + 64 * 256 + 2 * 8 * 128 + 2 * 8192 + 6 * 28672) / 6.4e12
    a = 2.0 * 64 * 256 * 80 / (0.5 * 2250e12)
    assert a == pytest.approx(2.33017e-9, rel=1e-5)
    keys = 4000 * (1.0 + np.array([0.0, 0.5, 0.75])) / 2.0  # 2,000, 3,000, 3,500
    t = out["step_time_mixed_s"]
    fixed = t - g * tokens - a * tokens * keys
    # the same F at every h (were the suffix to attend only itself, s (1 - h) / 2 keys, F at h = 0.75 would
    # come out A x 1,000 x (3,500 - 500) = 7.0 ms above h = 0's)
    np.testing.assert_allclose(fixed, fixed[0], rtol=1e-9)
    assert 0.0 < fixed[0] < 0.001


def test_ttft_falls_with_the_prefill_and_decode_stays():
    h0, h75 = (run(prefix_hit_frac=h) for h in (0.0, 0.75))
    for out in (h0, h75):
        np.testing.assert_allclose(out["mixed_step_frac"], 1.0 / 500, rtol=1e-12)
        np.testing.assert_allclose(out["ttft_s"], 0.5 * out["step_time_s"] + out["step_time_mixed_s"], rtol=1e-12)
    # TTFT 214.1 ms -> 61.6 ms: the GEMMs, KV writes and activations at a quarter, the attention at 7/16,
    # the fixed cost and half a step kept: between a quarter and 7/16 of h = 0's
    assert h0["ttft_s"][0] == pytest.approx(0.2141, rel=1e-3)
    assert h75["ttft_s"][0] == pytest.approx(0.06159, rel=1e-3)
    assert 0.25 < h75["ttft_s"][0] / h0["ttft_s"][0] < 7.0 / 16.0
    # the decode step bit for bit (the KV read is the whole prompt's, as the KV held)
    np.testing.assert_array_equal(h75["step_time_decode_s"], h0["step_time_decode_s"])
    np.testing.assert_array_equal(h75["max_concurrency"], h0["max_concurrency"])
    # TPOT, the mean step, falls by the mixed step's share alone: (208.3 - 56.0 ms) / 500 = 0.305 ms
    drop = (h0["step_time_mixed_s"] - h75["step_time_mixed_s"]) / 500
    np.testing.assert_allclose(h0["tpot_s"] - h75["tpot_s"], drop, rtol=1e-9)
    assert drop[0] == pytest.approx(0.305e-3, rel=2e-3)
    # output tokens/s = 1 / T_step: 86.71 -> 89.06 (+2.7%)
    np.testing.assert_allclose(h75["output_tokens_per_s_per_gpu"], 1.0 / h75["step_time_s"], rtol=1e-12)
    assert h75["output_tokens_per_s_per_gpu"][0] / h0["output_tokens_per_s_per_gpu"][0] == pytest.approx(1.027, abs=1e-3)


def test_throughput_rises_where_prefill_takes_a_share_of_the_steps():
    # 64 requests in flight: r = 64 / 500 requests a step, a share 0.128 of the steps mixed at both h; each
    # mixed step 152 ms shorter (as above), so the mean step and TPOT fall and the throughput rises more than
    # at one request: 1,457 -> 2,620 tokens/s per GPU
    h0, h75 = (run(prefix_hit_frac=h, concurrency=64) for h in (0.0, 0.75))
    np.testing.assert_allclose(h0["mixed_step_frac"], 0.128, rtol=1e-12)
    np.testing.assert_allclose(h75["mixed_step_frac"], 0.128, rtol=1e-12)
    assert h75["tpot_s"][0] < h0["tpot_s"][0]
    gain = h75["output_tokens_per_s_per_gpu"][0] / h0["output_tokens_per_s_per_gpu"][0]
    assert gain == pytest.approx(2620 / 1457, rel=2e-3)


def test_no_hit_is_the_model_without_the_column():
    given, absent = run(prefix_hit_frac=0.0), run()
    for name in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "step_time_mixed_s", "usd_per_mtok_out"):
        np.testing.assert_array_equal(given[name], absent[name])


def test_disaggregated_prefill_needs_fewer_instances():
    # the prefill pool computes 1,000 tokens a prompt: four prompts a step of its 4,145-token budget against
    # one; the prompt's whole KV still crosses to the decode instance, and its prefix stays in the prefill
    # instance's cache (con_prefill_memory rises by 3 prompts' more KV held)
    h0, h75 = (run(prefix_hit_frac=h, serving="disaggregated", concurrency=16) for h in (0.0, 0.75))
    np.testing.assert_array_equal(h75["kv_transfer_s"], h0["kv_transfer_s"])
    np.testing.assert_array_equal(h75["tpot_s"], h0["tpot_s"])
    assert h75["prefill_instances_per_decode"][0] < 0.3 * h0["prefill_instances_per_decode"][0]
    assert h75["output_tokens_per_s_per_gpu"][0] > h0["output_tokens_per_s_per_gpu"][0]
    held = (4 * 4000 - 4000) * 163_840 / 1e9  # GB: four whole prompts against one
    assert h75["con_prefill_memory"][0] - h0["con_prefill_memory"][0] == pytest.approx(held, rel=1e-9)


@pytest.mark.parametrize("bad", [1.0, -0.1, float("inf"), 1.5])
def test_a_share_outside_0_to_1_is_an_input_error(bad):
    with pytest.raises(InputError) as error:
        run(prefix_hit_frac=bad)
    assert error.value.column == "prefix_hit_frac"
    assert f"{bad:g}" in str(error.value) and "prefix_hit_frac" in str(error.value)


def test_a_blank_share_is_no_prefix_cache():
    """A blank (NaN) cell means 0, as every defaulted column's blank means its default."""
    np.testing.assert_array_equal(run(prefix_hit_frac=float("nan"))["ttft_s"], run(prefix_hit_frac=0.0)["ttft_s"])


def test_a_prefix_cache_is_unmeasured_ground():
    """No published serving run had a prefix cache: a design with one is marked interval_extrapolated. At the
    published runs' own shape (1,000 in / 1,000 out, concurrency 64; distance 0 octaves) only the cache does it."""
    row = {**ROW, "input_len": 1000, "output_len": 1000, "concurrency": 64}
    flags = [evaluate_serving({k: [v] for k, v in {**row, "prefix_hit_frac": h}.items()})["interval_extrapolated"][0]
             for h in (0.0, 0.5)]
    assert flags == [False, True]
