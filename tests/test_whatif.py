"""`dse whatif`: a hardware field varied over a run's front, said in the objectives' units and in money
(dse/report/whatif.py): the break-even price derived by hand from the owned cost formula, a value equal to
today's worth nothing, and one-line errors for a bad --vary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.errors import UserError
from dse.report.data import load_run
from dse.report.whatif import parse_vary, whatif
from dse.spec import load_spec
from dse.sweep import run
from objectives.economics.capital import capital_recovery_factor
from objectives.economics.cost import DAYS_PER_YEAR

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A real (model-scored) run of spaces/small.yaml: owned A100/H100/H200/B200 clusters, in-process."""
    spec = load_spec(ROOT / "spaces" / "small.yaml").with_search(sampler="random", trials=48, batch_size=48, seed=0)
    return load_run(run(spec, run_dir=tmp_path_factory.mktemp("whatif") / "run", use_ray=False, report=False).run_dir)


def test_break_even_price_of_doubled_nvlink_by_hand(small):
    """Doubling scale-up bandwidth on each front design, the break-even server price by hand.

    An owned design's run cost depends on its server price P only through the servers' calendar cost over
    the run (objectives.economics.cost): n_gpus x P x (CRF(r, Y) + u) x years / busy, CRF the capital recovery factor at
    cost of capital r over the servers' life Y (residual 0), u the upkeep per year, busy the utilization. So
    at the changed hardware's run length years_1, the price at which it costs what the design costs today
    (C_0) is P* = P + (C_0 - C_1) x busy / (n_gpus x (CRF + u) x years_1); with r 0.10, Y 5: CRF 0.263797."""
    front = small.front
    t = whatif(small, "scaleup_gbyte_s", [2.0 * float(front["scaleup_gbyte_s"].max())])
    ok = t[t["feasible"]]
    assert len(ok) >= 1 and front["cost_mode"].isin([0, "owned"]).all()
    f = front.iloc[ok["design"].to_numpy() - 1]
    crf = capital_recovery_factor(f["cost_of_capital_frac"].to_numpy(), f["server_years"].to_numpy())
    np.testing.assert_allclose(capital_recovery_factor(0.10, 5.0), 0.263797, rtol=1e-5)
    years_1 = ok["time_to_train_days_after"].to_numpy() / DAYS_PER_YEAR
    p = f["server_usd_per_gpu"].to_numpy()
    slope = f["n_gpus"].to_numpy() * (crf + f["upkeep_frac_per_year"].to_numpy()) * years_1 / f["utilization_frac"].to_numpy()
    worth = ok["run_cost_usd_before"].to_numpy() - ok["run_cost_usd_after"].to_numpy()
    np.testing.assert_allclose(ok["worth"], worth, rtol=1e-12)
    np.testing.assert_allclose(ok["break_even_price"], p + worth / slope, rtol=1e-6)
    # faster is cheaper on an owned cluster billed by the calendar: a doubled NVLink never loses run cost
    assert (ok["time_to_train_days_after"] <= ok["time_to_train_days_before"] * (1 + 1e-9)).all()
    assert (ok["break_even_price"] >= p * (1 - 1e-9)).all()


def test_todays_value_is_worth_nothing(small):
    """Each front design at its own HBM bandwidth: the same numbers, worth $0, break-even at today's price."""
    v = float(small.front["gpu_hbm_tbyte_s"].iloc[0])
    t = whatif(small, "gpu_hbm_tbyte_s", [v])
    same = t[(small.front["gpu_hbm_tbyte_s"].to_numpy() == v) & t["feasible"].to_numpy()]
    assert len(same) >= 1
    np.testing.assert_allclose(same["worth"], 0.0, atol=1e-6)
    np.testing.assert_allclose(same["break_even_price"], same["price"], rtol=1e-9)
    np.testing.assert_allclose(same["time_to_train_days_after"], same["time_to_train_days_before"], rtol=1e-12)


def test_baseline_is_the_front(small):
    """Each design's "before" is the design as the front scored it, to the last bit, so that a delta is the
    hardware change's alone. The space's mapping is ``auto``: the sweep searched with the model's own choices
    (None), under which sequence parallelism follows tp; a baseline searched over the defaults spelled out
    searched sequence_parallel over (1,) and so never tp 1 (objectives/mapping.py), and put the front's tp 1
    designs 2-8% slower than the front (roadmap-2027-moe's #1: 1.62 days against 1.57)."""
    front = small.front
    assert (front["tp"] == 1).any()  # the designs the narrower search could not reproduce
    t = whatif(small, "nic_gbyte_s", [100.0])
    for m in ("time_to_train_days", "run_cost_usd"):
        np.testing.assert_allclose(t[f"{m}_before"], front[m], rtol=1e-9, err_msg=m)


@pytest.fixture(scope="module")
def sited(tmp_path_factory):
    """spaces/small.yaml in a 1 MW facility (facility_mw, a top-level key of the space)."""
    space = tmp_path_factory.mktemp("sited") / "sited.yaml"
    space.write_text((ROOT / "spaces" / "small.yaml").read_text() + "facility_mw: 1\n")
    spec = load_spec(space).with_search(sampler="random", trials=48, batch_size=48, seed=0)
    return load_run(run(spec, run_dir=space.parent / "run", use_ray=False, report=False).run_dir)


def test_a_change_beyond_the_facility_is_infeasible(sited):
    """The facility's power holds on the what-if as on the sweep: the front designs as they are fit it (and
    score as on the front), the same designs at servers drawing twice what would fill the facility do not."""
    front = sited.front
    assert len(front) >= 1 and (front["facility_budget_frac"] <= 1).all()
    watts = 2.0 * float((front["server_w_per_gpu"] / front["facility_budget_frac"]).max())
    t = whatif(sited, "server_w_per_gpu", [watts])
    assert not t["feasible"].any()
    np.testing.assert_allclose(t["time_to_train_days_before"], front["time_to_train_days"], rtol=1e-9)


@pytest.mark.parametrize("text, says", [
    ("nvlink=2", "not a hardware field"),
    ("scaleup_gbyte=900", "did you mean 'scaleup_gbyte_s'"),
    ("scaleup_size=72,abc", "'abc' is not a number"),
    ("scaleup_size=100.5", "positive whole number"),
    ("gpu_gemm_eff_fp8=1.2", "at most 1"),
    ("gpu_hbm_tbyte_s=-1", "positive number"),
    ("scaleup_size", "expected FIELD=VALUE"),
])
def test_bad_vary_is_one_line(text, says):
    with pytest.raises(UserError, match=says):
        parse_vary(text)


def test_cli_bad_vary_exits_2_before_reading_the_run(tmp_path, capsys):
    """The flags are checked before the run is read: a bad field is one line and exit status 2."""
    assert main(["whatif", str(tmp_path), "--vary", "hbm=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a hardware field" in err and "\n" not in err


def test_cli_prints_and_writes(small, tmp_path, capsys):
    out = tmp_path / "whatif.csv"
    assert main(["whatif", str(small.root), "--vary", "nic_gbyte_s=50,100", "--show", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "nic_gbyte_s -> 50:" in text and "nic_gbyte_s -> 100:" in text and "break-even price" in text
    assert out.is_file() and out.stat().st_size > 0
