"""Failures and goodput (objectives/training/reliability.py), checked by hand against the Llama 3 figures and
Young/Daly."""

import math

import numpy as np
import pytest
from conftest import evaluate_405b

from objectives.calibration import Calibration
from objectives.catalog import SPOT_FIELDS
from objectives.pipeline import DEFAULTS
from objectives.training.checkpoint import daly_interval_s, young_interval_s
from objectives.training.reliability import Reliability, daly_goodput

_eval = evaluate_405b


def test_llama3_interruption_interval():
    out = _eval()
    # 16,384 x 54 d x 24 h = 21,233,664 GPU-hours; 419 unexpected -> 50,677 GPU-h each; 47 planned -> 451,780
    # job: 1 / (16,384/50,677 + 16,384/451,780) = 54 x 24 / 466 = 2.781 h (the report's ~2.8 h)
    assert out["job_mtti_h"][0] == pytest.approx(54 * 24 / 466, rel=1e-5)
    assert out["job_mtti_h"][0] == pytest.approx(2.781, abs=1e-3)
    # unexpected only: 50,677 / 16,384 = 3.093 h (the M of Young/Daly)
    assert out["job_mtbf_h"][0] == pytest.approx(54 * 24 / 419, rel=1e-5)
    # the rate grows with GPU count: half the GPUs, twice the interval
    half = _eval(n_gpus=8192, global_batch=1024)
    assert half["job_mtti_h"][0] == pytest.approx(2 * out["job_mtti_h"][0])


def test_young_and_daly_interval():
    # M = 2.8 h = 10,080 s, delta = 30 s (hardware-catalog 5.3 worked example)
    # Young: sqrt(2 x 30 x 10,080) = sqrt(604,800) = 777.69 s (~13 min)
    assert young_interval_s(30.0, 10080.0) == pytest.approx(777.689, abs=1e-3)
    # Daly: x = 30 / 20,160 = 0.0014881, sqrt(x) = 0.038576;
    # 777.689 x (1 + 0.038576/3 + 0.0014881/9) - 30 = 777.689 x 1.0130240 - 30 = 757.82 s
    assert daly_interval_s(30.0, 10080.0) == pytest.approx(757.817, abs=1e-3)
    # delta >= 2M: checkpoint every M
    assert daly_interval_s(5000.0, 2000.0) == 2000.0


def test_daly_goodput():
    # M = 10,000 s, delta = 100 s, R = 600 s, T = 1,000 s:
    # E = 10,000 x e^0.06 x (e^0.11 - 1) = 10,000 x 1.0618365 x 0.1162781 = 1,234.68 s; goodput 1,000/1,234.68
    assert daly_goodput(1000.0, 100.0, 600.0, 10000.0) == pytest.approx(0.809924, abs=1e-6)
    # no failures in sight: only the checkpoint stall is lost, T / (T + delta)
    assert daly_goodput(1000.0, 100.0, 600.0, 1e12) == pytest.approx(1000 / 1100, rel=1e-6)


def _cols(**over):
    """Reliability's inputs for one 16,384-GPU row, Llama 3 rates, no planned stops unless set."""
    m = 50677.0 * 3600 / 16384
    c = dict(n_gpus=16384.0, gpu_mtbi_h=50677.0, gpu_planned_mtbi_h=np.inf, restart_fixed_s=600.0,
             ckpt_interval_s=daly_interval_s(75.0, m), ckpt_stall_s=75.0, ckpt_lag_s=0.0, ckpt_read_s=47.0,
             time_to_train_ideal_days=60.0, instance_gpus=8.0, server_gpus=8.0,
             **{k: DEFAULTS[k] for k in ("preemptible", *SPOT_FIELDS)})  # not preemptible (tests/test_spot.py)
    c.update(over)
    return {k: np.atleast_1d(np.float64(v)) for k, v in c.items()} | {"feasible": np.array([True])}


def test_goodput_and_time_to_train():
    out = Reliability()(_cols(), Calibration.load())
    m = 50677.0 * 3600 / 16384  # 11,135 s
    # sqrt(2 x 75 x 11,135) = 1,292.39 s; x 1.019718 (sqrt(x) = 0.058032) - 75 = 1,242.87 s (the interval given)
    t = daly_interval_s(75.0, m)
    assert t == pytest.approx(1242.87, abs=0.01)
    assert out["restart_s"][0] == 647.0
    g = t / (m * math.exp(647.0 / m) * math.expm1((t + 75.0) / m))
    assert out["goodput"][0] == pytest.approx(g)
    assert 0.8 < g < 0.9
    assert out["time_to_train_days"][0] == pytest.approx(60.0 / g)
    lost = out["lost_ckpt_frac"] + out["lost_rework_frac"] + out["lost_restart_frac"] + out["lost_planned_frac"]
    np.testing.assert_allclose(out["goodput"] + lost, 1.0, rtol=1e-12)
    assert out["lost_planned_frac"][0] == 0 and out["lost_preempt_frac"][0] == 0


def test_planned_stops_and_async_lag():
    plain = Reliability()(_cols(), Calibration.load())
    planned = Reliability()(_cols(gpu_planned_mtbi_h=451780.0), Calibration.load())
    # planned stops every M_p = 451,780 x 3,600 / 16,384 = 99,267 s cost R + delta = 722 s each
    mp = 451780.0 * 3600 / 16384
    assert planned["goodput"][0] == pytest.approx(plain["goodput"][0] * mp / (mp + 647.0 + 75.0))
    # asynchronous: a 6 s stall, every 362 s (objectives.training.checkpoint), but each failure also loses the 75 s
    # write lag; still far better than stalling 75 s
    asyn = Reliability()(_cols(ckpt_stall_s=6.0, ckpt_lag_s=75.0, ckpt_interval_s=362.0), Calibration.load())
    m = 50677.0 * 3600 / 16384
    assert asyn["goodput"][0] == pytest.approx(362.0 / (m * math.exp(722.0 / m) * math.expm1(368.0 / m)))
    assert asyn["goodput"][0] > plain["goodput"][0]


def test_whole_pipeline_llama3_goodput_is_plausible():
    sync = _eval()
    asyn = _eval(ckpt_mode="async")
    # Llama 3 reports > 90% effective training time with asynchronous, multi-level checkpoints
    assert 0.75 < sync["goodput"][0] < asyn["goodput"][0] < 0.97
    assert asyn["time_to_train_days"][0] == pytest.approx(asyn["time_to_train_ideal_days"][0] / asyn["goodput"][0])
    # bigger jobs fail more often: goodput falls with GPU count
    sizes = _eval(n_gpus=np.array([2048.0, 8192.0, 32768.0]), global_batch=np.array([2048.0, 2048.0, 4096.0]))
    assert np.all(np.diff(sizes["goodput"]) < 0)
