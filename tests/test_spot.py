"""Spot preemption (objectives/training/preemption.py, objectives/training/reliability.py): a preemptible spot row is also
preempted, n_nodes times as often as one node, each preemption costing a restart, the re-acquisition of the
capacity and the work since the last durable checkpoint; an AWS Capacity Block is reserved and changes only
the price. Hand-derived with Daly (2006) and checked against the catalog's measured figures."""

import math

import numpy as np
import pytest

import objectives
from objectives import catalog
from objectives.calibration import Calibration
from objectives.catalog.instances import PRICINGS, providers
from objectives.pipeline import DEFAULTS
from objectives.training.checkpoint import daly_interval_s
from objectives.training.reliability import Reliability

LOST = ("lost_ckpt_frac", "lost_rework_frac", "lost_restart_frac", "lost_preempt_frac", "lost_planned_frac")


def _cols(**over):
    """Reliability's inputs for 512 GPUs on 64 preemptible 8-GPU nodes, Llama 3 failure rate, no planned stops."""
    c = dict(n_gpus=512.0, instance_gpus=8.0, server_gpus=8.0, preemptible=1.0, gpu_mtbi_h=50677.0,
             gpu_planned_mtbi_h=np.inf, restart_fixed_s=600.0, ckpt_read_s=47.0, ckpt_interval_s=1000.0,
             ckpt_stall_s=10.0, ckpt_lag_s=30.0, time_to_train_ideal_days=60.0,
             spot_preempt_mtbi_h_per_node=500.0, spot_reacquire_s=1800.0)
    for end in ("_lo", "_hi"):
        c[f"spot_preempt_mtbi_h_per_node{end}"] = c["spot_preempt_mtbi_h_per_node"]
        c[f"spot_reacquire_s{end}"] = c["spot_reacquire_s"]
    c.update(over)
    return {k: np.atleast_1d(np.float64(v)) for k, v in c.items()} | {"feasible": np.array([True])}


def test_goodput_of_64_preemptible_nodes_by_hand():
    """Failures lf = 512 / (50,677 x 3,600) = 2.80645e-6 /s; preemptions lp = 64 nodes / (500 h x 3,600) =
    3.55556e-5 /s; M = 1 / (lf + lp) = 26,067.46 s. Restart 600 + 47 = 647 s, plus the 30 s write lag, plus
    the 1,800 s re-acquisition weighted by lp / (lf + lp) = 0.926845: R = 2,345.32 s. Daly, T = 1,000 s,
    delta = 10 s: E = M e^(R/M) (e^((T+delta)/M) - 1) = 26,067.46 x e^0.0899711 x (e^0.0387456 - 1) = 1,126.77 s,
    goodput = 1,000 / 1,126.77 = 0.887491."""
    out = Reliability()(_cols(), Calibration.load())
    m = 1.0 / (512 / (50677 * 3600) + 64 / (500 * 3600))
    assert m == pytest.approx(26067.46, abs=0.01)
    r = 677.0 + 1800.0 * (64 / (500 * 3600)) * m
    assert r == pytest.approx(2345.32, abs=0.01)
    assert out["goodput"][0] == pytest.approx(1000.0 / (m * math.exp(r / m) * math.expm1(1010.0 / m)), rel=1e-12)
    assert out["goodput"][0] == pytest.approx(0.887491, abs=1e-6)
    assert out["job_mtbp_h"][0] == pytest.approx(500.0 / 64)
    assert out["time_to_train_days"][0] == pytest.approx(60.0 / 0.887491, rel=1e-6)
    # the lost time, 0.112509, split by the first-order terms: preemptions (505 + 30 + 647 + 1,800) x lp
    # = 0.106027 of 0.119245 in all -> 0.100037; checkpoint stalls 10 / 1,010 -> 0.009342
    assert out["lost_preempt_frac"][0] == pytest.approx(0.100037, abs=1e-6)
    assert out["lost_ckpt_frac"][0] == pytest.approx(0.009342, abs=1e-6)
    np.testing.assert_allclose(out["goodput"] + sum(out[k] for k in LOST), 1.0, rtol=1e-12)


def test_the_catalogs_measured_rate_at_64_nodes():
    """The catalog's 5.76 node-hours per preemption (X21 X22) on 64 nodes: the job is preempted every
    5.76 / 64 h = 324 s, a twentieth of its own restart and re-acquisition (647 + 6,240 s): the goodput is a
    fraction of a percent, and most of the lost time is preemptions."""
    spot = {f: providers()["coreweave"][f] for f in catalog.SPOT_FIELDS}
    assert spot["spot_preempt_mtbi_h_per_node"] == 5.76 and spot["spot_reacquire_s"] == 6240.0
    out = Reliability()(_cols(**spot), Calibration.load())
    assert out["job_mtbp_h"][0] * 3600 == pytest.approx(324.0)
    assert out["goodput"][0] < 1e-3 < out["goodput_preempt_max"][0]
    assert out["lost_preempt_frac"][0] > 0.99
    assert out["goodput_preempt_min"][0] < out["goodput"][0] < out["goodput_preempt_max"][0]


