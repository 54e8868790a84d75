"""`dse calibrate` (objectives.fitting.own_runs): factors recovered from runs made with known ones, the calibration file,
its use by `dse evaluate --calibration` and a space's `calibration:`, and one line with exit 2 for bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_run import run_cli as _run

import objectives
from dse.errors import UserError
from dse.spec import parse_spec
from objectives.calibration import Calibration
from objectives.fitting.fit import label
from objectives.fitting.own_runs import calibrate
from objectives.fitting.validation import predict

SHIPPED = Calibration.load()
#: megatron-core's per-layer overhead halved (about), its attention kernels and the exposed TP share changed
TRUE = SHIPPED.replace(kernel_overhead_s=(1.5e-4,) + SHIPPED.kernel_overhead_s[1:],
                       attn_kernel_scale=(1.1,) + SHIPPED.attn_kernel_scale[1:], tp_comm_exposed=0.5)
ASKED = ["kernel_overhead_s", "attn_kernel_scale", "tp_comm_exposed"]


def designs() -> pd.DataFrame:
    """36 dense designs on H100 with Megatron-Core, every mapping given: 7B to 175B, tp 1-8, pp 1-8, 2k and 4k."""
    rows = []
    for model, n, tps, pps, gb in (("llama2-7b", 8, (1, 2), (1,), 128), ("llama3-8b", 16, (1, 2, 4), (1, 2), 256),
                                   ("llama2-13b", 32, (2, 4), (1, 2), 256), ("llama3-70b", 64, (4, 8), (2, 4), 512),
                                   ("gpt3-175b", 128, (8,), (4, 8), 512)):
        for tp in tps:
            for pp in pps:
                for seq in (2048, 4096):
                    rows.append(dict(model=model, gpu="h100-sxm", n_gpus=n, tp=tp, pp=pp, micro_batch=1,
                                     global_batch=gb, seq_len=seq, precision="bf16", stack="megatron-core",
                                     recompute="selective"))
    return pd.DataFrame(rows)


def measured(runs: pd.DataFrame, cal: Calibration, seed: int = 14, noise: float = 0.03) -> np.ndarray:
    """The runs' throughput under ``cal`` times exp(N(0, noise)) (fixed seed)."""
    runs = runs.assign(measured_tokens_per_s_per_gpu=np.nan)
    pred = predict(runs, cal)["predicted_tokens_per_s_per_gpu"].to_numpy()
    return pred * np.exp(np.random.default_rng(seed).normal(0.0, noise, len(runs)))


@pytest.fixture(scope="module")
def recovered():
    runs = designs().assign(measured_tokens_per_s_per_gpu=lambda r: measured(r, TRUE))
    return calibrate(runs, SHIPPED, ASKED, cross_validate=False)


def test_the_factors_it_was_given_come_back(recovered):
    """36 runs with 3% noise: each of the three factors is recovered within 3 standard errors of the fit's own
    (from its Jacobian and residuals, s^2 (J'J)^-1; 99.7% for a Gaussian error), that error is below 25% (the
    runs determine them), and the shipped values, where the fit started, lie more than 2 errors away (the
    test is not passed by standing still)."""
    fit = recovered.fit
    assert [label(j) for j in fit.plan.free] == ["kernel_overhead_s[megatron-core]", "attn_kernel_scale[megatron-core]",
                                                 "tp_comm_exposed"]
    true = np.log([TRUE.kernel_overhead_s[0], TRUE.attn_kernel_scale[0], TRUE.tp_comm_exposed])
    got, se, start = fit.x[fit.plan.free], fit.se_log[fit.plan.free], fit.x0[fit.plan.free]
    assert np.all(se < np.log(1.25)), se
    assert np.all(np.abs(got - true) <= 3 * se), (np.exp(got), np.exp(true), se)
    assert np.all(np.abs(start - true) > 2 * se)
    # what was not asked stays as shipped, exactly
    assert recovered.fit.cal.gemm_n_half == SHIPPED.gemm_n_half and recovered.fit.cal.kernel_overhead_s[1:] == \
        SHIPPED.kernel_overhead_s[1:]
    # and the calibrated model reproduces the runs to about their noise (3%)
    after = recovered.after
    assert np.mean(np.abs(after["signed_error"])) < 0.035 < np.mean(np.abs(recovered.before["signed_error"]))


def _csv(tmp_path, runs: pd.DataFrame, name="runs.csv"):
    path = tmp_path / name
    runs.to_csv(path, index=False)
    return path


def small(n=6) -> pd.DataFrame:
    runs = designs().iloc[::6].head(n).reset_index(drop=True)
    return runs.assign(run_id=[f"r{i}" for i in range(len(runs))], measured_tokens_per_s_per_gpu=measured(runs, TRUE))


