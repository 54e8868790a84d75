"""`dse report`: the page's content (front points, table rows, breakdown, sensitivity), self-containment,
size, the Markdown summary, overlays of several runs and the hook at the end of `dse sweep`."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.cli import main
from dse.report.breakdown import breakdown
from dse.report.data import load_run
from dse.report.sensitivity import design_table, ranking, sensitivity
from dse.report.twins import twin_groups
from dse.spec import load_spec
from dse.sweep import run

ROOT = Path(__file__).resolve().parents[1]


def small_run(where: Path, seed: int = 0, trials: int = 48, report: bool | None = None) -> Path:
    """A real (model-scored) run of spaces/small.yaml, in-process; its report is written by the sweep."""
    spec = load_spec(ROOT / "spaces" / "small.yaml").with_search(sampler="random", trials=trials, batch_size=trials,
                                                                 seed=seed)
    return run(spec, run_dir=where, use_ray=False, report=report).run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return small_run(tmp_path_factory.mktemp("report") / "run")


def test_sweep_writes_the_report(run_dir):
    for name in ("report.html", "report.md", "report-front.png", "report-breakdown.png"):
        assert (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0, name


def test_page_shows_every_front_point_and_row(run_dir):
    html = (run_dir / "report.html").read_text()
    front = pd.read_parquet(run_dir / "pareto.parquet")
    assert len(front) >= 1
    assert html.count('<circle class="front"') == len(front)
    run = load_run(run_dir)
    assert html.count('<tr class="front-row">') == len(twin_groups(run.front, list(run.objectives)))  # twins: a row
    n_designs = len(load_run(run_dir).trials)
    assert html.count("<circle ") == n_designs  # two objectives: one panel, one point per design
    # each point names its design and mapping on hover
    first = front.sort_values("time_to_train_days").iloc[0]
    assert re.search(rf"<title>small: {first['gpu']} [^<]*\ndp[0-9,]+ tp{int(first['tp'])} ", html)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", html)  # display names with units, no column names
    for name in ("Time to train (days)", "Run cost ($)", "Capex ($)", "Lifetime cost ($)", "MFU (%)",
                 "HBM used (GB/GPU)", "Goodput (%)"):
        assert name in headers, headers
    assert "Power (kW)" in headers or "Power (MW)" in headers, headers
    assert not [h for h in headers if "_" in h], headers
    assert html.count('<rect class="seg"') >= len(front)  # a stacked bar per front design
    assert html.count('<tr class="sens-row">') >= 5


def test_page_is_self_contained(run_dir):
    html = (run_dir / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html


def test_report_size_scales_to_the_default_sweep(run_dir):
    """The default sweep has 8,192 designs: at this run's bytes per point its page stays under 10 MB."""
    html = (run_dir / "report.html").read_text()
    points = re.findall(r"<circle .*?</circle>", html, flags=re.DOTALL)
    per_point = sum(map(len, points)) / len(points)
    rest = len(html) - sum(map(len, points))
    assert rest + per_point * 8192 < 6e6, (rest, per_point)


def test_breakdown_sums_to_step_time_plus_goodput_losses(run_dir):
    r = load_run(run_dir)
    parts = breakdown(r.front)
    step = r.front["step_time_s"].to_numpy()
    losses = [c for c in parts.columns if c in ("checkpoint stalls", "failure rework", "failure restarts",
                                                 "planned maintenance")]
    np.testing.assert_allclose(parts.drop(columns=losses).sum(axis=1), step, rtol=1e-6)
    np.testing.assert_allclose(parts.sum(axis=1), step / r.front["goodput"].to_numpy(), rtol=1e-6)


def test_sensitivity_is_the_model_with_better_hardware(run_dir):
    r = load_run(run_dir)
    table = design_table(r, r.front)
    assert set(table) >= {"model", "gpu", "n_gpus", "precision", "gpu_hbm_tbyte_s", "nic_gbyte_s"}
    sens = sensitivity(r)
    assert set(sens["change"]) >= {"HBM bandwidth", "NIC bandwidth", "GEMM efficiency", "server price",
                                   "scale-up bandwidth", "scale-up size"}
    assert len(sens) == len(r.front) * sens["change"].nunique()
    by = sens.set_index(["change", "design"])
    # faster GEMMs never slow a design; a cheaper server never changes the time and never raises the cost
    assert (by.loc["GEMM efficiency", "time_to_train_days"].dropna() >= -1e-9).all()
    assert by.loc["GEMM efficiency", "time_to_train_days"].max() > 0
    np.testing.assert_allclose(by.loc["server price", "time_to_train_days"].dropna(), 0.0, atol=1e-9)
    assert (by.loc["server price", "run_cost_usd"].dropna() > 0).all()
    ranked = ranking(sens, r.objectives)
    assert list(ranked["mean"].dropna()) == sorted(ranked["mean"].dropna(), reverse=True)


