"""Announced systems as sourced estimates (gpus.yaml vera-rubin-nvl72, rubin-cpx, rubin-ultra-nvl576, mi455x):
their figures' sources, confidences and ranges; the range carried into a design's 80% interval on top of the
model's own (objectives/training/intervals.py); `dse catalog gpus` saying how sure each system is; a design on one with
no published price or power infeasible with the reason (objectives/economics/rental.py con_price)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import objectives
from dse.cli import main
from objectives.catalog.estimates import CONFIDENCE_ORDER, RANGE_FIELDS, range_columns
from objectives.training.intervals import catalog_range

CATALOG = Path(__file__).resolve().parents[1] / "objectives" / "catalog"
ANNOUNCED = ("vera-rubin-nvl72", "rubin-cpx", "rubin-ultra-nvl576", "mi455x")
#: one 2 x 72-GPU job at fp8, its mapping fixed (tp 8, pp 2, dp 9): the same on every system below
JOB = {"model": "llama3-70b", "n_gpus": 144, "global_batch": 144, "tp": 8, "pp": 2, "micro_batch": 1,
       "precision": "fp8", "train_tokens": 1e11}


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((CATALOG / "gpus.yaml").read_text())["gpus"]


def test_every_announced_figure_has_a_source_a_confidence_and_an_ordered_range(raw):
    """Every numeric field of every announced system: a source citing a key listed in SOURCES.md (or saying
    none is published), a confidence among the catalog's labels, and low <= value <= high where given; a null
    value only where nothing is published (a price, a power, the system NIC price)."""
    sources = (CATALOG / "SOURCES.md").read_text()
    for gid in ANNOUNCED:
        spec = raw[gid]
        assert spec["system"]["confidence"] == "announced", gid
        assert range_columns(spec)["gpu_announced"] == 1.0, gid
        for f, e in spec.items():
            if f in ("name", "system"):
                continue
            assert {"value", "source", "confidence"} <= set(e) <= {"value", "source", "confidence", "low", "high"}, (gid, f)
            assert e["confidence"] in CONFIDENCE_ORDER, (gid, f, e["confidence"])
            assert isinstance(e["source"], str) and len(e["source"]) >= 30, (gid, f)
            keys = re.findall(r"(?<![\w-])([SX]\d+)\b", e["source"])
            assert keys or "no " in e["source"], (gid, f)  # a key, or the statement that nothing is published
            for key in keys:
                assert f"[{key}]" in sources or f"| {key} |" in sources, (gid, f, key)
            v = e["value"]
            if v is None:
                assert f in ("nic_usd", "gpu_tdp_w", "server_usd_per_gpu", "server_w_per_gpu", "cloud_usd_per_gpu_hr"), (gid, f)
                assert "low" not in e and "high" not in e, (gid, f)
                continue
            assert isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, (gid, f)
            assert e.get("low", v) <= v <= e.get("high", v), (gid, f, e)
        # an estimate says how it was reached; the GEMM efficiencies are estimates (no MAMF measured on any)
        for p in ("bf16", "fp8", "fp4"):
            assert spec[f"gpu_gemm_eff_{p}"]["confidence"] == "est" and "MAMF" in spec[f"gpu_gemm_eff_{p}"]["source"]
    # where sources disagree the range is there: sparse vs dense FLOP/s, the revised HBM4 bandwidth (X35, X36)
    rubin = raw["vera-rubin-nvl72"]
    assert (rubin["gpu_fp4_tflop_s"]["low"], rubin["gpu_fp4_tflop_s"]["value"], rubin["gpu_fp4_tflop_s"]["high"]) == \
        (25000, 35000, 50000)
    assert (rubin["gpu_hbm_tbyte_s"]["low"], rubin["gpu_hbm_tbyte_s"]["value"]) == (20, 22)
    assert rubin["scaleup_gbyte_s"]["value"] == 1800 and rubin["nic_gbyte_s"]["value"] == 200  # 3.6 TB/s bidir, 1.6 Tb/s
    assert raw["mi455x"]["gpu_hbm_gb"]["value"] == 432 and raw["mi455x"]["gpu_hbm_tbyte_s"]["value"] == 19.6


def test_the_worst_field_bounds_the_throughput():
    """catalog_range: the least low fraction and the largest high fraction of the figures a row runs on, the
    peak being its precision's. By hand, row 0 (bf16): min(bf16 0.5, HBM 0.9, 1, 1, 1) = 0.5, max(1.2, 1, ...) = 1.2;
    row 1 (fp4): fp4 1.0 and HBM 0.9 -> 0.9, the NIC's 1.5 -> 1.5."""
    ones = np.ones(2)
    c = {f"{f}_{end}_frac": ones for f in RANGE_FIELDS for end in ("lo", "hi")}
    c.update({"precision": np.array([0.0, 2.0]), "gpu_bf16_tflop_s_lo_frac": np.array([0.5, 0.5]),
              "gpu_bf16_tflop_s_hi_frac": np.array([1.2, 1.2]), "gpu_hbm_tbyte_s_lo_frac": np.array([0.9, 0.9]),
              "nic_gbyte_s_hi_frac": np.array([1.0, 1.5])})
    lo, hi = catalog_range(c)
    np.testing.assert_allclose(lo, [0.5, 0.9])
    np.testing.assert_allclose(hi, [1.2, 1.5])


