"""`dse report` on a serving run (dse/report/serving.py, serving_buyer.py): the two serving pictures with
one point per design and their own two-objective fronts (against a brute-force non-dominated set), the
serving columns of the front table, the time per output token split, the sensitivity re-scored by the
serving model, and the recommendation (the cheapest design per token within the space's targets)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.report import write_report
from dse.report.buyer import best_per_group, recommend
from dse.report.data import load_run
from dse.report.display import label, phrase
from dse.report.knee import slo_targets
from dse.report.sensitivity import ranking, sensitivity
from dse.report.serving import DEPLOYMENT_COLUMNS, TABLE_COLUMNS, VIEWS, design_label, tpot_parts, view_front
from dse.report.twins import twin_groups
from dse.spec import load_spec
from dse.sweep import run

ROOT = Path(__file__).resolve().parents[1]


def serving_run(where: Path, space: str = "serving-llama3.3-70b.yaml", trials: int | None = 64, seed: int = 0) -> Path:
    """A real (model-scored) serving sweep of a shipped space, in-process (``trials`` random designs, or
    None: the space's own grid); the sweep writes its report."""
    spec = load_spec(ROOT / "spaces" / space)
    if trials is not None:
        spec = spec.with_search(sampler="random", trials=trials, batch_size=trials, seed=seed)
    return run(spec, run_dir=where, use_ray=False).run_dir


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    return serving_run(tmp_path_factory.mktemp("serving") / "llama")


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory) -> Path:
    """The whole grid (1,664 designs: MTP or not, latency-tuned or not): aggregated and disaggregated designs
    on the front."""
    return serving_run(tmp_path_factory.mktemp("serving") / "deepseek", "serving-deepseek-r1.yaml", trials=None)


def brute_force_front(trials: pd.DataFrame, objectives: dict[str, str]) -> set[int]:
    """The trials no other admissible trial dominates on ``objectives``, by pairwise comparison."""
    ok = trials[trials["admissible"].astype(bool)]
    F = np.column_stack([ok[m].to_numpy(dtype=float) * (1 if d == "min" else -1) for m, d in objectives.items()])
    finite = np.isfinite(F).all(axis=1)
    ok, F = ok[finite], F[finite]
    keep = set()
    for i in range(len(F)):
        dominated = any((F[j] <= F[i]).all() and (F[j] < F[i]).any() for j in range(len(F)) if j != i)
        if not dominated:
            keep.add(int(ok["trial"].iloc[i]))
    return keep


def _figure(html: str, key: str) -> str:
    found = re.search(rf'<figure class="view" id="view-{key}">(.*?)</figure>', html, flags=re.DOTALL)
    assert found, f"no {key} picture"
    return found.group(1)


@pytest.mark.parametrize("which", ["llama", "deepseek"])
def test_two_pictures_one_point_per_design_and_their_fronts(which, request):
    root = request.getfixturevalue(which)
    html = (root / "report.html").read_text()
    r = load_run(root)
    assert r.serving
    for view in VIEWS:
        svg = _figure(html, view.key)
        assert svg.count("<circle ") == len(r.trials)  # every evaluated design, once
        expected = brute_force_front(r.trials, view.objectives)
        assert expected and {int(t) for t in view_front(r.trials, view, r.design_columns)["trial"]} == expected
        # the picture's front points are those designs (the first line of a point's hover text names it)
        titles = re.findall(r'<circle class="front"[^>]*><title>([^\n<]*)', svg)
        by_trial = r.trials.set_index("trial")
        named = {f"{r.name}: {design_label(by_trial.loc[t], r.design_columns)}" for t in expected}
        assert sorted(titles) == sorted(named)


def test_the_throughput_front_trades_throughput_for_each_users_speed(llama):
    """Along the throughput-interactivity front, every step to a faster user costs output tokens per GPU."""
    r = load_run(llama)
    front = view_front(r.trials, VIEWS[0], r.design_columns).sort_values("tokens_per_s_per_user")
    assert len(front) >= 3
    assert (np.diff(front["output_tokens_per_s_per_gpu"].to_numpy()) <= 0).all()


