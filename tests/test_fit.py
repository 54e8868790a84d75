"""Which factors a fit frees (objectives.fitting.fit.plan): read from the fitted runs' sensitivities, not by hand.

The published runs: megatron-core is Megatron-Bridge's stack alone, and every MoE run is Megatron-Bridge's
(training_runs.csv), so without that source no run informs megatron-core's two factors or the two MoE
factors, and every other factor keeps runs of its own.
"""

from __future__ import annotations

import numpy as np
import pytest

from objectives.calibration import STACKS, Calibration
from objectives.fitting.fit import BOX, PRIOR_SD_LOG, RUN_SD_LOG, fit_factors, label, plan, sensitivity
from objectives.fitting.validation import load_runs, predict, source_of

MB_ONLY = {"kernel_overhead_s[megatron-core]", "attn_kernel_scale[megatron-core]", "moe_expert_overhead_s"}


@pytest.fixture(scope="module")
def runs():
    return load_runs()


@pytest.fixture(scope="module")
def jac(runs):
    return sensitivity(runs, Calibration())


def test_every_factor_is_informed_by_the_published_runs(runs, jac):
    p = plan(runs, Calibration(), jac=jac)
    assert len(p.free) == len(BOX) and not p.prior_weight.any()
    # a stack's factors are informed by that stack's runs, and only by them
    stack = runs["stack"].to_numpy()
    for j, (_, idx, _, _) in enumerate(BOX):
        if idx is not None:
            moved = np.abs(jac[:, j]) > 1e-6
            assert set(stack[moved]) == {STACKS[idx]}, label(j)
    moe = runs["moe_experts"].fillna(0).to_numpy() > 0
    for name in ("moe_expert_overhead_s",):
        j = [label(k) for k in range(len(BOX))].index(name)
        assert np.all(moe[np.abs(jac[:, j]) > 1e-6])
    j = [label(k) for k in range(len(BOX))].index("tp_comm_exposed")
    tp = predict(runs)["model_tp"].to_numpy()  # as given, or as the model chose it where blank
    assert np.all(tp[np.abs(jac[:, j]) > 1e-6] > 1)


def test_without_megatron_bridge_its_three_factors_are_fixed(runs, jac):
    held = (runs["source_key"].map(source_of) == "megatron-bridge").to_numpy()
    p = plan(runs[~held].reset_index(drop=True), Calibration(), jac=jac[~held])
    fixed = {label(j) for j in range(len(BOX)) if p.status(j) == "fixed"}
    assert fixed == MB_ONLY
    assert p.informing_runs[[label(j) in MB_ONLY for j in range(len(BOX))]].sum() == 0


def test_a_factor_informed_by_one_or_two_runs_gets_the_prior(runs, jac):
    """Two tp > 1 runs of one source: tp_comm_exposed is free with a prior of weight
    RUN_SD_LOG / PRIOR_SD_LOG x the runs' weight (1 / sqrt(runs of the source))."""
    key = runs["source_key"].map(source_of)
    nemo = (key == "nemo-24.07").to_numpy()
    tp = runs["tp"].to_numpy() > 1
    keep = nemo & ~tp
    keep[np.flatnonzero(nemo & tp)[:2]] = True
    p = plan(runs[keep].reset_index(drop=True), Calibration(), jac=jac[keep])
    j = [label(k) for k in range(len(BOX))].index("tp_comm_exposed")
    assert p.informing_runs[j] == 2 and p.status(j) == "prior"
    assert p.prior_weight[j] == pytest.approx(RUN_SD_LOG / PRIOR_SD_LOG / np.sqrt(keep.sum()))


def test_a_fixed_factor_keeps_its_start_value_exactly(runs):
    """Fitting only pytorch-fsdp's overhead on two MosaicML runs moves it and nothing else."""
    two = runs[runs["source_key"] == "mosaic-h100-fp8"].head(3).reset_index(drop=True)
    start = Calibration.load()
    fitted = fit_factors(two, start, factors=["kernel_overhead_s[pytorch-fsdp]"], max_nfev=30)
    assert [label(j) for j in fitted.plan.free] == ["kernel_overhead_s[pytorch-fsdp]"]
    changed = {k for k, v in fitted.cal.fitted().items() if v != start.fitted()[k]}
    assert changed == {"kernel_overhead_s"}
    assert fitted.cal.kernel_overhead_s[:3] == start.kernel_overhead_s[:3]
