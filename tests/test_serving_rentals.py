"""Serving deployments on rented instances fill the whole instances they pay for (issue 23, "rentals as
sold"; objectives/serving/rentals.py).

A cloud bills whole instances: CoreWeave's HGX B200 instance (``coreweave-hgx-b200``) is 8 B200s at $8.60 per
GPU-hour on demand (instances.yaml, C23), $68.80 an hour whatever runs on it. A rented row that leaves
``replicas`` blank runs as many instances of the model as fit in the instances it pays for; one that fixes
them keeps them, and ``billed_idle_gpus`` says how many GPUs it pays for and leaves idle. Each deployment
below runs at a fixed concurrency, so that one model instance's throughput is the same in every row and the
figures compare by hand.
"""

import numpy as np
import pytest

from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving.rentals import fill_instances

#: a calibration with round numbers (as tests/test_serving_model.py): HBM at 80%, GEMMs at the catalog's rate
ROUND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                           expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(0.0,) * 4,
                           host_request_s=(0.0,) * 4)
RENTED = {"instance": "coreweave-hgx-b200", "model": "llama3.3-70b", "precision": "fp8", "kv_precision": "fp8",
          "engine": "trtllm", "n_gpus": 1, "tp": 1, "input_len": 1000, "output_len": 1000, "concurrency": 64}
PRICE = 8.60  # USD per B200-hour, coreweave-hgx-b200 on demand


def rows(*changes: dict) -> dict:
    """One output row per change of RENTED (a value None drops the column), evaluated at ROUND."""
    table = [{k: v for k, v in {**RENTED, **change}.items() if v is not None} for change in changes]
    names = list(dict.fromkeys(k for row in table for k in row))
    out = evaluate_serving({k: [row.get(k, np.nan) for row in table] for k in names}, cal=ROUND)
    return {k: np.asarray(v) for k, v in out.items()}


def test_a_one_gpu_deployment_fills_its_eight_gpu_instance():
    """Blank replicas on an 8-GPU instance: 8 replicas of the 1-GPU deployment. The bill is one instance,
    8 x $8.60 = $68.80 an hour, with replicas blank, 8 or 1; the tokens are 8 x, 8 x and 1 x one instance's
    T per second. So usd_per_mtok_out = 68.80 / (8 T x 3600) x 1e6 with replicas blank, exactly the
    ``replicas: 8`` figure, and 1/8 of the ``replicas: 1`` one (same bill, 8x the tokens)."""
    out = rows({}, {"replicas": 8}, {"replicas": 1})
    assert out["gpu"].tolist() == ["b200"] * 3 and out["feasible"].all()
    assert out["replicas_used"].tolist() == [8, 8, 1]
    np.testing.assert_allclose(out["usd_per_hr"], [8 * PRICE] * 3, rtol=1e-12)
    per_instance = out["output_tokens_per_s_instance"]
    np.testing.assert_allclose(per_instance, per_instance[0], rtol=1e-12)  # concurrency fixed: the same instance
    np.testing.assert_allclose(out["output_tokens_per_s"], per_instance * [8, 8, 1], rtol=1e-12)
    np.testing.assert_allclose(out["usd_per_mtok_out"][0], 8 * PRICE / (8 * per_instance[0] * 3600) * 1e6, rtol=1e-12)
    assert out["usd_per_mtok_out"][0] == pytest.approx(out["usd_per_mtok_out"][1], rel=1e-12)
    assert out["usd_per_mtok_out"][0] == pytest.approx(out["usd_per_mtok_out"][2] / 8, rel=1e-12)
    # filled, nothing idle; replicas: 1 pays for 8 GPUs and serves on 1: 7 idle
    assert out["deployment_gpus"].tolist() == [8, 8, 1] and out["billed_idle_gpus"].tolist() == [0, 0, 7]


def test_whole_instances_for_each_instance_size():
    """2-GPU instances of the model: 8 / 2 = 4 replicas. 16 GPUs (tp 2 x pp 8): one replica, two whole
    instances, $137.60 an hour. 3 GPUs (pp 3): one instance is billed, floor(8 / 3) = 2 replicas fit in it,
    6 GPUs serve and 2 idle."""
    out = rows({"n_gpus": 2, "tp": 2}, {"n_gpus": 16, "tp": 2, "pp": 8}, {"n_gpus": 3, "tp": 1, "pp": 3})
    assert out["replicas_used"].tolist() == [4, 1, 2]
    assert out["deployment_gpus"].tolist() == [8, 16, 6]
    assert out["billed_idle_gpus"].tolist() == [0, 0, 2]
    np.testing.assert_allclose(out["usd_per_hr"], [8 * PRICE, 16 * PRICE, 8 * PRICE], rtol=1e-12)


