"""A facility's limits (objectives/economics/facility.py, dse/spec/facility.py): its power ``facility_mw`` holds the
whole racks its power allows and no more, ``rack_kw_max`` excludes a rack above it with the reason, the GPU
count a space searches is bounded by the power with the largest count that fits among its candidates, and a
bad value is one line and exit 2 naming the file and the key."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import objectives
from dse.cli import main
from dse.errors import UserError
from dse.spec import load_spec, parse_spec
from objectives.sizing import largest_fitting_gpus

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = {"model": "llama3-70b", "global_batch": 1024, "seq_len": 8192, "train_tokens": 15e12}
#: a GB200 NVL72 rack with no fabric or storage power, so that its peak is the rack's alone, x PUE
NO_FABRIC = {"net_switch_w": 0.0, "net_optic_w": 0.0, "scaleup_switch_w_per_gpu": 0.0, "storage_unit_w": 0.0}


def _evaluate(**columns):
    return objectives.search_mapping({**WORKLOAD, "gpu": "gb200", **columns})


def test_gb200_rack_above_the_limit_is_infeasible_with_its_reason():
    """GB200 NVL72: 72 GPUs x 1,750 W (gpus.yaml server_w_per_gpu, S79: 126 kW / 72) = 126 kW a rack. Against
    rack_kw_max 120 it is 6 kW over: infeasible, 'rack power: 126 kW > rack_kw_max 120'; against 130, 4 kW
    under. GB300 NVL72: 72 x 1,875 W = 135 kW."""
    out = _evaluate(n_gpus=[1024, 1024], rack_kw_max=[120, 130])
    assert out["rack_kw"] == pytest.approx([126.0, 126.0])
    assert out["con_rack_kw"] == pytest.approx([6.0, -4.0])
    assert not out["feasible"][0] and out["infeasible_reason"][0] == "rack power: 126 kW > rack_kw_max 120"
    assert out["infeasible_reason"][1] == "" and out["feasible"][1]
    gb300 = objectives.search_mapping({**WORKLOAD, "gpu": "gb300", "n_gpus": 1024, "rack_kw_max": 130})
    assert gb300["rack_kw"][0] == pytest.approx(135.0)
    assert gb300["infeasible_reason"][0] == "rack power: 135 kW > rack_kw_max 130"


def test_no_limit_and_rented_designs_are_within():
    """Without facility_mw or rack_kw_max the columns are -inf (within); a rented design runs in its provider's
    facility and is not held to the planner's limits."""
    out = _evaluate(n_gpus=1024)
    assert out["con_rack_kw"][0] == -np.inf and out["con_facility_mw"][0] == -np.inf
    assert np.isnan(out["facility_budget_frac"][0])
    rented = objectives.search_mapping({**WORKLOAD, "instance": "aws-p5.48xlarge", "n_gpus": 1024, "facility_mw": 1,
                                        "rack_kw_max": 1})
    assert rented["con_facility_mw"][0] == -np.inf and rented["con_rack_kw"][0] == -np.inf


def test_facility_holds_the_racks_its_power_allows_and_no_more():
    """10 MW of GB200 NVL72 racks with no fabric or storage power, PUE 1.25 (prices.yaml, S72/S73): a rack is
    126 kW x 1.25 = 157.5 kW of facility, floor(10,000 / 157.5) = floor(63.49) = 63 racks = 4,536 GPUs
    (9.9225 MW, 0.0775 MW under). 4,537 GPUs bill a 64th rack: 64 x 157.5 kW = 10.08 MW, 0.08 MW over."""
    assert largest_fitting_gpus({**WORKLOAD, "gpu": "gb200", "facility_mw": 10.0, **NO_FABRIC})[0] == 63 * 72
    out = _evaluate(n_gpus=[4536, 4537], facility_mw=10.0, **NO_FABRIC)
    assert out["n_gpus_billed"] == pytest.approx([4536, 4608])
    assert out["facility_power_peak_mw"] == pytest.approx([9.9225, 10.08])
    assert out["con_facility_mw"] == pytest.approx([-0.0775, 0.08])
    assert out["facility_budget_frac"][0] == pytest.approx(0.99225)
    assert out["infeasible_reason"][1] == "facility power: 10.1 MW peak > facility_mw 10"
    assert not out["feasible"][1]


def test_largest_fitting_count_with_its_fabric_is_tight():
    """With the fabric and storage the model gives (objectives.training.topology, objectives.training.checkpoint), the largest
    count of whole racks that fits 100 MW fits, and one rack more does not; it is below the servers-only count,
    floor(100 / (1.25 x 0.126)) = 634 racks."""
    fit = largest_fitting_gpus({**WORKLOAD, "gpu": ["gb200", "h100-sxm"], "facility_mw": 100.0})
    racks = fit / np.array([72, 8])
    assert np.all(racks == np.floor(racks)) and racks[0] < 634
    out = objectives.search_mapping({**WORKLOAD, "gpu": ["gb200", "gb200", "h100-sxm", "h100-sxm"],
                                     "n_gpus": [fit[0], fit[0] + 72, fit[1], fit[1] + 8], "facility_mw": 100.0})
    assert list(out["con_facility_mw"] <= 0) == [True, False, True, False]


def _space(**top):
    raw = {"name": "fac", "workload": dict(WORKLOAD), "cluster": {"gpu": ["gb200", "h100-sxm"]},
           "objectives": [{"metric": "tokens_per_s", "direction": "max"}, "run_cost_usd"],
           "search": {"sampler": "grid", "trials": 16, "batch_size": 16}}
    raw.update(top)
    return raw