def megatron_log(path, step_ms: float, batch: int, lines=6):
    path.write_text("\n".join(
        f" [2026-11-30 10:00:{i:02d}] iteration {10 * i:8d}/{500:8d} | consumed samples: {10 * i * batch:12d} | "
        f"elapsed time per iteration (ms): {step_ms * (1.5 if i == 1 else 1.0):.1f} | throughput per GPU "
        f"(TFLOP/s/GPU): 400.0 | learning rate: 3.000000E-04 | global batch size: {batch:5d} | lm loss: 7.1E+00 |"
        for i in range(1, lines + 1)) + "\n")


def test_calibrate_writes_a_file_evaluate_and_a_space_read(tmp_path, capsys):
    """Six runs, one of them measured by its Megatron-LM log (step time = batch x seq / (n_gpus x tokens/s)),
    one factor asked: the file holds the factors, the provenance, the residuals and intervals; `dse evaluate
    --calibration` and a space's `calibration:` score with exactly those factors."""
    runs = small()
    step_s = runs.global_batch[2] * runs.seq_len[2] / (runs.n_gpus[2] * runs.measured_tokens_per_s_per_gpu[2])
    megatron_log(tmp_path / "r2.log", step_s * 1000.0, int(runs.global_batch[2]))
    runs["measured_tokens_per_s_per_gpu"] = runs["measured_tokens_per_s_per_gpu"].astype(object)
    runs.loc[2, "measured_tokens_per_s_per_gpu"] = ""
    runs["log"] = ["", "", "r2.log", "", "", ""]
    src = _csv(tmp_path, runs)
    out = tmp_path / "my-cluster.json"
    rc, text, err = _run(capsys, "calibrate", src, "-o", out, "--factors", "attn_kernel_scale")
    assert rc == 0, err
    assert "held out (leave one run out, each fold refitted)" in text and f"wrote {out}" in text
    record = json.loads(out.read_text())
    assert record["provenance"]["runs_file"] == "runs.csv" and len(record["provenance"]["runs_sha256"]) == 64
    assert record["provenance"]["logs"][0]["row"] == 3 and record["provenance"]["logs"][0]["lines_used"] == 3
    assert record["factors"]["attn_kernel_scale[megatron-core]"]["status"] == "free"
    assert record["factors"]["tp_comm_exposed"]["status"] == "fixed"
    res = pd.DataFrame(record["residuals"])
    assert list(res["run_id"]) == list(runs["run_id"]) and res["log_ratio_held_out"].notna().all()
    # the log's row: its steady step time (0.1 ms rounding of the log) gives the measurement back
    assert res["measured_tokens_per_s_per_gpu"][2] == pytest.approx(measured(small(), TRUE)[2], rel=1e-4)
    assert record["intervals"]["own_runs"]["runs"] == 6
    cal = Calibration.read(out)
    assert cal.attn_kernel_scale[0] == record["fitted"]["attn_kernel_scale"][0] != SHIPPED.attn_kernel_scale[0]

    table = tmp_path / "designs.csv"
    table.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch,stack\nllama3-70b,h100-sxm,64,256,4,4,1,megatron-core\n")
    for flags, name in (((), "shipped.csv"), (("--calibration", out), "own.csv")):
        assert _run(capsys, "evaluate", table, "-o", tmp_path / name, *flags)[0] == 0
    shipped, own = pd.read_csv(tmp_path / "shipped.csv"), pd.read_csv(tmp_path / "own.csv")
    expect = objectives.search_mapping(pd.read_csv(table).to_dict("list"), cal=cal)
    assert own["step_time_s"][0] == pytest.approx(expect["step_time_s"][0], rel=1e-12)
    assert own["step_time_s"][0] != pytest.approx(shipped["step_time_s"][0], rel=1e-3)
    # the interval is the file's: the slow end's log ratio is sigma z_90 (the fast end may stop at the GEMM
    # roofline), sigma = exp(intercept + ... + kappa min(d, d_cap)), d from the file's ground (its runs added)
    ship = json.loads(objectives.training.intervals.INTERVAL_PATH.read_text())["scale"]
    mine = record["intervals"]["scale"]
    d_own, d_ship = own["validated_distance_oct"][0], shipped["validated_distance_oct"][0]
    assert d_own <= d_ship
    slow = {k: np.log(t["tokens_per_s_per_gpu"][0] / t["tokens_per_s_per_gpu_lo"][0]) for k, t in
            (("shipped", shipped), ("own", own))}
    expect_ratio = np.exp(mine["intercept"] - ship["intercept"] + ship["kappa"] * (min(d_own, ship["d_cap"])
                                                                                 - min(d_ship, ship["d_cap"])))
    assert slow["own"] / slow["shipped"] == pytest.approx(expect_ratio, rel=1e-6)

    space = {"workload": {"model": "llama3-70b", "global_batch": 256, "train_tokens": 1e12},
             "cluster": {"gpu": "h100-sxm", "n_gpus": 64}, "objectives": [{"metric": "step_time_s", "direction": "min"}],
             "calibration": "my-cluster.json"}
    spec = parse_spec(space, source=str(tmp_path / "space.yaml"))
    assert spec.calibration == str(out) and spec.resolved()["calibration"]["sha256"] == spec.calibration_sha256
    from dse.problem import default_scorer
    from dse.space import Space

    assert default_scorer(Space(spec)).keywords["cal"] == cal
    assert "calibration" not in parse_spec({k: v for k, v in space.items() if k != "calibration"}).resolved()
    (tmp_path / "bad.json").write_text('{"fitted": {"gemm_n_half": "wide"}}')
    with pytest.raises(UserError, match=r"space.yaml: calibration: .*bad.json: key 'fitted.gemm_n_half' must be a "
                                        r"positive number"):
        parse_spec({**space, "calibration": "bad.json"}, source=str(tmp_path / "space.yaml"))


