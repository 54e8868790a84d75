"""FP4 against FP8 on Blackwell in the serving model (objectives/serving/step.py; docs/serving.md, "FP4
against FP8 on Blackwell").

Compute-bound, by hand. A GEMM's seconds per token are 2 x (its weights / the width's fill) / rate, the same
weights and widths in fp8 and fp4, so the ratio of a large prefill chunk's GEMM time, fp4 over fp8, is the
ratio of the rates, rate8 / rate4 (gpus.yaml B200):

    rate8 = 4,500 TFLOP/s x 0.763 (FP8 MAMF) x s8 = 3,433.5 x s8 TFLOP/s
    rate4 = 9,000 TFLOP/s x 0.736 (NVFP4 MAMF) x s4 = 6,624 x s4 TFLOP/s

- at ``gemm_eff_scale`` 1 for both: 3,433.5 / 6,624 = 0.51834 (the measured MAMF ratio);
- at s8 = 0.9, s4 = 0.47: (3,433.5 x 0.9) / (6,624 x 0.47) = 3,090.15 / 3,113.28 = 0.99257;
- at s8 = 1.0, s4 = 0.3: 6,624 x 0.3 = 1,987.2 TFLOP/s is below fp8's 3,433.5, and a lower precision never runs
  slower than the next higher one: the ratio is 1.

The weights read per step are 0.5625 / 1 bytes per value (NVFP4: 4 bits and an E4M3 scale per 16 values,
objectives/serving/memory.py), whatever the scales.
"""

import numpy as np
import pytest

from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving.evaluate import run_serving
from objectives.serving.prepare import prepare_serving
from objectives.serving.step import step_design

ROW = {"model": "llama3.3-70b", "gpu": "b200", "n_gpus": 1, "tp": 1, "kv_precision": "fp8", "engine": "trtllm",
       "input_len": 8192, "output_len": 1024, "concurrency": 64}


def _table(**columns):
    table = {k: v if np.ndim(v) else [v] for k, v in {**ROW, **columns}.items()}
    n = max(len(v) for v in table.values())
    return {k: list(v) * n if len(v) == 1 else list(v) for k, v in table.items()}


def _gemm_seconds_per_token(cal):
    """The dense GEMMs' seconds per prefill token and the weights' seconds per step, fp8 and fp4 rows."""
    _, floats = prepare_serving(_table(precision=["fp8", "fp4"]))
    design = step_design(run_serving(floats, cal), cal)
    return np.asarray(design["dense_flop"]), np.asarray(design["dense_mem"])


@pytest.mark.parametrize(("scales", "ratio"), [((1.0, 1.0, 1.0), 3433.5 / 6624.0),
                                               ((1.0, 0.9, 0.47), 3433.5 * 0.9 / (6624.0 * 0.47)),
                                               ((1.0, 1.0, 0.3), 1.0)])
def test_compute_bound_fp4_over_fp8_step_time_is_the_rates_ratio(scales, ratio):
    flop, mem = _gemm_seconds_per_token(ServingCalibration(gemm_eff_scale=scales))
    assert flop[1] / flop[0] == pytest.approx(ratio, rel=1e-9)
    assert mem[1] / mem[0] == pytest.approx(0.5625, rel=1e-12)
    assert ratio == pytest.approx({1.0: 0.51834, 0.47: 0.99257, 0.3: 1.0}[scales[2]], abs=5e-6)


def test_fitted_calibration_puts_fp4_gemms_at_about_the_fp8_rate():
    """The fitted scales (docs/serving.md): 6,624 x s4 against 3,433.5 x s8, within 2% of each other."""
    cal = ServingCalibration.load()
    flop, _ = _gemm_seconds_per_token(cal)
    s8, s4 = cal.gemm_eff_scale[1], cal.gemm_eff_scale[2]
    assert flop[1] / flop[0] == pytest.approx(min(3433.5 * s8 / (6624.0 * s4), 1.0), rel=1e-9)
    assert 0.98 <= flop[1] / flop[0] <= 1.0


def test_a_space_choosing_fp8_or_fp4_on_b200_sees_a_difference():
    """Rows differing only in precision (as a space's ``precision: [fp8, fp4]`` makes them): fp4 holds half the
    weights' bytes (more KV, more requests in flight), decodes faster where the weights' stream paces the step
    and, at the measured rates (scales 1), prefills faster; each difference in the direction of the physics."""
    cal = ServingCalibration(gemm_eff_scale=(1.0, 1.0, 1.0), host_step_s=(0.0,) * 4, host_request_s=(0.0,) * 4)
    conc = [1, 8, 32, 64]
    out = evaluate_serving(_table(precision=["fp8"] * 4 + ["fp4"] * 4, concurrency=conc * 2), cal=cal)
    tokens = np.asarray(out["output_tokens_per_s_per_gpu"]).reshape(2, 4)
    assert np.asarray(out["feasible"]).all()
    assert (tokens[1] > tokens[0] * 1.05).all(), tokens
    weights = np.asarray(out["weights_gb"]).reshape(2, 4)[:, 0]
    # 68,451,041,280 GEMM weights at 1 / 0.5625 bytes, the embeddings and output layer (2 x 128,256 x 8,192) in
    # bf16 either way: (38.504 + 4.203) / (68.451 + 4.203) GB = 0.5878
    gemm, embed = 68_451_041_280, 2 * 2 * 128_256 * 8_192
    assert weights[1] / weights[0] == pytest.approx((0.5625 * gemm + embed) / (gemm + embed), rel=1e-3)
    assert np.asarray(out["max_concurrency"]).reshape(2, 4)[1, 0] > np.asarray(out["max_concurrency"]).reshape(2, 4)[0, 0]
    # one request in flight: the decode step is the weights' stream, fp4 about 0.56 of fp8's
    decode = np.asarray(out["step_time_decode_s"]).reshape(2, 4)[:, 0]
    assert 0.5 < decode[1] / decode[0] < 0.7
    # the prefill-heavy mixed step at the measured rates: fp4 faster
    mixed = np.asarray(out["step_time_mixed_s"]).reshape(2, 4)[:, 3]
    assert mixed[1] < mixed[0]