def test_catalog_preemptible_rows():
    """Preemptible where the pricing is spot and the instance's spot is: GCP, Azure, CoreWeave; never an AWS
    Capacity Block; every such provider has the figures, its central value inside its range."""
    for iid, e in catalog.instances().items():
        kinds = dict(zip(PRICINGS, e["preemptible"]))
        assert kinds["on_demand"] == kinds["reserved_1y"] == kinds["reserved_3y"] == 0, iid
        assert kinds["spot"] == (e.get("spot_kind") == "spot"), iid
        if e.get("spot_kind") == "capacity_block":
            assert e["provider"] == "aws" and kinds["spot"] == 0
        if kinds["spot"]:
            assert e["provider"] in ("gcp", "azure", "coreweave"), iid
            for name in ("spot_preempt_mtbi_h_per_node", "spot_reacquire_s"):
                assert 0 < e[f"{name}_lo"] <= e[name] <= e[f"{name}_hi"] < np.inf, (iid, name)


def _design(instance, pricing, n, **extra):
    base = dict(model="llama3.1-405b", instance=instance, pricing=pricing, n_gpus=n, global_batch=n // 8,
                seq_len=8192, tp=8, pp=16, micro_batch=1, train_tokens=15e12, ckpt_mode="async")
    base.update(extra)
    return objectives.evaluate(base)


def test_a_capacity_block_is_on_demand_physics_at_its_own_price():
    """AWS p5 Capacity Block (spot_kind capacity_block): reserved, not preempted, so every time, goodput and
    checkpoint figure is the on-demand row's; the compute bill is in the price ratio 4.916 / 6.88."""
    od, cb = _design("aws-p5.48xlarge", "on_demand", 2048), _design("aws-p5.48xlarge", "spot", 2048)
    assert cb["preemptible"][0] == 0 and cb["lost_preempt_frac"][0] == 0 and cb["job_mtbp_h"][0] == np.inf
    for name in ("step_time_s", "ckpt_interval_s", "storage_units", "goodput", "goodput_preempt_min",
                 "goodput_preempt_max", "time_to_train_days", "time_to_train_days_lo", "time_to_train_days_hi",
                 "n_interruptions"):
        assert cb[name][0] == od[name][0], name
    assert cb["run_cost_compute_usd"][0] / od["run_cost_compute_usd"][0] == pytest.approx(4.916 / 6.88, rel=1e-12)


def test_preemptible_spot_never_trains_faster_than_on_demand():
    """The same CoreWeave H100 design at spot and on demand. From 64 GPUs up (8 nodes preempted every
    5.76 / 8 = 0.72 h, each costing ~1.9 h back) the spot job is preempted faster than it recovers: infeasible
    (con_preempt > 0), its goodput under half the on-demand row's, no time to train (NaN) and no cost; its
    checkpoint interval is shorter (Daly at the combined M) and its goodput's range wide. On one node and on two
    (Llama 3 8B) it trains, never faster than on demand, with a wider 80% interval."""
    for n in (512, 2048, 16384):
        od, sp = _design("coreweave-hgx-h100", "on_demand", n), _design("coreweave-hgx-h100", "spot", n)
        assert sp["preemptible"][0] == 1 and od["preemptible"][0] == 0
        assert sp["con_preempt"][0] > 0 > od["con_preempt"][0] and not sp["feasible"][0], n
        assert sp["goodput"][0] < 0.5 * od["goodput"][0], n
        assert np.isnan(sp["time_to_train_days"][0]) and np.isnan(sp["run_cost_usd"][0]), n
        assert sp["ckpt_interval_s"][0] < od["ckpt_interval_s"][0], n
        assert sp["step_time_s"][0] == od["step_time_s"][0]  # preemption is no part of the step
        spread_sp, spread_od = (r["goodput_preempt_max"][0] / r["goodput_preempt_min"][0] for r in (sp, od))
        assert spread_sp > 1.0 == spread_od, n
        lost = sum(sp[k] for k in LOST)
        np.testing.assert_allclose(sp["goodput"] + lost, 1.0, rtol=1e-9)
    for n in (8, 16):
        small = dict(model="llama3-8b", global_batch=16, tp=1, pp=1, zero_stage=3, train_tokens=1e12)
        small_od = _design("coreweave-hgx-h100", "on_demand", n, **small)
        small_sp = _design("coreweave-hgx-h100", "spot", n, **small)
        assert small_sp["feasible"][0] and small_sp["con_preempt"][0] < 0, n
        assert small_sp["time_to_train_days"][0] >= small_od["time_to_train_days"][0], n
        spread_sp = small_sp["time_to_train_days_hi"][0] / small_sp["time_to_train_days_lo"][0]
        spread_od = small_od["time_to_train_days_hi"][0] / small_od["time_to_train_days_lo"][0]
        assert spread_sp > spread_od, n