def test_front_table_has_the_serving_columns(deepseek):
    html = (deepseek / "report.html").read_text().replace("<wbr>", "")
    r = load_run(deepseek)
    table = re.search(r'<table class="sortable front serving">(.*?)</table>', html, flags=re.DOTALL).group(1)
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert table.count('<tr class="front-row">') == len(twin_groups(r.front, list(r.objectives)))
    metrics = [c for c in TABLE_COLUMNS if c not in DEPLOYMENT_COLUMNS]
    assert {label(m, r.front[m]) for m in metrics} <= set(headers), headers  # display names with units
    assert "TTFT (ms)" in headers and "TPOT (ms)" in headers and not [h for h in headers if "_" in h]
    # every front design is disaggregated (the prefill pool's mapping searched): serving is said once, in the
    # note, and the prefill pool's GPUs are a column, or said once where every pool has the same (8 GPUs)
    note = re.search(r"Every front design has (.*?)\.</p>", html).group(1)
    said = {c: phrase(c) for c in DEPLOYMENT_COLUMNS}

    def in_note(c: str) -> bool:  # said as one of the note's items ('GPUs' is not 'prefill GPUs')
        return re.search(rf"(?:^|, ){re.escape(said[c])} <b>", note) is not None

    assert label("prefill_gpus") in headers or in_note("prefill_gpus")
    for c in DEPLOYMENT_COLUMNS:  # a deployment column is a column or, one value on the whole front, said once
        shown = label(c, r.front[c] if c in r.front else None) in headers or in_note(c)
        assert shown == (c in r.front), c
        if in_note(c) and c in r.front:
            assert r.front[c].astype(str).nunique() == 1


def test_front_table_shows_serving_intervals_where_the_columns_exist(llama, tmp_path):
    """Today's model gives serving designs their 80% intervals (objectives/serving/intervals.py): each front
    row shows them under TTFT, TPOT, tokens/s per user, output tokens/s per GPU and $/Mtok. Runs scored
    before serving intervals have none (no interval cell); a run whose designs carry ``<metric>_lo`` /
    ``_hi`` of some metrics shows those under each value and draws them as whiskers."""
    html = (llama / "report.html").read_text()
    row = re.search(r'<tr class="front-row">(.*?)</tr>', html, flags=re.DOTALL).group(1)
    assert row.count('<span class="iv">') == 5

    def rewritten(name: str, edit) -> str:
        root = tmp_path / name
        root.mkdir()
        (root / "run.json").write_text((llama / "run.json").read_text())
        trials = pd.read_parquet(llama / "trials")
        trials = edit(trials.drop(columns=[c for c in trials.columns if c.endswith(("_lo", "_hi"))]))
        (root / "trials").mkdir()
        trials.to_parquet(root / "trials" / "part-00000.parquet")
        return root

    before = rewritten("before", lambda t: t)
    page = write_report(before, with_sensitivity=False, with_png=False)["html"].read_text()
    assert '<span class="iv">' not in page

    def three(trials):
        bands = {f"{m}_{end}": trials[m] * k for m in ("ttft_s", "tpot_s", "usd_per_mtok_out")
                 for end, k in (("lo", 0.9), ("hi", 1.2))}
        return pd.concat([trials, pd.DataFrame(bands)], axis=1)

    root = rewritten("run", three)
    page = write_report(root, with_sensitivity=False, with_png=False)["html"].read_text()
    r = load_run(root)
    first = r.front.iloc[0]
    row = re.search(r'<tr class="front-row">(.*?)</tr>', page, flags=re.DOTALL).group(1)
    assert row.count('<span class="iv">') == 3
    assert f'<span class="iv">${first["usd_per_mtok_out"] * 0.9:.3g}–${first["usd_per_mtok_out"] * 1.2:.3g}</span>' in row
    assert '<path class="ebar"' in _figure(page, "cost")  # TTFT and $/Mtok: both axes have intervals


