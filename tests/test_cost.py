"""Cost of a design (objectives/economics/cost.py): its capex, its run's cost and its lifetime cost written out by hand,
owned and rented."""

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import objectives
from objectives import catalog
from objectives.calibration import Calibration
from objectives.economics.cost import Cost
from objectives.pipeline import DEFAULTS

CATALOG = Path(catalog.__file__).parent

# The 1,024-H100 cluster of test_power.py: 400G InfiniBand (48 switches, 2,048 cables), one pfs-large unit.
DESIGN = dict(model="llama3-70b", gpu="h100-sxm", n_gpus=1024, global_batch=1024, seq_len=8192, tp=8, pp=4,
              micro_batch=1, train_tokens=15e12, network="ib-ndr-400", storage="pfs-large")

# Its capital cost, by hand:
SERVERS = 1024 * 36_750                      # HGX H100 $310k / 8 - $2,000 NIC = $36,750 a GPU: 37,632,000
NETWORK = (48 * 43_000                       # switches 2,064,000
           + 2 * 2048 * 500 + 2048 * 100     # transceivers 2,048,000 + fibre 204,800
           + 1024 * 2_000)                   # NICs 2,048,000  -> 6,364,800
STORAGE = 250_000                            # one pfs-large unit
PEAK_MW = 1.372912                           # 1,024 x 1,275 W + 64,512 W fabric + 2,800 W storage
FACILITY = PEAK_MW * 10.7e6                  # $10.7M per MW: 14,690,158.40
POWER_MW = 1.30814                           # PUE 1.25 x 1,046,512 W at training load


def _cost_inputs(mode, days=30.0, need_tb=62.0, **given):
    c = dict(**given, cost_mode=mode,
             n_gpus=1024.0, n_gpus_billed=1024.0, train_tokens=1e12, time_to_train_days=days, server_usd_per_gpu=36_750.0,
             cloud_usd_per_gpu_hr=3.24, net_capex_usd=NETWORK, storage_capex_usd=STORAGE, storage_need_tb=need_tb,
             storage_cloud_usd_per_tb_month=210.0, power_mw=POWER_MW, power_it_peak_mw=PEAK_MW, storage_dataset_tb=0.0)
    c.update({k: DEFAULTS[k] for k in Cost.requires if k not in c})
    return {k: np.atleast_1d(np.float64(v)) for k, v in c.items()}


def test_pipeline_feeds_cost_the_hand_figures():
    out = objectives.evaluate(DESIGN)
    assert out["capex_servers_usd"][0] == SERVERS == 37_632_000
    assert out["net_capex_usd"][0] == NETWORK == 6_364_800
    assert out["storage_capex_usd"][0] == STORAGE
    assert out["power_it_peak_mw"][0] == pytest.approx(PEAK_MW)
    assert out["power_mw"][0] == pytest.approx(POWER_MW)
    # capex = 37,632,000 + 6,364,800 + 250,000 + 14,690,158.40 = 58,936,958.40
    assert out["capex_facility_usd"][0] == pytest.approx(FACILITY)
    assert out["capex_usd"][0] == pytest.approx(58_936_958.40)


def test_an_owned_nvl72_cluster_is_bought_in_whole_racks():
    """1,024 GB200 are 15 NVL72 racks (ceil(1024 / 72) = 15, 1,080 GPUs; gpus.yaml server_gpus 72): the capex
    and the facility's peak are the 15 racks' (1,080 x $41,056 = $44,340,480; 1,080 x 1,750 W of rack power
    before fabric and storage), the run's servers the 1,024 GPUs' share: 1,024 x $41,056 recovered at 10% over 5
    years (capital recovery factor 0.263797) plus 6% upkeep, a year per 0.8 of a year delivered. 1,024 H100 are
    128 whole HGX servers."""
    rack = objectives.evaluate({**DESIGN, "gpu": "gb200", "tp": 4, "pp": 4})
    assert rack["n_gpus_billed"][0] == 1080
    assert rack["capex_servers_usd"][0] == pytest.approx(1080 * 41_056)
    fabric_storage_w = (rack["net_power_w"][0] + rack["storage_power_w"][0])
    assert rack["power_it_peak_mw"][0] == pytest.approx((1080 * 1750 + fabric_storage_w) / 1e6)
    years = rack["time_to_train_days"][0] / 365.25
    assert rack["run_cost_compute_usd"][0] == pytest.approx(1024 * 41_056 * years * (0.263797 + 0.06) / 0.8, rel=2e-6)
    assert objectives.evaluate(DESIGN)["n_gpus_billed"][0] == 1024