def test_markdown_summary(run_dir):
    md = (run_dir / "report.md").read_text()
    front = pd.read_parquet(run_dir / "pareto.parquet")
    assert "![Pareto front](report-front.png)" in md and "![time per step](report-breakdown.png)" in md
    table_rows = [ln for ln in md.splitlines() if re.match(r"\| \d+ \| ", ln)]
    assert len(table_rows) >= len(front)
    assert "Which hardware change pays most" in md


def test_cli_overlays_several_runs(run_dir, tmp_path, capsys):
    other = small_run(tmp_path / "other", seed=1, trials=16, report=False)
    out = tmp_path / "cmp"
    assert main(["report", str(run_dir), str(other), "--out", str(out), "--no-sensitivity"]) == 0
    assert "report.html" in capsys.readouterr().out
    html = (out / "report.html").read_text()
    fronts = [len(load_run(d).front) for d in (run_dir, other)]
    assert html.count('<circle class="front"') == sum(fronts)
    assert html.count('<tr class="front-row">') == sum(len(twin_groups(load_run(d).front, list(load_run(d).objectives)))
                                                       for d in (run_dir, other))
    assert 'data-run="run"' not in html or html.count("<g class=\"front\"") == 2
    assert html.count('<g class="front"') == 2  # one front per run, in its own colour
    # the title is the space's question, then the runs compared
    assert "<h1>Llama 3 8B on 1T tokens, small enough for the exhaustive grid (run vs other)</h1>" in html
    assert html.count('class="rec-label"') == 2  # each run's recommended design labelled


def test_cli_rejects_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_charts_survive_values_far_outside_physics():
    """A what-if space can drive objectives to 1e280 or infinity: no NaN or infinite SVG attribute (the
    browser logs those as errors), and such points are left out rather than drawn off the canvas."""
    from dse.report import svg

    x = np.array([1.0, 2.0, np.inf, 1e280, np.nan])
    y = np.array([3.0, 1.0, 2.0, 5.0, 1.0])
    kind = np.array(["front", "front", "dominated", "dominated", "infeasible"])
    out = svg.scatter("a", "b", [dict(label="r", colour="#000", x=x, y=y, kind=kind, title=list("abcde"))])
    out += svg.stacked_bars(["d1", "d2"], {"compute": np.array([1.0, np.inf]), "bubble": np.array([np.nan, 0.5])},
                            {"compute": "#111"})
    assert not re.search(r'="[^"]*(nan|inf)[^"]*"', out)
    assert out.count("<circle ") == 2


def test_sweep_keeps_the_intervals_and_the_page_draws_them(run_dir):
    """Every trial part carries the 80% intervals (objectives.training.intervals); the front's whiskers and the table's
    intervals come from them."""
    parts = sorted((run_dir / "trials").glob("*.parquet"))
    assert parts
    columns = set(pd.read_parquet(parts[0]).columns)
    for name in ("tokens_per_s_per_gpu", "step_time_s", "time_to_train_days", "run_cost_usd", "tco_usd", "energy_mwh",
                 "usd_per_mtok"):
        assert {f"{name}_lo", f"{name}_hi"} <= columns, name
    assert {"validated_distance_oct", "interval_extrapolated"} <= columns
    front = pd.read_parquet(run_dir / "pareto.parquet")
    assert (front["time_to_train_days_lo"] < front["time_to_train_days"]).all()
    assert (front["run_cost_usd"] < front["run_cost_usd_hi"]).all()
    html = (run_dir / "report.html").read_text()
    assert html.count('<path class="ebar"') == 1  # one panel, one run
    assert html.count('<span class="iv">') >= 2 * len(front)  # both objectives' intervals per front row
