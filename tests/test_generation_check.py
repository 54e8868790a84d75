"""Leave one GPU generation out (objectives.fitting.generation_check) and the per-generation widening of the
intervals (objectives.fitting.interval_fit.generation_terms), on small hand-made tables; `dse validate`'s tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from objectives.fitting import coverage, interval_fit
from objectives.fitting import fit as fit_module
from objectives.fitting.generation_check import generation_summary, generation_text, hold_out_generation, run_generations
from objectives.fitting.validation import load_runs, source_of
from tests.cli_run import run_cli


@pytest.fixture(scope="module")
def small():
    """Two runs each of: Narayanan Table 1 (Ampere, megatron-2021), MosaicML A100-80GB (Ampere, pytorch-fsdp),
    MosaicML H100 bf16 (Hopper, pytorch-fsdp)."""
    runs = load_runs()
    keys = runs["source_key"].map(source_of)
    parts = [runs[(keys == k).to_numpy()].head(2) for k in ("narayanan21-table1", "mosaic-a100-80gb", "mosaic-h100-bf16")]
    return pd.concat(parts, ignore_index=True)


def test_generation_of_each_run_from_its_gpu(small):
    assert list(run_generations(small)) == ["ampere"] * 4 + ["hopper"] * 2
    gpus = pd.DataFrame({"gpu": ["a100-sxm-40gb", "h100-sxm", "h200-sxm", "b200", "gb300"]})
    assert list(run_generations(gpus)) == ["ampere", "hopper", "hopper", "blackwell", "blackwell"]


def test_a_generation_is_held_out_whole_and_fits_no_factor(small, monkeypatch):
    seen = []
    real = fit_module.fit_factors

    def spy(runs, *args, **kwargs):
        seen.append(list(runs["run_id"]))
        return real(runs, *args, **kwargs)

    monkeypatch.setattr(fit_module, "fit_factors", spy)
    result, fold, unseen = hold_out_generation(small, "ampere", max_nfev=30)
    # predicted: exactly the Ampere runs; fitted: exactly the others, in one fit (no refit on Ampere runs)
    assert list(result["run_id"]) == list(small["run_id"][:4])
    assert seen == [list(small["run_id"][4:])]
    # megatron-2021 is on Ampere alone: its two factors stay at the default, and are named
    assert set(unseen) == {"kernel_overhead_s[megatron-2021]", "attn_kernel_scale[megatron-2021]"}
    k = fit_module.STACKS.index("megatron-2021")
    assert fold.cal.kernel_overhead_s[k] == fit_module.Calibration().kernel_overhead_s[k]
    # the held-out runs' measurements do not move the fold's factors
    moved = small.copy()
    moved.loc[:3, "measured_tokens_per_s_per_gpu"] *= 2.0
    _, fold2, _ = hold_out_generation(moved, "ampere", max_nfev=30)
    assert fold2.cal == fold.cal
    np.testing.assert_allclose(fold2.x, fold.x)


def _residuals(gens, sources, log_ratio):
    return pd.DataFrame({"generation": gens, "source": sources, "log_ratio": np.log(log_ratio)})


def test_summary_per_generation_on_a_hand_made_table():
    """Ampere: source a (errors +10%, -20%), source b (+30%); Blackwell: source c (+50%, -50%, 0)."""
    res = _residuals(["ampere"] * 3 + ["blackwell"] * 3, list("aabccc"), [1.1, 0.8, 1.3, 1.5, 0.5, 1.0])
    inside = np.array([True, False, True, True, False, False])
    t = generation_summary(res, inside)
    assert list(t.index) == ["ampere", "blackwell", "all"]
    assert t.loc["ampere", "runs"] == 3 and t.loc["ampere", "sources"] == 2
    assert t.loc["ampere", "mape_source_weighted"] == pytest.approx((0.15 + 0.30) / 2)
    assert t.loc["ampere", "mape"] == pytest.approx(0.6 / 3)
    assert t.loc["ampere", "bias"] == pytest.approx(0.2 / 3)
    assert t.loc["ampere", "coverage"] == pytest.approx(2 / 3)
    assert t.loc["ampere", "coverage_source_weighted"] == pytest.approx((0.5 + 1.0) / 2)
    assert t.loc["blackwell", "mape"] == pytest.approx(1.0 / 3) and t.loc["blackwell", "coverage"] == pytest.approx(1 / 3)
    assert t.loc["all", "runs"] == 6 and t.loc["all", "coverage"] == pytest.approx(0.5)
    t["coverage_widened"] = t["coverage"]
    text = generation_text(t)
    assert "blackwell" in text and "33%" in text and "widened" in text


def test_widening_needed_per_row():
    """Interval [-0.1, 0.2] of the log ratio: +0.4 needs x2, -0.05 is inside (x0.5), -0.3 needs x3."""
    res = pd.DataFrame({"log_ratio": [0.4, -0.05, -0.3]})
    np.testing.assert_allclose(interval_fit.needed_widening(res, np.full(3, -0.1), np.full(3, 0.2)), [2.0, 0.5, 3.0])


@pytest.fixture(scope="module")
def stored():
    res = interval_fit.read_residuals()
    one_source = [g for g in ("ampere", "hopper", "blackwell")
                  if 0 < res.loc[res["generation"] == g, "source"].nunique() < interval_fit.MIN_SOURCES]
    if not one_source:
        pytest.skip("no generation of a single source in the stored residuals")
    return res, one_source[0]


def test_a_one_source_generation_takes_its_term_from_the_held_out_generation(stored):
    """The leave-one-generation-out residuals of a one-source generation three times the leave-one-source-out
    ones: its term widens its intervals until 80% of them are inside; the other generations' terms are read
    from their leave-one-source-out rows and do not change."""
    res, gen = stored
    rows = (res["generation"] == gen).to_numpy()
    logo = res.copy()
    logo.loc[rows, "log_ratio"] *= 3.0
    base, params = interval_fit.derive(res), interval_fit.derive(res, logo=logo)
    code = ("ampere", "hopper", "blackwell").index(gen)
    assert params["generation_basis"][code] == "logo" and base["generation_basis"][code] == "loso"
    assert params["scale"]["generation"][code] > base["scale"]["generation"][code] + np.log(2.0)
    others = [k for k in range(3) if k != code]
    np.testing.assert_allclose(np.array(params["scale"]["generation"])[others], np.array(base["scale"]["generation"])[others])
    assert min(params["scale"]["generation"]) >= 0.0  # a term never narrows
    # in-sample: at least 80% of the generation's held-out-generation runs inside their widened interval
    held = logo[rows].reset_index(drop=True)
    c = interval_fit._columns(held)
    keys = interval_fit.ground_keys(interval_fit.ground_of(res))
    lo, hi = interval_fit.bands(held, params, interval_fit.distance_oct(interval_fit.feature_octaves(c), c["stack"], keys))
    r = held["log_ratio"].to_numpy()
    # the widening is the weighted 80% quantile of the needed factors, interpolated between two runs: one run
    # at most may fall on the wrong side of it
    assert np.mean((r >= lo) & (r <= hi)) >= 0.8 - 1.0 / len(r) - 1e-9


def test_coverage_per_generation_counts_each_generation_and_gpu(stored):
    res, gen = stored
    logo = res.copy()
    table = coverage.generation_coverage(res, logo)
    gens = [g for g in ("ampere", "hopper", "blackwell") if (res["generation"] == g).any()]
    assert [g for g in table.index if not g.startswith(" ") and g != "all"] == gens
    for g in gens:
        assert table.loc[g, "runs"] == (res["generation"] == g).sum()
    gpus = sorted(res.loc[res["generation"] == gen, "gpu"].unique())
    assert [f"  {x}" for x in gpus] == [i for i in table.index if i.startswith("  ")]
    assert table.loc["all", "runs"] == len(res)
    per_run = coverage.nested(res, logo)
    assert table.loc["all", "left_out_source"] == pytest.approx(per_run["inside"].mean())
    assert table.loc[gen, "left_out_source"] == pytest.approx(per_run.loc[(res["generation"] == gen).to_numpy(), "inside"].mean())


def test_validate_prints_error_and_coverage_per_generation(capsys):
    rc, out, err = run_cli(capsys, "validate")
    assert rc == 0, err
    lines = out.splitlines()
    head = lines.index(next(x for x in lines if x.startswith("generation") and "sources" in x))
    assert [x.split()[0] for x in lines[head + 2:head + 5]] == ["ampere", "hopper", "blackwell"]
    assert "megatron-bridge, per GPU (in-sample):" in out
    gpu_head = lines.index("megatron-bridge, per GPU (in-sample):") + 1
    assert lines[gpu_head].split()[:2] == ["gpu", "runs"]
    assert any(x.split()[0] == "b200" for x in lines[gpu_head + 2:gpu_head + 10])
    assert "Held-out coverage per GPU generation" in out and "source out" in out