def test_owned_run_cost_breakdown_by_hand():
    """Epoch's straight-line method (S24), reachable as cost_of_capital_frac 0 and utilization_frac 1: these are
    the figures of the releases before capital recovery, to the cent."""
    out = Cost()(_cost_inputs(mode=0, cost_of_capital_frac=0.0, utilization_frac=1.0), Calibration.load())
    years = 30 / 365.25  # 0.0821355
    # servers: 37,632,000 x 0.0821355 x (1/5 years + 6% upkeep) = 803,640.25
    assert out["run_cost_compute_usd"][0] == pytest.approx(SERVERS * years * (1 / 5 + 0.06)) == pytest.approx(803_640.25)
    # network: 6,364,800 x 0.0821355 x 0.26 = 135,921.81
    assert out["run_cost_network_usd"][0] == pytest.approx(135_921.81)
    # storage: 250,000 x 0.0821355 x 0.26 = 5,338.81
    assert out["run_cost_storage_usd"][0] == pytest.approx(5_338.81)
    # energy: 1.30814 MW x 1,000 x 720 h x $0.08 = 75,348.86
    assert out["run_cost_power_usd"][0] == pytest.approx(75_348.86)
    # facility: 14,690,158.40 x 0.0821355 / 14 years = 86,184.56
    assert out["run_cost_facility_usd"][0] == pytest.approx(86_184.56)
    # total 1,106,434.29; per million of 1e12 tokens: 1.1064; per GPU-hour: / (1,024 x 720) = 1.50070
    assert out["run_cost_usd"][0] == pytest.approx(1_106_434.29)
    assert out["tco_usd"][0] == out["run_cost_usd"][0]  # the old name, kept for a release
    assert out["usd_per_mtok"][0] == pytest.approx(1.10643429)
    assert out["usd_per_gpu_hr"][0] == pytest.approx(1.50070, abs=1e-5)  # hardware-catalog 4.5: break-even ~$1.65
    assert out["capex_usd"][0] == pytest.approx(58_936_958.40)
    # lifetime: the capex and 5 years at training load of upkeep, 6% of the hardware (37,632,000 + 6,364,800 +
    # 250,000 = 44,246,800: 2,654,808 a year), and energy, 1,308.14 kW x 8,766 h x $0.08 = 917,372.42 a year:
    # 58,936,958.40 + 5 x 3,572,180.42 = 76,797,860.50
    assert out["lifetime_cost_usd"][0] == pytest.approx(76_797_860.50, abs=0.01)