@pytest.mark.parametrize("case, expect", [
    ("unknown model", r"runs.csv, row 2, column 'model': .*llama9-1t"),
    ("negative", r"runs.csv, row 3, column 'measured_tokens_per_s_per_gpu': must be a positive number, not -5"),
    ("text", r"runs.csv, row 1, column 'measured_step_time_s': must be a positive number, not 'fast'"),
    ("none", r"runs.csv, row 4, column 'measured_tokens_per_s_per_gpu': no measurement"),
    ("too few", r"runs.csv: 2 runs cannot fit \d factors"),
    ("no log", r"gone.log \(.*runs.csv, row 2, column 'log'\): cannot read the log"),
    ("empty log", r"empty.log \(--log r1=.*empty.log\): no iteration lines"),
    ("factor", r"--factors: unknown factor 'attn_kernal_scale'"),
    ("calibration", r"nope.json: cannot read the calibration file"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case, expect):
    runs = small(4)
    argv = []
    if case == "unknown model":
        runs.loc[1, "model"] = "llama9-1t"
    elif case == "negative":
        runs.loc[2, "measured_tokens_per_s_per_gpu"] = -5
    elif case == "text":
        runs = runs.drop(columns="measured_tokens_per_s_per_gpu").assign(measured_step_time_s=["fast", 1, 1, 1])
    elif case == "none":
        runs.loc[3, "measured_tokens_per_s_per_gpu"] = np.nan
    elif case == "too few":
        runs = runs.head(2)
    elif case == "no log":
        runs["measured_tokens_per_s_per_gpu"] = runs["measured_tokens_per_s_per_gpu"].astype(object)
        runs.loc[1, "measured_tokens_per_s_per_gpu"] = ""
        runs["log"] = ["", "gone.log", "", ""]
    elif case == "empty log":
        runs.loc[1, "measured_tokens_per_s_per_gpu"] = np.nan
        (tmp_path / "empty.log").write_text("starting\n")
        argv = ["--log", f"r1={tmp_path / 'empty.log'}"]
    elif case == "factor":
        argv = ["--factors", "attn_kernal_scale"]
    elif case == "calibration":
        argv = ["--calibration", tmp_path / "nope.json"]
    src = _csv(tmp_path, runs)
    rc, out, err = _run(capsys, "calibrate", src, "-o", tmp_path / "out.json", "--no-held-out", *argv)
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("dse calibrate: error: "), err
    import re

    assert re.search(expect, err), err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("text, expect", [
    ("{not json", "not a calibration file: not valid JSON"),
    ('{"fitted": {"attn_kernel_scale": [1.0, 1.0]}}', "key 'fitted.attn_kernel_scale' must be a list of 4 positive"),
    ('{"fitted": {"warp_speed": 2}}', "key 'fitted.warp_speed' is not a factor; valid: attn_seq_half"),
    # issue 27: a factor far outside the fit's own box (step times of 1.96e9 s called feasible)
    ('{"fitted": {"gemm_n_half": 1e9}}', "key 'fitted.gemm_n_half' is 1e+09, outside the fit's box [1, 2048]"),
    # a file calibrated before the expert all-to-all's exposure was derived (issue 22)
    ('{"fitted": {"ep_comm_exposed": 0.5}}', "key 'fitted.ep_comm_exposed' is no longer a factor: the exposed expert "
                                             "all-to-all is derived"),
    ('{"fitted": {}, "intervals": {"scale": {}}}', "key 'intervals' must be an object with 'scale', 'quantile'"),
])
def test_a_bad_calibration_file_is_one_line_for_evaluate_and_validate(tmp_path, capsys, text, expect):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    table = tmp_path / "designs.csv"
    table.write_text("model,gpu,n_gpus,global_batch\nllama3-8b,h100-sxm,8,128\n")
    for argv in (["evaluate", table, "-o", tmp_path / "o.csv"], ["validate"]):
        rc, out, err = _run(capsys, *argv, "--calibration", bad)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and f"{bad}: {expect}" in err, err


def test_a_factor_outside_the_box_is_used_only_when_the_file_says_so(tmp_path):
    """The box is the fit's (objectives.calibration.BOUNDS); a file may step outside it explicitly."""
    from objectives.calibration import Calibration

    path = tmp_path / "wide.json"
    path.write_text('{"fitted": {"gemm_n_half": 4096}, "allow_outside_bounds": true}')
    assert Calibration.read(path).gemm_n_half == 4096.0