def test_time_per_output_token_splits_into_decode_and_prefill_chunks(llama, deepseek):
    """Hand-derived: pp 2, a 10 ms decode-only step, a 30 ms mixed step in a quarter of the steps: TPOT
    2 (0.75 x 10 + 0.25 x 30) = 30 ms = 2 x 10 (decode) + 2 x 0.25 x 20 (prefill chunks)."""
    one = pd.DataFrame({"pp": [2.0], "step_time_decode_s": [0.010], "step_time_mixed_s": [0.030],
                        "mixed_step_frac": [0.25]})
    np.testing.assert_allclose(tpot_parts(one).iloc[0].to_numpy(), [0.020, 0.010])
    for root in (llama, deepseek):
        front = load_run(root).front
        parts = tpot_parts(front)
        np.testing.assert_allclose(parts.sum(axis=1), front["tpot_s"], rtol=1e-9)
        split = front["serving"] == "disaggregated"
        assert (parts.loc[split, "prefill chunks"] == 0).all()  # the prefill runs on its own pool
        assert (parts.loc[~split & (front["mixed_step_frac"] > 0), "prefill chunks"] > 0).all()
        html = (root / "report.html").read_text()
        assert "time per output token</h2>" in html and html.count('<rect class="seg"') >= len(front)


def test_sensitivity_rescores_with_the_serving_model(llama, tmp_path, capsys):
    r = load_run(llama)
    sens = sensitivity(r)
    assert set(sens["change"]) >= {"HBM bandwidth", "GEMM efficiency", "scale-up bandwidth", "NIC bandwidth",
                                   "server price"}
    assert len(sens) == len(r.front) * sens["change"].nunique()
    by = sens.set_index(["change", "design"])
    # faster GEMMs and HBM never cost a design throughput at its concurrency (the search keeps the best mapping)
    for change in ("GEMM efficiency", "HBM bandwidth"):
        assert (by.loc[change, "output_tokens_per_s_per_gpu"] >= -1e-9).all()
        assert by.loc[change, "output_tokens_per_s_per_gpu"].max() > 0
    # a cheaper server changes no latency and makes every owned design's tokens cheaper
    np.testing.assert_allclose(by.loc["server price", "tokens_per_s_per_user"], 0.0, atol=1e-9)
    assert (by.loc["server price", "usd_per_mtok_out"] > 0).all()
    ranked = ranking(sens, r.objectives)
    assert list(ranked["mean"].dropna()) == sorted(ranked["mean"].dropna(), reverse=True)
    page = write_report(llama, tmp_path, with_png=False)["html"].read_text()
    assert "sensitivity skipped" not in capsys.readouterr().err
    assert page.count('<tr class="sens-row">') == len(ranked)


def test_targets_of_a_serving_space():
    got = slo_targets(["tpot_s <= 0.05", "ttft_s < 2", "tokens_per_s_per_user >= 20", "power_mw <= 3",
                       "tpot_s <= 0.08"], {"tpot_slo_s": 0.04, "ttft_slo_s": None})
    assert got == {"tpot_s": ("<=", 0.04), "ttft_s": ("<", 2.0), "tokens_per_s_per_user": (">=", 20.0)}
    assert slo_targets([], {}) == {}


def test_recommended_is_the_cheapest_per_token_within_the_targets(llama, deepseek):
    for root in (llama, deepseek):
        r = load_run(root)
        rec = recommend(r)
        ok = r.trials[r.trials["admissible"].astype(bool)]
        assert rec.rule == "slo" and rec.row["usd_per_mtok_out"] == ok["usd_per_mtok_out"].min()
        assert "per million output tokens" in rec.text and "tokens/s per user" in rec.text and "TTFT" in rec.text
        for _, best in best_per_group(r, "gpu").iterrows():  # each GPU's cheapest admissible design per token
            mine = ok[ok["gpu"] == best["group"]]
            if len(mine):
                assert best["usd_per_mtok_out"] == mine["usd_per_mtok_out"].min()
    rec = recommend(load_run(llama))
    assert "targets, TPOT at most 50 ms (20 tokens/s per user or more)" in rec.text
    assert recommend(load_run(deepseek)).text.count("TTFT at most 2 s") == 1


def test_markdown_has_the_serving_pictures(llama):
    md = (llama / "report.md").read_text()
    assert "![Serving fronts](report-serving.png)" in md
    png = (llama / "report-serving.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    # TTFT in ms, or in s where a front design waits seconds (dse/report/display.py picks the unit per column)
    assert re.search(r"\| TTFT \((ms|s)\) \| TPOT \(ms\) \| Speed per user \(tokens/s\) \|", md)
    assert md.split("\n\n")[1].startswith("**Recommended:** ")  # the decision first
    assert "## Which hardware change pays most" in md