def test_owned_run_cost_recovers_capital_at_the_cost_of_capital():
    """The defaults (prices.yaml): 10% cost of capital, 80% utilization. Capital recovery factors, by hand:
    5 years at 10%: 0.1 x 1.1^5 / (1.1^5 - 1) = 0.161051 / 0.61051 = 0.263797; 14 years: 0.1 x 3.797498 / 2.797498
    = 0.135746. Over 30 days (0.0821355 years), each delivered year charged 1 / 0.8 of a calendar year:
    servers 37,632,000 x (0.263797 + 0.06) x 0.0821355 / 0.8 = 37,632,000 x 0.323797 x 0.102669 = 1,251,041.8;
    network 6,364,800 x 0.323797 x 0.102669 = 211,592.0; storage 250,000 x the same = 8,311.0; facility
    14,690,158.40 x 0.135746 x 0.102669 = 204,736.5; energy unchanged (the run's own), 75,348.86."""
    out = Cost()(_cost_inputs(mode=0), Calibration.load())
    scale = 30 / 365.25 / 0.8
    assert out["run_cost_compute_usd"][0] == pytest.approx(SERVERS * (0.263797 + 0.06) * scale, rel=2e-6)
    assert out["run_cost_compute_usd"][0] == pytest.approx(1_251_041.8, abs=0.5)
    assert out["run_cost_network_usd"][0] == pytest.approx(211_592.0, abs=0.5)
    assert out["run_cost_storage_usd"][0] == pytest.approx(8_311.0, abs=0.1)
    assert out["run_cost_facility_usd"][0] == pytest.approx(204_736.5, abs=0.5)
    assert out["run_cost_power_usd"][0] == pytest.approx(75_348.86)
    # per delivered GPU-hour, storage aside (a rental bills it apart): (1,251,041.8 + 211,592.0 + 204,736.5 +
    # 75,348.86) / (1,024 x 720 h) = 1,742,719.2 / 737,280 = $2.3637 (straight-line at full use: $1.4944)
    owned = (out["run_cost_usd"][0] - out["run_cost_storage_usd"][0]) / (1024 * 720)
    assert out["owned_usd_per_gpu_hr"][0] == pytest.approx(owned) == pytest.approx(2.3637, abs=1e-4)
    # a resale of 20% of the servers' price after 5 years at 10%: 0.2 / 1.1^5 = 0.124184 of the price less to recover
    resold = Cost()(_cost_inputs(mode=0, residual_value_frac=0.2), Calibration.load())
    assert resold["run_cost_compute_usd"][0] == pytest.approx(
        SERVERS * ((1 - 0.2 / 1.1 ** 5) * 0.263797 + 0.06) * scale, rel=2e-6)
    assert resold["run_cost_network_usd"][0] == out["run_cost_network_usd"][0]  # only the servers are resold


def test_an_nvl72_rack_costs_1_62_of_capital_per_delivered_gpu_hour():
    """A $3.1M GB200 NVL72 rack (S66: $43,056 a GPU) at 10% over 5 years and 80% utilization:
    43,056 x 0.263797 / (8,766 h x 0.8) = 11,357.92 / 7,012.8 = $1.6196 of capital per delivered GPU-hour."""
    from objectives.economics.capital import annual_capital_usd, capital_recovery_factor

    assert capital_recovery_factor(0.10, 5.0) == pytest.approx(0.263797, abs=1e-6)
    assert capital_recovery_factor(0.0, 5.0) == pytest.approx(0.2)  # straight line at no cost of capital
    assert annual_capital_usd(43_056.0, 0.10, 5.0) / (8_766 * 0.8) == pytest.approx(1.6196, abs=1e-4)


def test_breakeven_of_an_owned_hgx_h100_server_against_a_2_50_rental():
    """One HGX H100 server owned (8 x $36,750 servers, 8 x $2,000 NICs, 10.2 kW of peak at $10.7M/MW =
    $109,140 of facility; capex $419,140) against a $2.50 rental, at the defaults (10%, 80%). By hand, per
    GPU-hour at full use: capital and upkeep K = (310,000 x 0.263797 + 109,140 x 0.135746 + 0.06 x 310,000) /
    (8,766 h x 8) = 115,192.5 / 70,128 = $1.6426; energy E = 8 x 1,275 W x 0.75 x PUE 1.25 x $0.08/kWh / 8 =
    $0.0956. Owning wins above u* = K / (R - E) = 1.6426 / 2.4044 = 68.3% utilization. Payback at full use:
    $52,392.50 a GPU / ((2.50 - 0.0956 - upkeep 18,600 / 70,128 = 0.2652) x 8,766 h) = 2.794 years."""
    from objectives.economics.breakeven import Breakeven

    servers, nics, facility = 8 * 36_750.0, 8 * 2_000.0, 8 * 1_275 / 1e6 * 10.7e6
    it_w = 8 * 1_275 * 0.75
    c = _cost_inputs(mode=0, days=30.0, need_tb=0.0)
    c.update({k: np.atleast_1d(np.float64(v)) for k, v in dict(
        n_gpus=8, n_gpus_billed=8, net_capex_usd=nics, storage_capex_usd=0.0, power_mw=1.25 * it_w / 1e6,
        power_it_peak_mw=8 * 1_275 / 1e6, facility_usd_per_mw=10.7e6).items()})
    cost = Cost()(c, Calibration.load())
    assert cost["capex_usd"][0] == pytest.approx(servers + nics + facility) == pytest.approx(419_140.0)
    c.update(cost)
    c["rental_usd_per_gpu_hr"] = np.atleast_1d(2.50)
    out = Breakeven()(c, Calibration.load())
    assert out["breakeven_utilization_frac"][0] == pytest.approx(0.6832, abs=1e-4)
    assert out["breakeven_years"][0] == pytest.approx(2.794, abs=1e-3)
    # a rental below the energy alone: owning never pays
    c["rental_usd_per_gpu_hr"] = np.atleast_1d(0.05)
    assert np.isinf(Breakeven()(c, Calibration.load())["breakeven_utilization_frac"][0])