def test_a_rate_sized_rental_rounds_up_and_shares_the_rate():
    """Sized from a request rate: an owned B200 deployment gets k = ceil(rate / X) replicas (X: one
    instance's requests per second at the concurrency meeting the 50 ms TPOT target); rented, ceil(k / 8) x
    8, each replica taking rate / replicas. Unsaturated, both complete the offered rate; the rented one's
    replicas run at a lower concurrency, so they are no slower per user."""
    rate = 40.0
    common = {"concurrency": None, "request_rate_per_s": rate, "tpot_slo_s": 0.05}
    out = rows({**common}, {**common, "instance": None, "gpu": "b200"})
    owned = out["replicas_used"][1]
    assert 1 < owned < 8  # the test's premise: the rate needs a few B200s
    assert out["replicas_used"][0] == 8 * np.ceil(owned / 8)
    assert out["saturated"].tolist() == [0, 0]
    np.testing.assert_allclose(out["requests_per_s"], [rate, rate], rtol=1e-4)  # the bisection's tolerance
    assert out["concurrency"][0] < out["concurrency"][1] and out["tpot_s"][0] <= out["tpot_s"][1]


def test_owned_and_per_gpu_cloud_rows_are_unchanged():
    """An owned row and a cloud row that names no instance (priced per GPU-hour, gpus.yaml) keep one
    replica and pay for their one GPU: nothing is rounded and nothing idles."""
    out = rows({"instance": None, "gpu": "b200"}, {"instance": None, "gpu": "b200", "cost_mode": "cloud"})
    assert out["replicas_used"].tolist() == [1, 1] and out["deployment_gpus"].tolist() == [1, 1]
    assert out["billed_idle_gpus"].tolist() == [0, 0]
    assert out["usd_per_hr"][1] == pytest.approx(out["cloud_usd_per_gpu_hr"][1], rel=1e-12)


def test_disaggregated_rentals_round_the_decode_and_prefill_total():
    """A 2-GPU decode instance with 1-GPU prefill instances, ratio r prefill instances per decode instance
    (0 < r < 1 here): k decode instances need ceil(k r) prefill GPUs, and k grows while 2k + ceil(k r) fits
    the one 8-GPU instance that a single replica (2 + 1 GPUs) is billed for."""
    out = rows({"n_gpus": 2, "tp": 2, "serving": "disaggregated", "prefill_n_gpus": 1, "prefill_tp": 1,
                "concurrency": 256})
    r = out["prefill_instances_per_decode"][0]
    assert 0 < r < 1
    fits = [k for k in range(1, 9) if 2 * k + np.ceil(k * r - 1e-9) <= 8]
    assert out["replicas_used"][0] == max(fits)
    gpus = 2 * max(fits) + np.ceil(max(fits) * r - 1e-9)
    assert out["prefill_gpus"][0] == np.ceil(max(fits) * r - 1e-9)
    assert out["deployment_gpus"][0] == gpus and out["billed_idle_gpus"][0] == 8 - gpus
    assert out["usd_per_hr"][0] == pytest.approx(8 * PRICE, rel=1e-12)


@pytest.mark.parametrize("replicas, n, ratio, prefill, per, expected", [
    (1, 1, 0.0, 1, 8, 8),      # 8 x 1 GPU
    (1, 16, 0.0, 16, 8, 1),    # 16 GPUs: two whole instances, one replica
    (3, 1, 0.0, 1, 8, 8),      # sized at 3: one instance, 8 replicas
    (9, 1, 0.0, 1, 8, 16),     # sized at 9: two instances
    (1, 2, 0.25, 1, 8, 3),     # 3 x 2 decode + ceil(0.75) = 1 prefill = 7 <= 8; 4 x 2 + 1 = 9 > 8
    (1, 2, 0.5, 2, 8, 2),      # 2 x 2 + ceil(1) x 2 = 6; 3 x 2 + ceil(1.5) x 2 = 10 > 8
])
def test_fill_instances_by_hand(replicas, n, ratio, prefill, per, expected):
    got = fill_instances(np.array([float(replicas)]), np.array([float(n)]), np.array([ratio]), np.array([float(prefill)]),
                         np.array([float(per)]))
    assert got.tolist() == [expected]


def test_the_recommendation_says_the_idle_gpus():
    """The report's (and the terminal's) words for a design: the GPUs paid for and idle, and why."""
    import pandas as pd

    from dse.report.serving_buyer import profile

    out = rows({"replicas": 1}, {"n_gpus": 3, "tp": 1, "pp": 3}, {})
    said = [" ".join(profile(pd.Series({k: v[i] for k, v in out.items()}))) for i in range(3)]
    assert "7 of the GPUs its whole cloud instances bill for serve nothing (replicas fixed at 1; blank, they fill " \
           "the instances)" in said[0]
    assert "2 of the GPUs its whole cloud instances bill for serve nothing (instances of 3 GPUs do not fill 8-GPU " \
           "cloud instances)" in said[1]
    assert "serve nothing" not in said[2]
