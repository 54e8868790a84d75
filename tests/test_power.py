"""Power at training load (objectives/economics/power.py), checked by hand on a 1,024-H100 cluster."""

import numpy as np
import pytest

import objectives
from objectives.calibration import Calibration
from objectives.economics.power import Power

# 1,024 H100 on 400G InfiniBand (k = 64, 1:1): 2 tiers, 32 leaf + 16 spine = 48 switches, 2,048 cables.
DESIGN = dict(model="llama3-70b", gpu="h100-sxm", n_gpus=1024, global_batch=1024, seq_len=8192, tp=8, pp=4,
              micro_batch=1, train_tokens=15e12, network="ib-ndr-400", storage="pfs-large")


def test_power_of_1024_h100():
    out = objectives.evaluate(DESIGN)
    # GPUs: 1,024 x 700 W x 0.75 (average training load, S72) = 537,600 W
    assert out["power_gpu_mw"][0] == pytest.approx(0.5376)
    # rest of the servers: DGX H100 10.2 kW / 8 = 1,275 W per GPU; (1,275 - 700) x 1,024 x 0.75 = 441,600 W
    assert out["power_host_mw"][0] == pytest.approx(0.4416)
    # fabric: 48 switches x 800 W = 38,400 W; switch-side optics (1,024 + 2 x 1,024) x 8.5 W = 26,112 W
    assert out["power_network_mw"][0] == pytest.approx(0.064512)
    # storage: one pfs-large unit (2 x 0.99 TB checkpoints + 60 TB dataset < 500 TB) = 2,800 W
    assert out["power_storage_mw"][0] == pytest.approx(0.0028)
    # IT 1,046,512 W; facility x PUE 1.25 = 1,308,140 W
    assert out["power_it_mw"][0] == pytest.approx(1.046512)
    assert out["power_mw"][0] == pytest.approx(1.30814)
    assert out["power_overhead_mw"][0] == pytest.approx(0.261628)
    parts = sum(out[k] for k in ("power_gpu_mw", "power_host_mw", "power_network_mw", "power_storage_mw",
                                 "power_overhead_mw"))
    np.testing.assert_allclose(parts, out["power_mw"], rtol=1e-12)
    # the facility is built for the maximum: 1,024 x 1,275 + 38,400 + 26,112 + 2,800 = 1,372,912 W
    assert out["power_it_peak_mw"][0] == pytest.approx(1.372912)
    # ... and its peak with cooling and distribution, x PUE 1.25 = 1,716,140 W: what a site limit bounds
    assert out["facility_power_peak_mw"][0] == pytest.approx(1.71614)
    assert out["energy_mwh"][0] == pytest.approx(out["power_mw"][0] * out["time_to_train_days"][0] * 24)


def test_server_power_falls_back_to_tdp_ratio():
    cols = {k: np.array([v]) for k, v in dict(
        n_gpus=8.0, n_gpus_billed=8.0, gpu_tdp_w=1000.0, server_w_per_gpu=np.nan, server_to_gpu_tdp=1.8, power_load_frac=1.0,
        pue=1.0, net_power_w=0.0, storage_power_w=0.0, time_to_train_days=1.0).items()}
    out = Power()(cols, Calibration.load())
    # no server figure: 1.8 x 1,000 W (S72) per GPU, 8 GPUs at full load = 14.4 kW
    assert out["power_it_mw"][0] == pytest.approx(0.0144)
    assert out["power_host_mw"][0] == pytest.approx(0.0064)


def test_space_overrides_the_assumptions():
    out = objectives.evaluate({**DESIGN, "pue": 1.1, "power_load_frac": 0.9})
    assert out["power_gpu_mw"][0] == pytest.approx(1024 * 700 * 0.9 / 1e6)
    assert out["power_mw"][0] == pytest.approx(1.1 * out["power_it_mw"][0])