def test_fractions_of_the_owning_cost_are_checked_where_they_enter():
    for name, bad in (("utilization_frac", 0.0), ("utilization_frac", 1.5), ("cost_of_capital_frac", -0.1),
                      ("residual_value_frac", 2.0)):
        with pytest.raises(objectives.table.InputError, match=name):
            objectives.evaluate({**DESIGN, name: bad})


def test_cloud_run_cost_by_hand():
    out = Cost()(_cost_inputs(mode=1), Calibration.load())
    # 1,024 GPUs x 720 h x $3.24 = 2,388,787.20; 62 TB x $210 per TB-month x 30 / 30.4375 days = 12,832.85
    assert out["run_cost_compute_usd"][0] == pytest.approx(2_388_787.20)
    assert out["run_cost_storage_usd"][0] == pytest.approx(12_832.85, abs=0.01)
    assert out["run_cost_network_usd"][0] == out["run_cost_power_usd"][0] == out["run_cost_facility_usd"][0] == 0
    assert out["run_cost_usd"][0] == pytest.approx(2_401_620.05, abs=0.01)
    # a rented cluster has no capital cost; on demand, it commits to the run and nothing more
    assert out["capex_usd"][0] == out["capex_servers_usd"][0] == out["capex_facility_usd"][0] == 0
    assert out["lifetime_cost_usd"][0] == pytest.approx(out["run_cost_usd"][0], rel=1e-12)


def test_a_reservation_commits_to_its_term_and_whole_instances_are_billed():
    """1,020 GPUs rent 128 whole 8-GPU instances (1,024 GPUs): 30 days at $2.975 (aws-p5en.48xlarge 3-year) =
    1,024 x 720 x 2.975 = 2,193,408.00 for the run; its lifetime is the 3-year term, 1,024 x 2.975 x 3 x 8,766 h
    = 80,114,227.20, plus the run's storage. The dataset (30 of the 62 TB) in the object store at $23 per
    TB-month, the checkpoints on the file system at $145: (32 x 145 + 30 x 23) x 30 / 30.4375 = 5,253.39."""
    c = _cost_inputs(mode=1)
    c.update({k: np.atleast_1d(np.float64(v)) for k, v in dict(
        n_gpus=1020, instance=1, pricing=2, instance_gpus=8, cloud_usd_per_gpu_hr=2.975, storage_dataset_tb=30,
        storage_cloud_usd_per_tb_month=145, storage_object_usd_per_tb_month=23).items()})
    out = Cost()(c, Calibration.load())
    assert out["run_cost_compute_usd"][0] == pytest.approx(2_193_408.00)
    assert out["run_cost_storage_usd"][0] == pytest.approx(5_253.39, abs=0.01)
    assert out["lifetime_cost_usd"][0] == pytest.approx(80_114_227.20 + 5_253.39, abs=0.01)
    assert out["capex_usd"][0] == 0
    # the cost per GPU-hour is per GPU used (1,020), the 4 idle GPUs of the last instance included in the cost
    assert out["usd_per_gpu_hr"][0] == pytest.approx((2_193_408.00 + 5_253.39) / (1020 * 720))


