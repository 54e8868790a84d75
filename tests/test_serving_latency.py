"""A latency-tuned deployment (``latency_tuned``, objectives/serving/latency.py): batch-1 TPOT from bytes,
bandwidth and the latency-tuned step, derived by hand; no gain above the CUDA-graph max batch."""

import numpy as np
import pytest

from objectives.serving.engines import ServingCalibration
from objectives.serving.evaluate import evaluate_serving
from objectives.serving.latency import LATENCY_ALLREDUCE_S, LATENCY_KERNEL_S

ROW = dict(model="llama3.3-70b", gpu="b200", n_gpus=8, tp=8, precision="fp8", kv_precision="fp8", input_len=1000,
           output_len=1000, engine="trtllm")


def _eval(**over):
    row = {**ROW, **over}
    return evaluate_serving({k: [v] for k, v in row.items()})


def test_batch1_tpot_by_hand():
    """Llama-3.3-70B fp8 on 8 B200 (tp 8), one request, latency-tuned. Per GPU a decode step reads
    80 layers x (150,994,944 attention + 704,643,072 feed-forward parameters) / 8 x 1 byte = 8.556 GB at
    8.0 TB/s x hbm_eff (0.853: 6.83 TB/s) = 1.254 ms; 2 all-reduces a layer at 10 us = 1.600 ms; 80 layers x 9
    kernels x 3.4 us = 2.448 ms; the bf16 output layer 2 x 128,256 x 8,192 / 8 bytes = 0.263 GB, 0.038 ms;
    the KV read and the token's activations ~0.013 ms: 5.35 ms a decode step (187 tokens/s per user; the
    offline step, its 10.2 ms fitted host time a step, 10.2 ms). TPOT is the mean step: 1 in 1,000 steps carries
    the prompt."""
    cal = ServingCalibration.load()
    weights = 80 * (150_994_944 + 704_643_072) / 8 * 1.0
    bw = 8.0e12 * cal.hbm_eff
    by_hand = weights / bw + 2 * 80 * LATENCY_ALLREDUCE_S + 80 * 9 * LATENCY_KERNEL_S \
        + 2 * 128_256 * 8_192 / 8 / bw + 13e-6
    out = _eval(concurrency=1, latency_tuned=1)
    assert float(out["step_time_decode_s"][0]) == pytest.approx(by_hand, rel=0.005)
    assert float(out["tpot_s"][0]) == pytest.approx(by_hand, rel=0.01)
    offline = _eval(concurrency=1)
    assert float(offline["tpot_s"][0]) > 1.8 * float(out["tpot_s"][0])


def test_batch1_tpot_follows_hbm_bandwidth():
    """+10% HBM bandwidth takes the weights' time x 1/1.1 off a latency-tuned batch-1 step (1.254 ms -> 1.140
    ms: -0.114 ms), where the offline step, bound by its host time, gains nothing."""
    cal = ServingCalibration.load()
    weights_s = 80 * (150_994_944 + 704_643_072) / 8 / (8.0e12 * cal.hbm_eff)
    base, fast = (_eval(concurrency=1, latency_tuned=1, gpu_hbm_tbyte_s=bw) for bw in (8.0, 8.8))
    gain = float(base["step_time_decode_s"][0]) - float(fast["step_time_decode_s"][0])
    assert gain == pytest.approx(weights_s * (1 - 1 / 1.1), rel=0.05)
    off_base, off_fast = (_eval(concurrency=1, gpu_hbm_tbyte_s=bw) for bw in (8.0, 8.8))
    assert float(off_base["step_time_decode_s"][0]) == pytest.approx(float(off_fast["step_time_decode_s"][0]), rel=1e-3)


def test_no_gain_above_graph_batch():
    """Above the CUDA-graph max batch (8 a group) a latency-tuned row runs the offline step: no free throughput."""
    tuned, offline = _eval(concurrency=64, latency_tuned=1), _eval(concurrency=64)
    assert np.allclose(tuned["output_tokens_per_s_per_gpu"], offline["output_tokens_per_s_per_gpu"])
    small, small_off = _eval(concurrency=4, latency_tuned=1), _eval(concurrency=4)
    assert float(small["tpot_s"][0]) < float(small_off["tpot_s"][0])


def test_bad_value_is_an_input_error():
    from objectives.table import InputError

    with pytest.raises(InputError, match="latency_tuned"):
        _eval(concurrency=1, latency_tuned=2)


def test_a_latency_tuned_instance_batches_at_most_its_graphs():
    """The min-latency configuration captures CUDA graphs up to batch 8 and runs no larger batch: a latency-tuned
    Llama 3.3 70B on 8 B200 (tp 8, one attention group) holds 8 requests in flight, where the same instance
    offline holds what its KV cache fits (hundreds); 256 requests given to it are infeasible with the reason
    (the step model would otherwise price them as one batch), and so are 256 given to an engine whose
    max_batch_size is 8."""
    tuned, offline = _eval(latency_tuned=1), _eval(latency_tuned=0)
    assert tuned["max_concurrency"][0] == 8.0 and offline["max_concurrency"][0] > 256.0
    for over in (dict(latency_tuned=1, concurrency=256), dict(max_batch_size=8, concurrency=256)):
        out = _eval(**over)
        assert not out["feasible"][0] and out["con_concurrency"][0] == 248.0
        assert out["infeasible_reason"][0].startswith("batch: concurrency 256 above the engine's 8 batched")
    assert _eval(latency_tuned=1, concurrency=8)["feasible"][0]