def test_an_estimated_figure_widens_the_interval_of_a_design_on_it():
    """Row 0 runs on vera-rubin-nvl72 as catalogued; row 1 on the same system with every ranged figure it runs
    on given as a what-if at its own value (16,667 fp8 TFLOP/s, 22 TB/s, ...), which fixes it: the same
    prediction, the same distance from the validated runs, no catalog range.

    By hand (gpus.yaml vera-rubin-nvl72): at fp8 the ranged figures are the fp8 peak, low 12,500 / 16,667 = 0.74999
    and high 17,500 / 16,667 = 1.04998, and the HBM bandwidth, low 20 / 22 = 0.90909; HBM capacity, NVLink and NIC
    have no range (1). catalog_range_lo_frac = min(0.74999, 0.90909, 1, 1, 1) = 0.74999 and
    catalog_range_hi_frac = max(1.04998, 1, 1, 1, 1) = 1.04998, so
    tokens_per_s_per_gpu_lo(row 0) = 0.74999 x tokens_per_s_per_gpu_lo(row 1),
    tokens_per_s_per_gpu_hi(row 0) = 1.04998 x tokens_per_s_per_gpu_hi(row 1), and the time to train, which
    goes as 1 / throughput: time_to_train_days_hi(row 0) = time_to_train_days_hi(row 1) / 0.74999.
    Both rows are extrapolated (an announced system, no run validates it); an H100 row (row 2) has no range."""
    rows = {**JOB, "gpu": np.array(["vera-rubin-nvl72", "vera-rubin-nvl72", "h100-sxm"], dtype=object),
            "gpu_fp8_tflop_s": np.array([np.nan, 16667.0, np.nan]),
            "gpu_hbm_tbyte_s": np.array([np.nan, 22.0, np.nan])}
    out = objectives.evaluate(rows)
    lo_frac, hi_frac = 12500 / 16667, 17500 / 16667
    np.testing.assert_allclose(out["catalog_range_lo_frac"], [lo_frac, 1.0, 1.0])
    np.testing.assert_allclose(out["catalog_range_hi_frac"], [hi_frac, 1.0, 1.0])
    assert out["tokens_per_s_per_gpu"][0] == pytest.approx(out["tokens_per_s_per_gpu"][1], rel=1e-12)
    assert out["tokens_per_s_per_gpu_lo"][0] == pytest.approx(lo_frac * out["tokens_per_s_per_gpu_lo"][1], rel=1e-9)
    assert out["tokens_per_s_per_gpu_hi"][0] == pytest.approx(hi_frac * out["tokens_per_s_per_gpu_hi"][1], rel=1e-9)
    assert out["time_to_train_days_hi"][0] == pytest.approx(out["time_to_train_days_hi"][1] / lo_frac, rel=1e-9)
    assert out["interval_half_width_frac"][0] > out["interval_half_width_frac"][1]
    assert list(out["catalog_estimated"]) == [True, True, False]
    assert list(out["interval_extrapolated"][:2]) == [True, True]
    # the unranged row's interval is the model's own: the shipped part's, untouched by this change
    assert out["tokens_per_s_per_gpu_lo"][2] < out["tokens_per_s_per_gpu"][2] < out["tokens_per_s_per_gpu_hi"][2]


def test_catalog_gpus_lists_the_announced_systems_with_their_confidence(capsys):
    assert main(["catalog", "gpus"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-1] == "confidence"
    conf = {ln.split()[0]: ln.split()[-1] for ln in lines[3:]}
    for gid in ANNOUNCED:  # the weakest spec figure: an estimated BF16 peak (none announced) on each
        assert conf[gid] in ("announced", "est"), (gid, conf[gid])
    assert conf["vera-rubin-nvl72"] == "est" and conf["h100-sxm"] == "spec" and conf["b300"] == "rep"
    rubin = next(ln for ln in lines if ln.startswith("vera-rubin-nvl72 ")).split()
    assert rubin[1:6] == ["8,333", "16,667", "35,000", "288", "22"]


def test_a_system_without_a_published_price_or_power_is_infeasible_with_the_reason():
    """Owned Rubin Ultra (no rack price published): con_price 2; MI455X owned with a what-if price but no
    published power: con_price 3; Vera Rubin rented (no rental price): con_price 1; the same MI455X row with a
    what-if power too is feasible. No exception, and the costs of an unpriced row are NaN, not a guess."""
    rows = {**JOB, "gpu": np.array(["rubin-ultra-nvl576", "mi455x", "vera-rubin-nvl72", "mi455x"], dtype=object),
            "cost_mode": np.array(["owned", "owned", "cloud", "owned"], dtype=object),
            "server_usd_per_gpu": np.array([np.nan, 90_000.0, np.nan, 90_000.0]),
            "gpu_tdp_w": np.array([np.nan, np.nan, np.nan, 2300.0])}
    out = objectives.evaluate(rows)
    assert list(out["con_price"]) == [2, 3, 1, 0]
    assert list(out["feasible"]) == [False, False, False, True]
    reasons = list(out["infeasible_reason"])
    assert reasons[0].startswith("price: no published price to buy this GPU system (server_usd_per_gpu")
    assert reasons[1].startswith("power: no published power for this GPU system (gpu_tdp_w")
    assert reasons[2] == "price: no published price for this GPU at on_demand"
    assert reasons[3] == ""
    assert np.isnan(out["run_cost_usd"][0]) and np.isfinite(out["run_cost_usd"][3])
    # the mapping search too: its winner is told infeasible with the same reason
    found = objectives.search_mapping({**JOB, "gpu": "rubin-ultra-nvl576", "tp": np.nan, "pp": np.nan})
    assert not found["feasible"][0] and found["infeasible_reason"][0].startswith("price: no published price to buy")


def test_the_report_names_a_design_on_an_announced_system_estimated():
    from dse.report.names import design_names

    frame = pd.DataFrame({"gpu": ["vera-rubin-nvl72", "gb300"], "n_gpus": [144, 144], "catalog_estimated": [True, False]})
    assert design_names(frame, ["gpu"], mapping=False) == ["vera-rubin-nvl72 (estimated)", "gb300"]
