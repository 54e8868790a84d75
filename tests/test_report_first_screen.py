"""The reader's first minute: the title is the space's question; one sentence names the recommended design
(GPU, count, precision, owned or rented, mapping) with its objectives' 80% intervals; labels are display
names with units; near-twins are one row; a swept catalog field's effect is a table; infeasibility is
counted in distinct designs everywhere, every kind said."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import small_run

from dse.report.buyer import recommend, terminal_text
from dse.report.data import infeasible_kinds, load_run, more_kinds, why_infeasible
from dse.report.display import DISPLAY, axis_title, label, tick_text, unit_for, value_text
from dse.report.facets import facets
from dse.report.headline import decision
from dse.report.swept_hardware import effect_table, swept_fields
from dse.report.twins import TWIN_TOLERANCE, is_twin, twin_groups, twin_note
from dse.spec import load_spec
from dse.sweep import run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_dir(tmp_path_factory) -> Path:
    """spaces/default.yaml as shipped (4,096 designs, ~6 s), without its report."""
    spec = load_spec(ROOT / "spaces" / "default.yaml")
    return run(spec, run_dir=tmp_path_factory.mktemp("default") / "run", use_ray=False, report=False).run_dir


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory) -> Path:
    return small_run(tmp_path_factory.mktemp("first") / "run", trials=96)


def test_every_objective_of_a_shipped_space_has_a_display_name_with_a_unit():
    metrics = {o.metric for path in sorted((ROOT / "spaces").glob("*.yaml")) for o in load_spec(path).objectives}
    assert {"time_to_train_days", "run_cost_usd", "usd_per_mtok_out", "tokens_per_s_per_user"} <= metrics
    for m in sorted(metrics):
        assert m in DISPLAY, m
        assert DISPLAY[m].unit, m
        assert "_" not in label(m) and label(m).endswith(")"), label(m)
    assert label("time_to_train_days") == "Time to train (days)" and label("run_cost_usd") == "Run cost ($)"
    assert label("tpot_s") == "TPOT (ms)" and label("ttft_s", [0.1249]) == "TTFT (ms)"
    assert label("power_mw", [0.001641]) == "Power (kW)" and label("power_mw", [12.0]) == "Power (MW)"
    assert value_text("ttft_s", 0.1249) == "125 ms" and value_text("power_mw", 0.001641) == "1.64 kW"
    assert axis_title("run_cost_usd", "min") == "Run cost ($), ↓ better"
    assert axis_title("tokens_per_s_per_user", "max") == "Speed per user (tokens/s), ↑ better"
    assert tick_text("run_cost_usd", 2e6) == "$2M" and tick_text("ttft_s", 0.05, unit_for("ttft_s", [0.1])) == "50"


def test_the_default_runs_headline_names_gpu_count_precision_ownership_and_intervals(default_dir):
    r = load_run(default_dir)
    rec = recommend(r)
    sentence = rec.decision.sentence
    assert sentence.startswith("Recommended: 4,096 × gb200, owned, fp8, dp 1,024 × tp 4 × pp 1, ZeRO-1: "), sentence
    t, lo, hi = (rec.row[f"time_to_train_days{s}"] for s in ("", "_lo", "_hi"))
    assert 10.0 < t < 16.0  # the knee of Llama 3 70B on 15T tokens at 4,096 GB200 (13.0 days on 2026-12-03)
    assert f"time to train {t:.3g} days (80% interval {lo:.3g}–{hi:.3g} days)" in sentence
    assert f"run cost ${rec.row['run_cost_usd'] / 1e6:.3g}M (80% interval $" in sentence
    below, above = round((1.0 - lo / t) * 100.0), round((hi / t - 1.0) * 100.0)
    assert rec.decision.caveat.startswith(f"Thin ground: the 80% interval of time to train is -{below}% to +{above}%")
    text = terminal_text(r)
    assert text.startswith("Recommended: 4,096 × gb200, owned, fp8")  # the terminal's closing lines: decision first


def test_near_twins_are_one_row_and_the_neighbour_comparison_skips_them(default_dir):
    r = load_run(default_dir)
    objectives = list(r.objectives)
    rec = recommend(r)
    groups = twin_groups(r.front, objectives, keep=rec.position - 1)
    assert len(groups) < len(r.front)  # the default front's storage-tier pairs, 0.01% apart
    mine = next(g for g in groups if rec.position - 1 in g)
    assert mine[0] == rec.position - 1 and len(mine) == 2
    twin = mine[1]
    values = r.front[objectives].to_numpy()
    assert is_twin(values[mine[0]], values[twin]) and not is_twin(values[0], values[-1])
    names = [str(i) for i in range(len(r.front))]
    assert twin_note(names, mine).startswith(f"and 1 more alike: #{twin + 1}")
    # "against #k": never the twin
    assert f"Against #{twin + 1} " not in rec.text and "Against #" in rec.text
    assert TWIN_TOLERANCE == 0.005


def test_twin_tolerance_is_relative_on_every_objective():
    front = pd.DataFrame({"a": [10.0, 10.04, 10.2], "b": [100.0, 99.9, 90.0]})
    assert twin_groups(front, ["a", "b"]) == [[0, 1], [2]]
    assert twin_groups(front, ["a", "b"], keep=1) == [[1, 0], [2]]
    assert not is_twin([1.0, np.nan], [1.0, np.nan])


def test_a_swept_catalog_field_is_a_colour_and_an_effect_table(small_dir):
    r = load_run(small_dir)
    assert swept_fields(r) == ["gpu_hbm_tbyte_s", "nic_gbyte_s"]
    fac = facets([r])
    assert "gpu_hbm_tbyte_s" in fac.kinds and fac.values["gpu_hbm_tbyte_s"][0] == "HBM 2 TB/s"
    header, rows, baseline = effect_table(r, "gpu_hbm_tbyte_s")
    assert header[:4] == ["HBM bandwidth (TB/s)", "best design", "designs", "feasible"]
    assert header[-2:] == ["Time to train change (%)", "Run cost change (%)"]
    assert rows[0][0] == "as catalogued" and rows[0][-2:] == [0.0, 0.0]
    assert baseline.startswith("each GPU's catalog value")
    values = sorted(r.trials["gpu_hbm_tbyte_s"].unique())
    assert [row[0] for row in rows[1:]] == [f"HBM {v:g} TB/s" for v in values]
    assert sum(row[2] for row in rows[1:]) == len(r.trials)
    html = (small_dir / "report.html").read_text()
    assert "What HBM bandwidth (TB/s) buys" in html and 'data-mode="gpu_hbm_tbyte_s"' in html
    md = (small_dir / "report.md").read_text()
    assert "What `gpu_hbm_tbyte_s` buys" in md and "| as catalogued |" in md


def test_the_page_puts_the_decision_first_in_display_names(small_dir):
    html = (small_dir / "report.html").read_text()
    title = re.search(r"<h1>(.*?)</h1>", html).group(1)
    assert title == "Llama 3 8B on 1T tokens, small enough for the exhaustive grid"
    head = html.index('<p class="headline recommend"')
    assert head < html.index('id="best-gpu"') < html.index('<h2 id="front">')  # sentence, table, then plots
    rec = recommend(load_run(small_dir))
    assert rec.decision.sentence.split(": ", 1)[1][:30] in html[head:head + 600]
    axes = re.findall(r'class="axis"[^>]*>([^<]*)<', html)
    assert axes and not [a for a in axes if "_" in a or "(min)" in a], axes
    assert "↓ better" in axes[0]
    assert re.search(r'class="tick" text-anchor="end">\$[0-9.]+k<', html)  # dollars on the cost axis
    md = (small_dir / "report.md").read_text()
    assert md.startswith(f"# {title}\n\n**Recommended:** ")


def test_infeasible_designs_are_counted_distinct_and_every_kind_said(small_dir, capsys):
    from dse.commands.sweep import SHOWN_KINDS, _print_why_infeasible
    from dse.store import RunStore

    r = load_run(small_dir)
    kinds = infeasible_kinds(r.trials, constraints=r.info["spec"].get("constraints") or ())
    assert sum(k[1] for k in kinds) == int((~r.trials["admissible"].astype(bool)).sum())
    _print_why_infeasible(RunStore(small_dir))
    out = capsys.readouterr().out
    assert f"{sum(k[1] for k in kinds):,} of {len(r.trials):,} distinct designs" in out
    for kind, n, _ in kinds[:SHOWN_KINDS]:
        assert f"{n:>7,}  {kind}" in out
    frame = pd.DataFrame({"admissible": [False] * 10, "infeasible_reason": [f"kind {chr(97 + i)}: x" for i in range(10)]})
    every = infeasible_kinds(frame)
    assert len(every) == 10 and len(why_infeasible(frame)) == 8
    assert more_kinds(every, 8) == "and 2 more kinds (2 designs)" and more_kinds(every, 10) == ""


def test_overlaid_recommended_labels_do_not_collide():
    from dse.report.svg import _recommended

    taken: list = []
    one = _recommended(np.array([100.0]), np.array([100.0]), np.array([True]), "a", 500, "recommended (a)", taken)
    two = _recommended(np.array([102.0]), np.array([101.0]), np.array([True]), "b", 500, "recommended (b)", taken)
    y1 = float(re.search(r'<text x="[^"]+" y="([^"]+)"', one).group(1))
    y2 = float(re.search(r'<text x="[^"]+" y="([^"]+)"', two).group(1))
    assert abs(y2 - y1) >= 13


def test_a_serving_headline_speaks_serving_units():
    row = pd.Series({"gpu": "gb200", "n_gpus": 1, "precision": "fp4", "kv_precision": "fp8", "tp": 1, "pp": 1,
                     "serving": "aggregated", "concurrency": 256, "usd_per_mtok_out": 0.118,
                     "usd_per_mtok_out_lo": 0.0973, "usd_per_mtok_out_hi": 0.146, "tokens_per_s_per_user": 24.8,
                     "tpot_s": 0.0402, "ttft_s": 0.0958})
    said = decision({"usd_per_mtok_out": "min", "tokens_per_s_per_user": "max"}, row, serving=True)
    assert said.sentence == ("Recommended: 1 × gb200, owned, fp4 weights, fp8 KV cache, tp 1 × pp 1, aggregated, "
                             "256 requests in flight: cost per M output tokens $0.118 (80% interval $0.0973–$0.146), "
                             "speed per user 24.8 tokens/s, TPOT 40.2 ms and TTFT 95.8 ms.")
    assert said.caveat == ""


def test_a_serving_headline_names_the_deployment_options():
    """What dse launch writes beyond the mapping is in the sentence a deployer reads: the speculation and its
    draft length, expert tensor parallelism, the latency-tuned step, the expert load balancer and its copies;
    none of them where not taken (the headline above)."""
    row = pd.Series({"gpu": "gb200", "n_gpus": 32, "precision": "fp4", "kv_precision": "fp8", "tp": 1, "pp": 1,
                     "ep": 16, "attn_dp": 32, "etp": 2, "serving": "disaggregated", "spec_decode": "mtp",
                     "spec_tokens": float("nan"), "spec_draft_tokens": 3.0, "latency_tuned": 1, "eplb": 1,
                     "redundant_experts": 32, "concurrency": 512, "usd_per_mtok_out": 0.4})
    said = decision({"usd_per_mtok_out": "min"}, row, serving=True)
    assert said.sentence == (
        "Recommended: 32 × gb200, owned, fp4 weights, fp8 KV cache, tp 1 × pp 1 × ep 16 × attention dp 32, "
        "disaggregated, mtp speculative decoding, 3 draft tokens, expert tensor parallelism 2, latency-tuned, "
        "expert load balancer, 32 redundant experts, 512 requests in flight: cost per M output tokens $0.4.")