def test_space_without_n_gpus_takes_the_largest_counts_that_fit():
    """n_gpus left out: for each GPU the largest fitting count and the m x 2^k counts below it (dse.spec.facility)."""
    spec = parse_spec(_space(facility_mw=100), source="fac.yaml")
    fit = largest_fitting_gpus({**WORKLOAD, "gpu": ["gb200", "h100-sxm"], "facility_mw": 100.0})
    counts = next(d for d in spec.dimensions if d.name == "n_gpus").values
    assert set(fit.astype(int)) <= set(counts) and max(counts) == max(fit)
    assert 40960 in counts  # 5 x 2^13 below 43,056 GB200 (598 racks): dp 1024 x tp 8 x pp 5
    assert spec.resolved()["facility_mw"] == 100 and "rack_kw_max" not in spec.resolved()


def test_searched_n_gpus_is_bounded_and_reaches_the_fit():
    """A pow2 range 1,024 .. 131,072: the powers above the largest fit (57,960 H100, 7,245 servers) are dropped
    and each GPU's largest fitting count within the range is added; a plain int range has its max lowered."""
    spec = parse_spec(_space(facility_mw=100, cluster={"gpu": ["gb200", "h100-sxm"],
                                                       "n_gpus": {"min": 1024, "max": 131072, "scale": "pow2"}}))
    fit = largest_fitting_gpus({**WORKLOAD, "gpu": ["gb200", "h100-sxm"], "facility_mw": 100.0})
    counts = next(d for d in spec.dimensions if d.name == "n_gpus").values
    assert max(counts) == max(fit) and set(fit.astype(int)) <= set(counts)
    assert {1024, 2048, 32768} <= set(counts) and 65536 not in counts
    ranged = parse_spec(_space(facility_mw=100, cluster={"gpu": ["gb200", "h100-sxm"],
                                                         "n_gpus": {"min": 1000, "max": 1000000}},
                               search={"sampler": "nsga2", "trials": 16, "batch_size": 16}))
    n = next(d for d in ranged.dimensions if d.name == "n_gpus")
    assert (n.kind, n.low, n.high) == ("int", 1000, max(fit))


@pytest.mark.parametrize("top, where, says", [
    ({"facility_mw": -1}, "fac.yaml: facility_mw", "must be a number of megawatts > 0 and at most 100,000, not -1"),
    ({"facility_mw": 0}, "fac.yaml: facility_mw", "> 0"),
    ({"facility_mw": 1e9}, "fac.yaml: facility_mw", "at most 100,000"),
    ({"facility_mw": "lots"}, "fac.yaml: facility_mw", "must be a number"),
    ({"facility_mw": float("nan")}, "fac.yaml: facility_mw", "finite"),
    ({"rack_kw_max": 0}, "fac.yaml: rack_kw_max", "must be a number of kilowatts > 0 and at most 10,000, not 0"),
    ({"rack_kw_max": True}, "fac.yaml: rack_kw_max", "must be a number"),
    ({"workload": {**WORKLOAD, "facility_mw": 100}}, "fac.yaml: workload.facility_mw", "give it at the top level"),
])
def test_bad_values_are_one_line_naming_file_and_key(top, where, says):
    with pytest.raises(UserError) as err:
        parse_spec(_space(**top), source="fac.yaml")
    assert err.value.where == where and says in str(err.value)


def test_bad_value_exits_2_with_one_line(tmp_path):
    """Through the CLI: exit status 2 and one line 'dse sweep: error: <file>: facility_mw: ...'."""
    path = tmp_path / "fac.yaml"
    path.write_text(yaml.safe_dump(_space(facility_mw=-5)))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["sweep", str(path), "--no-ray", "--quiet", "--out", str(tmp_path / "run")])
    lines = err.getvalue().strip().splitlines()
    assert rc == 2 and len(lines) == 1 and f"{path}: facility_mw" in lines[0] and "> 0" in lines[0]


def test_serving_space_takes_no_facility_limits():
    raw = yaml.safe_load((ROOT / "spaces" / "serving-llama3.3-70b.yaml").read_text())
    raw["facility_mw"] = 10
    with pytest.raises(UserError, match="serving space takes no facility limits"):
        parse_spec(raw, source="serving.yaml")


def test_design_table_limits_must_be_positive():
    """`dse evaluate` tables: facility_mw and rack_kw_max blank or a finite number > 0 (objectives/ranges.py)."""
    with pytest.raises(objectives.InputError, match="rack_kw_max|> 0"):
        _evaluate(n_gpus=1152, rack_kw_max=-3)
    with pytest.raises(objectives.InputError):
        _evaluate(n_gpus=1152, facility_mw=math.inf)


def test_shipped_facility_space_loads_with_the_counts_that_fit():
    """spaces/facility-20mw.yaml: 20 MW, 130 kW racks; the GB200 count 119 racks (the servers alone would be
    floor(20 / (1.25 x 0.126)) = 126; the fabric and storage take the rest)."""
    spec = load_spec(ROOT / "spaces" / "facility-20mw.yaml")
    counts = next(d for d in spec.dimensions if d.name == "n_gpus").values
    gb200 = largest_fitting_gpus({**spec.workload, "gpu": "gb200", "storage": "pfs-large", "facility_mw": 20.0})[0]
    assert gb200 in counts and gb200 % 72 == 0 and gb200 / 72 < 126
    assert spec.facility_mw == 20 and spec.rack_kw_max == 130
