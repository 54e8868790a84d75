"""The buyer's view (dse.report.buyer, knee, names, facets): the knee of hand-made fronts, the cheapest
design within a deadline, the best design per GPU, provider and instance, design names of the axes that
vary with their units, and a page with the capex, run and lifetime cost columns of a table that rents
cloud instances beside owned clusters (the columns objectives gives designs with ``instance``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.report import write_report
from dse.report.buyer import best_per_group, group_kinds, group_values, recommend, terminal_text
from dse.report.data import load_run
from dse.report.knee import deadline_days, knee_index, normalized
from dse.report.names import design_names, number, shared_axes

# ---------------------------------------------------------------------------------------------- the knee


def test_knee_of_a_two_objective_front():
    """Normalized (both linear: 10x is not more than 10x), f1 / 10 + f2 / 10 is 1, .5, .35, .7, 1: the
    knee is the third point, (1 - .35) / sqrt 2 = 0.46 from the line through the extremes."""
    F = np.array([[0, 10], [1, 4], [2, 1.5], [6, 1], [10, 0]], dtype=float)
    np.testing.assert_allclose(normalized(F), F / 10)
    assert knee_index(F) == 2


def test_knee_is_judged_on_a_log_scale_where_an_objective_spans_more_than_10x():
    """Cost 1..1000 (1000x): on a log scale (3, 2, .477, 0) -> (1, .667, .159, 0); time 1..5 linear
    (0, .25, .5, 1). Sums 1, .917, .659, 1: the knee is (3, 3). On a linear cost scale the sums would be
    1, .349, .502, 1 and the knee (2, 100)."""
    F = np.array([[1, 1000], [2, 100], [3, 3], [5, 1]], dtype=float)
    np.testing.assert_allclose(normalized(F)[:, 1], [1, 2 / 3, np.log10(3) / 3, 0], atol=1e-12)
    assert knee_index(F) == 2
    linear = F.copy()
    linear[:, 1] = (F[:, 1] - 1) / 999  # the same order, no longer spanning 10x
    assert knee_index(linear) == 1


def test_knee_of_a_three_objective_front_is_farthest_from_the_extremes_plane():
    """Extremes (0,1,1), (1,0,1), (1,1,0) span w = (.5, .5, .5): (1 - .5 * sum) / |w| is .635 for
    (.3, .3, .3) and .404 for (.2, .6, .5): the knee is the fourth point."""
    F = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0], [.3, .3, .3], [.2, .6, .5]])
    assert knee_index(F) == 3


def test_knee_of_one_or_two_designs():
    assert knee_index(np.array([[3.0, 4.0]])) == 0
    assert knee_index(np.array([[1.0, 2.0], [2.0, 1.0]])) == 0  # no interior: the earlier row


def test_deadline_is_the_tightest_time_to_train_bound():
    assert deadline_days(["power_mw <= 30", "time_to_train_days <= 120", "time_to_train_days < 90"]) == 90
    assert deadline_days(["power_mw <= 30", "time_to_train_days >= 10"]) is None
    assert deadline_days([]) is None

# ------------------------------------------------------------------------ a cloud-and-owned run, by hand


def _trials() -> pd.DataFrame:
    """Eight designs, owned and rented; the space's deadline is 120 days (6 and 7 miss it, inadmissible).
    Admissible (time days, run cost $M): 0 (100, 10), 1 (50, 12), 2 (105, 30), 3 (105, 14), 4 (110, 13),
    5 (26, 14): the front is 5, 1, 0 (4 is dominated by 0, 2 and 3 by 0)."""
    rows = [  # gpu, instance, pricing, n_gpus, pp, days, run cost, capex, lifetime cost
        ("h100-sxm", None, None, 1024, 4, 100.0, 10e6, 60e6, 300e6),
        ("b200", None, None, 1024, 4, 50.0, 12e6, 90e6, 400e6),
        ("h100-sxm", "aws-p5.48xlarge", "on_demand", 1024, 4, 105.0, 30e6, 0.0, np.nan),
        ("h100-sxm", "aws-p5.48xlarge", "reserved_3y", 1024, 4, 105.0, 14e6, 0.0, np.nan),
        ("h100-sxm", "gcp-a3-megagpu-8g", "reserved_1y", 1024, 4, 110.0, 13e6, 0.0, np.nan),
        ("b200", None, None, 2048, 8, 26.0, 14e6, 180e6, 800e6),
        ("h100-sxm", "azure-nd-h100-v5", "spot", 1024, 4, 140.0, 8e6, 0.0, np.nan),
        ("h100-sxm", None, None, 512, 4, 190.0, 9e6, 30e6, 200e6),
    ]
    t = pd.DataFrame(rows, columns=["gpu", "instance", "pricing", "n_gpus", "pp", "time_to_train_days",
                                    "run_cost_usd", "capex_usd", "lifetime_cost_usd"])
    t.insert(0, "trial", range(len(t)))
    t["tp"] = 8
    t["tco_usd"] = t["run_cost_usd"]  # the alias objectives keeps for a release
    t["cost_mode"] = np.where(t["instance"].isna(), 0.0, 1.0)
    t["mfu"] = 0.4
    t["power_mw"] = [13.0, 12.0, 10.0, 10.0, 10.0, 20.0, 10.0, 5.0]
    t["feasible"] = True
    t["admissible"] = t["time_to_train_days"] <= 120
    return t


def _run_dir(where: Path, constraints=("time_to_train_days <= 120",)) -> Path:
    where.mkdir(parents=True)
    (where / "trials").mkdir()
    _trials().to_parquet(where / "trials" / "part-00000.parquet")
    spec = {"name": "rent-or-own", "description": "hand-made", "workload": {"model": "llama3.1-405b"},
            "cluster": {"gpu": ["h100-sxm", "b200"], "n_gpus": [512, 1024, 2048],
                        "instance": ["aws-p5.48xlarge", "gcp-a3-megagpu-8g", "azure-nd-h100-v5"],
                        "pricing": ["on_demand", "reserved_1y", "reserved_3y", "spot"]},
            "objectives": [{"metric": "time_to_train_days", "direction": "min"},
                           {"metric": "run_cost_usd", "direction": "min"}],
            "constraints": list(constraints)}
    (where / "run.json").write_text(json.dumps({"spec": spec, "status": "complete", "seed": 0}))
    return where


def test_the_front_of_the_hand_made_run(tmp_path):
    run = load_run(_run_dir(tmp_path / "run"))
    assert list(run.front["trial"]) == [5, 1, 0]


def test_with_a_deadline_the_recommendation_is_the_cheapest_design_within_it(tmp_path):
    run = load_run(_run_dir(tmp_path / "run"))
    rec = recommend(run)
    assert rec.rule == "deadline" and int(rec.row["trial"]) == 0 and rec.position == 3
    # the cheapest of all is 6 ($8M) but misses the deadline; 0 is the cheapest of those that meet it
    admissible = run.trials[run.trials["admissible"]]
    assert rec.row["run_cost_usd"] == admissible["run_cost_usd"].min() < 12e6
    assert "deadline of 120 days" in rec.text
    # its neighbour on the front: #2, 50 days faster for $2M more
    assert "Against #2 (1,024×b200 · pp4), the next-faster design, it is 50 days slower (+100%) and $2M " \
           "cheaper (-17%)" in rec.text
    assert "capex $60M, run cost $10M, lifetime cost $300M" in rec.text


def test_without_a_deadline_the_recommendation_is_the_knee(tmp_path):
    """Front (26, 14), (50, 12), (100, 10): normalized time (0, .324, 1), cost (1, .5, 0); sums 1, .824, 1."""
    run = load_run(_run_dir(tmp_path / "run", constraints=()))
    rec = recommend(run)
    assert rec.rule == "knee" and int(rec.row["trial"]) == 1 and rec.position == 2
    assert rec.name == "1,024×b200 · pp4"
    assert "50 days faster (-50%) and $2M dearer (+20%)" in rec.text  # against #3
    assert "24 days slower (+92%) and $2M cheaper (-14%)" in rec.text  # against #1


def test_a_deadline_without_a_cost_objective_picks_the_cheapest_admissible_design(tmp_path):
    """With time and power as objectives, "cheapest" is the run's cost (run_cost_usd): design 0 ($10M),
    although the (time, power) front (5, 1, 2, 3) leaves it out: 1 is faster at less power."""
    root = _run_dir(tmp_path / "run")
    info = json.loads((root / "run.json").read_text())
    info["spec"]["objectives"][1]["metric"] = "power_mw"
    (root / "run.json").write_text(json.dumps(info))
    run = load_run(root)
    assert sorted(run.front["trial"]) == [1, 2, 3, 5]
    rec = recommend(run)
    assert int(rec.row["trial"]) == 0 and rec.position is None and "least run cost" in rec.text


def test_groups_gpu_provider_and_instance(tmp_path):
    t = _trials()
    assert group_kinds(t) == ["gpu", "provider", "instance"]
    assert list(group_values(t, "provider")) == ["owned", "owned", "aws", "aws", "gcp", "owned", "azure", "owned"]
    assert group_values(t, "instance")[4] == "gcp-a3-megagpu-8g" and group_values(t, "instance")[0] == "owned"
    no_instance = t.drop(columns=["instance", "pricing"])
    assert group_values(no_instance, "provider")[2] == "cloud"  # rented without naming an instance
    assert group_kinds(no_instance.assign(cost_mode=0.0)) == ["gpu"]


def test_best_design_per_provider_is_its_cheapest_within_the_deadline(tmp_path):
    run = load_run(_run_dir(tmp_path / "run"))
    best = best_per_group(run, "provider").set_index("group")
    assert best.loc["owned", "trial"] == 0 and best.loc["aws", "trial"] == 3 and best.loc["gcp", "trial"] == 4
    assert np.isnan(best.loc["azure", "trial"]) and best.loc["azure", "feasible"] == 0  # only a design past 120 days
    assert list(best.index[:3]) == ["owned", "aws", "gcp"]  # by time to train
    per_gpu = best_per_group(run, "gpu").set_index("group")
    assert per_gpu.loc["b200", "trial"] == 1 and per_gpu.loc["h100-sxm", "trial"] == 0
    assert per_gpu.loc["b200", "on front"] == 2 and per_gpu.loc["h100-sxm", "on front"] == 1
    text = terminal_text(run)
    assert text.startswith("Recommended: 1,024 × h100-sxm, owned, tp 8 × pp 4: time to train 100 days and run cost "
                           "$10M.")  # the decision first
    assert "Why (#3 on the front, 1,024×h100-sxm · pp4)" in text
    assert "best design per provider" in text and "best design per instance" in text
    assert "(none feasible)" in text


def test_the_page_has_capex_run_and_lifetime_cost_columns_and_colours_by_group(tmp_path):
    root = _run_dir(tmp_path / "run")
    paths = write_report(root, with_sensitivity=False, with_png=False)
    html = paths["html"].read_text()
    front = re.search(r'<table class="sortable front">(.*?)</table>', html, flags=re.DOTALL).group(1)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", front)
    for name in ("Capex ($)", "Run cost ($)", "Lifetime cost ($)"):
        assert name in headers, headers
    assert headers.count("Run cost ($)") == 1  # tco_usd, the alias of the objective, is not shown twice
    assert "$60M" in html and "$300M" in html
    assert html.count('<tr class="front-row">') == 3 and html.count('<td class="l rec"') == 1
    for kind in ("gpu", "provider", "instance"):
        assert f'class="legend legend-kind legend-{kind}"' in html and f'data-mode="{kind}"' in html
    assert html.count('<tr class="best-provider-row">') == 4
    assert 'data-provider="' in html and 'data-instance="' in html
    md = paths["md"].read_text()
    assert md.startswith("# hand-made\n\n**Recommended:** 1,024 × h100-sxm, owned, tp 8 × pp 4: time to train 100 days")
    assert "| ★ 1,024×h100-sxm · pp4 |" in md
    assert "| aws | aws-p5.48xlarge 3y reserved |" in md  # every best design has 1,024 h100-sxm

# ------------------------------------------------------------------------------------------- the names


def test_names_carry_the_axes_that_vary_with_units():
    f = pd.DataFrame({"gpu": "h200-sxm", "n_gpus": [8192, 8192, 4096], "precision": "bf16",
                      "gpu_hbm_tbyte_s": [7.999, 4.8, 7.999], "tp": [8, 8, 4], "pp": 8})
    design = ["gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s"]
    assert design_names(f, design) == ["8,192 GPUs · tp8 · HBM 8 TB/s", "8,192 GPUs · tp8 · HBM 4.8 TB/s",
                                       "4,096 GPUs · tp4 · HBM 8 TB/s"]
    assert shared_axes(f, design) == "h200-sxm bf16 · pp8"
    f["gpu"] = ["h200-sxm", "b200", "b200"]
    assert design_names(f, design)[1] == "8,192×b200 · tp8 · HBM 4.8 TB/s"


def test_names_keep_close_values_apart_with_the_fewest_digits():
    f = pd.DataFrame({"gpu": "b200", "n_gpus": 1024, "gpu_hbm_tbyte_s": [7.999, 7.95, 3.35],
                      "nic_gbyte_s": [50.0, 100.0, 50.0], "server_usd_per_gpu": [62375.0, 50000.0, 62375.0]})
    names = design_names(f, ["gpu_hbm_tbyte_s", "nic_gbyte_s", "server_usd_per_gpu"])
    assert names == ["HBM 8 TB/s, NIC 50 GB/s, server $62,375/GPU", "HBM 7.95 TB/s, NIC 100 GB/s, server $50,000/GPU",
                     "HBM 3.35 TB/s, NIC 50 GB/s, server $62,375/GPU"]
    assert not any("7.999" in n for n in names)


def test_names_of_cloud_instances_and_a_single_design():
    t = _trials().iloc[[0, 2, 3]]
    assert design_names(t, ["gpu", "instance", "pricing"]) == [
        "owned", "aws-p5.48xlarge on-demand", "aws-p5.48xlarge 3y reserved"]
    assert design_names(t.iloc[:1], ["gpu", "n_gpus"]) == ["1,024×h100-sxm"]


@pytest.mark.parametrize("v, digits, text", [(7.999, 3, "8"), (1026.4, 4, "1,026"), (999.9, 2, "1,000"),
                                             (0.05404, 2, "0.054"), (16384, 2, "16,384")])
def test_numbers(v, digits, text):
    assert number(v, digits) == text


def test_the_recommendation_says_how_sure_it_is_and_why_the_ground_is_thin(tmp_path):
    """With intervals in the table: the recommended design's (trial 0, 100 days) 80% interval of its first
    objective; at a half-width of 0.6 (> THIN_GROUND_HALF_WIDTH), 'thin ground' with its octaves from the
    validated runs and, on Blackwell (fp4 tensor cores: the shipped intervals widen that generation), the
    widening; a design within 25% says its interval alone."""
    from objectives.training.intervals import load_params

    where = _run_dir(tmp_path / "run")
    t = _trials()
    t["time_to_train_days_lo"], t["time_to_train_days_hi"] = 0.8 * t["time_to_train_days"], 1.6 * t["time_to_train_days"]
    t["interval_half_width_frac"], t["validated_distance_oct"], t["interval_extrapolated"] = 0.6, 4.47, False
    t["gpu_fp8_tflop_s"], t["gpu_fp4_tflop_s"] = 4500.0, 9000.0
    t.to_parquet(where / "trials" / "part-00000.parquet")
    rec = recommend(load_run(where))
    widen = np.exp(load_params()[0]["scale"]["generation"][2])
    assert widen > 1.5
    assert (f"Its 80% interval of time to train is [80 days, 160 days] (-20% to +60%: thin ground, 4.5 octaves from "
            f"the published runs of its software stack; on a GPU generation one published source validates, "
            f"intervals x{number(widen, 2)})") in rec.text
    where = _run_dir(tmp_path / "narrow")
    t["interval_half_width_frac"] = 0.2
    t.to_parquet(where / "trials" / "part-00000.parquet")
    rec = recommend(load_run(where))
    assert "Its 80% interval of time to train is [80 days, 160 days]." in rec.text and "thin ground" not in rec.text