def test_breakdown_sums_and_mode_from_a_space():
    out = objectives.evaluate({**DESIGN, "cost_mode": np.array(["owned", "cloud"]), "n_gpus": np.array([1024.0, 1024.0])})
    parts = sum(out[k] for k in ("run_cost_compute_usd", "run_cost_network_usd", "run_cost_storage_usd", "run_cost_power_usd",
                                 "run_cost_facility_usd"))
    np.testing.assert_allclose(parts, out["run_cost_usd"], rtol=1e-12)
    np.testing.assert_allclose(out["usd_per_mtok"], out["run_cost_usd"] / 15e6, rtol=1e-12)
    # renting an H100 at $3.24/h costs more than owning one for the same run
    assert out["run_cost_usd"][1] > out["run_cost_usd"][0]
    # a space sets the price of electricity and the server life
    cheap = objectives.evaluate({**DESIGN, "electricity_usd_per_kwh": 0.04, "server_years": 6})
    base = objectives.evaluate(DESIGN)
    assert cheap["run_cost_power_usd"][0] == pytest.approx(base["run_cost_power_usd"][0] / 2)
    assert cheap["run_cost_compute_usd"][0] < base["run_cost_compute_usd"][0]


def test_prices_catalog_has_sources():
    raw = yaml.safe_load((CATALOG / "prices.yaml").read_text())["defaults"]
    sources = (CATALOG / "SOURCES.md").read_text()
    for name, e in raw.items():
        assert set(e) == {"value", "source", "confidence"}, name
        assert e["confidence"] in {"spec", "meas", "rep", "est", "rec"}, name
        assert len(e["source"]) >= 20 and e["value"] >= 0, name
        assert DEFAULTS[name] == e["value"], name  # every entry is a column default
        for key in re.findall(r"(?<![\w-])([SX]\d+)\b", e["source"]):
            assert f"[{key}]" in sources, (name, key)
    gpus = yaml.safe_load((CATALOG / "gpus.yaml").read_text())["gpus"]
    for gid, spec in gpus.items():
        announced = spec["system"]["confidence"] == "announced"  # a roadmap system: a price may be unpublished
        for f in ("server_usd_per_gpu", "server_w_per_gpu", "server_gpus", "cloud_usd_per_gpu_hr"):
            e = spec[f]
            assert {"value", "source", "confidence"} <= set(e) <= {"value", "source", "confidence", "low", "high"}, (gid, f)
            if e["value"] is None:  # none published: null, and a design that needs it is infeasible (test_estimates.py)
                assert announced and f != "server_gpus" and "no " in e["source"], (gid, f)
            else:
                assert e["value"] > 0, (gid, f)
            for key in re.findall(r"(?<![\w-])([SX]\d+)\b", e["source"]):
                assert f"[{key}]" in sources, (gid, f, key)


def test_an_nvl72_rack_is_priced_as_a_liquid_cooled_system():
    """1,008 GPUs = 14 NVL72 racks. GB200: the rack ~$3.1M / 72 less a $2,000 NIC = $41,056 a GPU (S66),
    its switch trays and Grace CPUs included, no what-if NVLink switches; 126 kW / 72 = 1,750 W a GPU at the
    maximum (S79/S70); the facility at $20M per MW of IT for a liquid-cooled rack (S50/S69), not the $10.7M
    average (S68). The same GPUs as DGX B200 servers: $62,375 a GPU, 1,787.5 W, $10.7M per MW."""
    rows = dict(DESIGN, gpu=np.array(["gb200", "b200"]), n_gpus=np.full(2, 1008.0), global_batch=1008, pp=2)
    out = objectives.evaluate(rows)
    np.testing.assert_array_equal(out["capex_servers_usd"], [1008 * 41_056, 1008 * 62_375])
    np.testing.assert_array_equal(out["net_capex_scaleup_usd"], [0, 0])
    peak = (1008 * np.array([1750.0, 1787.5]) + out["net_power_w"] + out["storage_power_w"]) / 1e6
    np.testing.assert_allclose(out["power_it_peak_mw"], peak)
    np.testing.assert_allclose(out["capex_facility_usd"], peak * np.array([20e6, 10.7e6]))
    # a space's facility price is a what-if over the system's
    flat = objectives.evaluate(dict(rows, facility_usd_per_mw=10.7e6))
    np.testing.assert_allclose(flat["capex_facility_usd"], peak * 10.7e6)