def test_a_spot_job_preempted_faster_than_it_recovers_is_infeasible():
    """con_preempt = lp (R + lag + D) - 1, the preemptions expected during one recovery, minus 1. CoreWeave's
    5.76 node-hours per preemption and 6,240 s to re-acquire (X21 X22), restart 600 + 47 s: on 3 nodes
    lp = 3 / (5.76 x 3,600) = 1 / 6,912 s; with a 30 s lag x = 6,917 / 6,912 = 1.000723 (infeasible, no time
    to train); with no lag 6,887 / 6,912 = 0.996383 (feasible: its goodput below e^-x = 0.3693); on 2 nodes
    6,917 / 10,368 = 0.667149; not preemptible, -1."""
    spot = {f: providers()["coreweave"][f] for f in catalog.SPOT_FIELDS}
    assert spot["spot_preempt_mtbi_h_per_node"] == 5.76 and spot["spot_reacquire_s"] == 6240.0
    cal = Calibration.load()
    stuck = Reliability()(_cols(n_gpus=24.0, **spot), cal)
    assert stuck["con_preempt"][0] == pytest.approx(6917 / 6912 - 1, rel=1e-9)
    assert stuck["con_preempt"][0] == pytest.approx(7.234e-4, abs=1e-7)
    assert not stuck["feasible"][0] and np.isnan(stuck["time_to_train_days"][0])
    assert np.isnan(stuck["n_interruptions"][0]) and 0 < stuck["goodput"][0] < math.exp(-1.000723)
    whole = Reliability()(_cols(n_gpus=24.0, ckpt_lag_s=0.0, **spot), cal)
    assert whole["con_preempt"][0] == pytest.approx(0.996383 - 1, abs=1e-6) and whole["feasible"][0]
    assert whole["goodput"][0] < math.exp(-0.996383)
    assert whole["time_to_train_days"][0] == pytest.approx(60.0 / whole["goodput"][0], rel=1e-12)
    two = Reliability()(_cols(n_gpus=16.0, **spot), cal)
    assert two["con_preempt"][0] == pytest.approx(6917 / 10368 - 1, rel=1e-9) and two["feasible"][0]
    owned = Reliability()(_cols(preemptible=0.0), cal)
    assert owned["con_preempt"][0] == -1.0 and owned["feasible"][0]


def test_the_reason_names_the_preemption_and_the_recovery():
    """4 CoreWeave H100 nodes at spot: the job is preempted every 5.76 h / 4 = 86.4 min, sooner than the
    6,240 s (104 min) re-acquisition plus the restart and the lag's rework (about 10 min): the reason says so,
    and the row has no time to train and no run cost."""
    out = _design("coreweave-hgx-h100", "spot", 32, model="llama3-8b", global_batch=32, tp=1, pp=1, zero_stage=3,
                  train_tokens=1e12)
    assert out["job_mtbp_h"][0] * 60 == pytest.approx(86.4)
    recover = out["restart_s"][0] + out["ckpt_lag_s"][0]
    assert 570 <= recover < 630 and round((6240 + recover) / 60) == 114
    assert out["infeasible_reason"][0] == (
        "spot: 4 nodes, the job preempted every 86 min on average, sooner than the 114 min it takes to recover "
        "(re-acquire 104 min, restart and rework 10 min): most recoveries are cut short")
    assert np.isnan(out["time_to_train_days"][0]) and np.isnan(out["run_cost_usd"][0])


def test_the_checkpoint_interval_answers_the_preemption_rate():
    """A spot row's Young/Daly interval is taken at M = 1 / (failures + preemptions): 2,048 GPUs on 256 nodes
    at 2,000 node-hours per preemption (a what-if) are preempted every 7.8 h, failures every 24.7 h."""
    out = _design("coreweave-hgx-h100", "spot", 2048, spot_preempt_mtbi_h_per_node=2000.0)
    m = 1.0 / (2048 / (50677.0 * 3600) + 256 / (2000.0 * 3600))
    assert out["ckpt_interval_s"][0] == pytest.approx(
        max(daly_interval_s(out["ckpt_stall_s"][0], m), 3 * out["ckpt_write_s"][0]), rel=1e-9)


def test_a_tables_preemption_figure_acts_on_preemptible_rows_only():
    """A space that sets spot_preempt_mtbi_h_per_node (without its ends: a point, the range collapses) changes
    the spot row, not the on-demand one; at a billion node-hours the spot row trains as on demand."""
    od = _design("coreweave-hgx-h100", "on_demand", 2048)
    od_set = _design("coreweave-hgx-h100", "on_demand", 2048, spot_preempt_mtbi_h_per_node=1.0)
    assert od_set["time_to_train_days"][0] == od["time_to_train_days"][0]
    calm = _design("coreweave-hgx-h100", "spot", 2048, spot_preempt_mtbi_h_per_node=1e9)
    assert calm["goodput_preempt_min"][0] == pytest.approx(calm["goodput_preempt_max"][0], rel=1e-6)
    assert calm["time_to_train_days"][0] == pytest.approx(od["time_to_train_days"][0], rel=1e-4)
    assert DEFAULTS["preemptible"] == 0 and DEFAULTS["spot_preempt_mtbi_h_per_node"] == np.inf
