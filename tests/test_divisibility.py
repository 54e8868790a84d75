"""The divisibility module: pipeline splits as Megatron-Core places them, the interleaved schedule's rules and
bubble, a reason for every infeasible row, and one set of rules behind Layout, the search and the input check."""

import itertools

import numpy as np
import pandas as pd
import pytest

import objectives
from objectives.calibration import STACKS
from objectives.training.divisibility import SPLIT_EVEN, SPLIT_GIVEN, SPLIT_GIVEN_STACK, SPLIT_UNEVEN, pipeline_split

CORE, CORE_2024 = STACKS.index("megatron-core"), STACKS.index("megatron-core-2024")


def _split(L, pp, vp, first=np.nan, last=np.nan, stack=CORE):
    s = pipeline_split(np.array([L], float), np.array([pp], float), np.array([vp], float), np.array([first], float),
                       np.array([last], float), np.array([stack]))
    return float(s.busiest[0]), float(s.first[0]), float(s.last[0]), int(s.code[0])


@pytest.mark.parametrize("L, pp, vp, first, last, expected", [
    # Llama 3.1 405B, 126 layers over pp 16 (Llama 3 paper): embedding and loss counted as layers,
    # (126 + 2) / 16 = 8 a stage, the first and last holding 8 - 1 = 7 decoder layers
    (126, 16, 1, np.nan, np.nan, (8, 7, 7, 0)),
    # over pp 8 x vp 8 (MLPerf v5.0): 128 / 64 = 2 a virtual stage; a device holds 8 chunks = 16 layers, the
    # first device's first chunk and the last device's last chunk one fewer: 15
    (126, 8, 8, np.nan, np.nan, (16, 15, 15, 0)),
    # 80 layers over pp 3: 80 and 82 are not multiples of 3, 81 is: the embedding counted, 81 / 3 = 27 a
    # stage, the first holding 26 (cost 27 with the embedding; the last 27 + loss = 28, the balanced best)
    (80, 3, 1, np.nan, np.nan, (27, 26, 27, 0)),
    # the same with the first stage given as 28: the other 52 even over the 2 other stages, 26 each
    (80, 3, 1, 28, np.nan, (28, 28, 26, 0)),
    # given 27 / 27 over pp 3 x vp 2: 27 is not a multiple of vp 2 (transformer_config.py "Uneven PP")
    (80, 3, 2, 27, 27, (28, 28, 28, SPLIT_GIVEN)),
    # 13 layers over pp 4 x vp 4: 13, 14, 15 are no multiples of 16, 13 / vp is not whole: no form places it
    (13, 4, 4, np.nan, np.nan, (4, 4, 4, SPLIT_UNEVEN)),
    # an even split: 32 over pp 4 = 8 each
    (32, 4, 1, np.nan, np.nan, (8, 8, 8, 0)),
])
def test_pipeline_splits_megatron_core(L, pp, vp, first, last, expected):
    assert _split(L, pp, vp, first, last) == expected


def test_megatron_core_2024_splits_evenly():
    """Megatron-Core r0.8 places L / pp layers a stage only (core_v0.8.0 arguments.py): 126 over pp 16 is
    refused (126 / 16 = 7.875), 96 over pp 8 x vp 6 accepted (2 a chunk, 12 a device), and a first-stage
    count is refused as a stack it cannot take."""
    assert _split(126, 16, 1, stack=CORE_2024)[3] == SPLIT_EVEN
    assert _split(96, 8, 6, stack=CORE_2024) == (12, 12, 12, 0)
    assert _split(80, 3, 1, 28, stack=CORE_2024)[3] == SPLIT_GIVEN_STACK


CSV = """model,gpu,n_gpus,global_batch,tp,pp,vp,cp,micro_batch,precision,stack,pp_first_layers,pp_last_layers
llama3.1-405b,h100-sxm,16384,2048,8,16,1,1,1,bf16,megatron-core,,
llama3.1-405b,h100-sxm,16384,2048,8,8,8,1,1,bf16,megatron-core,,
llama3-70b,h100-sxm,96,96,4,3,1,1,1,bf16,megatron-core,,
llama3-70b,h100-sxm,96,96,4,3,1,1,1,bf16,megatron-core,28,
llama3.1-405b,h100-sxm,16384,2048,8,16,1,1,1,bf16,megatron-core-2024,,
"""


def test_dse_evaluate_runs_uneven_pipelines_and_gives_reasons(tmp_path, capsys):
    """The issue's three splits run (exit 0, feasible, the layer counts of the split test above, 80 over pp 3
    with the first stage given as 28 too); a split the stack refuses is an infeasible row with its reason."""
    from dse.cli import main

    src = tmp_path / "d.csv"
    src.write_text(CSV)
    assert main(["evaluate", str(src), "-o", str(tmp_path / "o.parquet")]) == 0
    t = pd.read_parquet(tmp_path / "o.parquet")
    assert list(t["layers_per_stage"][:4]) == [8, 16, 27, 28]
    assert list(t["layers_first_stage"][:4]) == [7, 15, 26, 28]
    assert list(t["layers_last_stage"][:4]) == [7, 15, 27, 26]
    assert t["feasible"][:4].all() and (t["infeasible_reason"][:4] == "").all()
    assert not t["feasible"][4]
    assert t["infeasible_reason"][4] == "layout: n_layers 126 is not a multiple of pp*vp 16 (megatron-core-2024 splits layers evenly)"


def test_compute_paces_on_the_slowest_stage():
    """405B over pp 16: the middle stages hold 8 layers, the last 7 plus the output layer and loss; the
    micro-batch time is max(8 * (fwd + bwd), 7 * (fwd + bwd) + logits)."""
    out = objectives.evaluate(dict(model="llama3.1-405b", gpu="h100-sxm", n_gpus=16384, global_batch=2048, tp=8,
                                   pp=16, micro_batch=1))
    layer = out["time_layer_fwd_s"][0] + out["time_layer_bwd_s"][0]
    expected = max(8 * layer, 7 * layer + out["time_logits_s"][0])
    assert out["time_compute_mb_s"][0] == pytest.approx(expected, rel=1e-12)
    assert out["time_compute_mb_s"][0] < 8 * layer + out["time_logits_s"][0]


def test_interleaved_bubble_without_enough_microbatches():
    """Llama-3-70B on 8,192 B200 in fp8, tp 4 pp 2 vp 4, global batch 1,024: dp = 8192 / 8 = 1024, so
    m = 1024 / 1024 = 1 micro-batch. With m < p no micro-batch waits for a device: the one micro-batch runs
    its p*v = 8 chunks of t_mb/v back to back, the step is (p + (m-1)/v) * t_mb = 2 t_mb, of which m * t_mb
    is work: bubble = t_mb * (max(p-m, 0) + (min(m, p) - 1)/v) = t_mb * (1 + 0) = t_mb (the model charged
    (p-1)/v * t_mb = t_mb / 4 before, 0.066 s of the ~0.26 s idle). Megatron-Core refuses the schedule
    (microbatch_group_size_per_vp_stage = pp = 2 > m = 1, schedules.py): the row is infeasible with its reason."""
    out = objectives.evaluate(dict(model="llama3-70b", gpu="b200", n_gpus=8192, global_batch=1024, tp=4, pp=2, vp=4,
                                   micro_batch=1, precision="fp8"))
    t_mb = out["time_compute_mb_s"][0] + out["time_tp_comm_mb_s"][0] + out["time_cp_comm_mb_s"][0] \
        + out["time_ep_comm_mb_s"][0]
    assert out["n_microbatches"][0] == 1
    assert out["time_pp_bubble_s"][0] == pytest.approx(t_mb, rel=1e-12)
    assert 0.2 < out["time_pp_bubble_s"][0] < 0.3
    assert not out["feasible"][0]
    assert out["infeasible_reason"][0] == "schedule: interleaved vp 4 needs >= pp micro-batches (m 1 < pp 2)"


@pytest.mark.parametrize("m, p, v, bubble_mb", [
    (3, 4, 2, 1 + 2 / 2),  # m < p: (p - m) + (m - 1)/v = 1 + 1 = 2 micro-batch times
    (8, 4, 2, 3 / 2),  # m >= p: (p - 1)/v (Narayanan SC'21 Sec. 2.2.2)
    (2, 4, 1, 3),  # no interleaving: p - 1 whatever m
])
def test_bubble_formula(m, p, v, bubble_mb):
    from objectives.training.steptime import StepTime

    one = np.ones(1)
    cols = {k: one for k in StepTime.requires}
    cols.update(n_microbatches=one * m, pp=one * p, vp=one * v, time_compute_mb_s=one * 0.5, time_tp_comm_mb_s=one * 0.0,
                time_cp_comm_mb_s=one * 0, time_ep_comm_mb_s=one * 0, con_memory=-one, con_layout=0 * one,
                con_precision=0 * one)
    assert StepTime()(cols)["time_pp_bubble_s"][0] == pytest.approx(0.5 * bubble_mb)


def test_reason_for_each_kind(tmp_path):
    """One row per kind of reason, each with its numbers: memory (GPT-3 175B on 8 A100-40GB: ~ 175e9 * 16 B
    / 8 GPUs = 350 GB of model states per GPU before sharding, far above 40 GiB * 0.95 - 2 = 38.8 GB usable),
    heads (tp 16 over 40 heads of Llama 2 13B), the interleaved schedule with m % pp != 0 (pp 4 vp 2,
    n_gpus 64 / (1*4*1) = dp 16, global batch 96 / 16 = m 6), fp8 on an A100, and a design whose GPU count no
    searched mapping divides the batch by (1,000 GPUs: dp = 1000 / (tp*pp*cp) is never a power of two
    dividing 1,024 with the default choices)."""
    rows = [dict(model="gpt3-175b", gpu="a100-sxm-40gb", n_gpus=8, global_batch=8, tp=8, pp=1, micro_batch=1),
            dict(model="llama2-13b", gpu="h100-sxm", n_gpus=64, global_batch=64, tp=16, pp=1, micro_batch=1),
            dict(model="llama3-8b", gpu="h100-sxm", n_gpus=64, global_batch=96, tp=1, pp=4, vp=2, micro_batch=1),
            dict(model="llama3-8b", gpu="a100-sxm-80gb", n_gpus=8, global_batch=8, tp=1, pp=1, micro_batch=1,
                 precision="fp8")]
    table = {k: np.array([r.get(k, np.nan) for r in rows], dtype=object) for k in dict.fromkeys(k for r in rows for k in r)}
    table["precision"] = np.array([r.get("precision", "bf16") for r in rows])
    out = objectives.evaluate(table)
    why = list(out["infeasible_reason"])
    assert why[0].startswith("memory: ") and why[0].endswith(" GB usable")
    needed, usable = float(why[0].split()[1]), float(why[0].split(", ")[1].split()[0])
    assert needed == pytest.approx(out["hbm_used_gb"][0], abs=0.05) and usable == pytest.approx(38.8, abs=0.1)
    assert why[1] == "layout: tp 16 does not divide n_heads 40"
    assert why[2] == "schedule: interleaved vp 2 needs micro-batches in multiples of pp (m 6, pp 4)"
    assert why[3] == "precision: the GPU has no fp8 tensor cores"
    lost = objectives.search_mapping(dict(model="llama3-70b", gpu="h100-sxm", n_gpus=1000, global_batch=1024))
    assert not lost["feasible"][0] and lost["n_mappings_tried"][0] == 0
    assert lost["infeasible_reason"][0] == "layout: no mapping passes 'dp*micro_batch divides global_batch 1024 (n_gpus 1000)'"


def test_input_errors_stay_exit_2_and_the_rest_are_rows(tmp_path, capsys):
    """A fixed tp*pp*cp = 3*1*1 not dividing 64 GPUs is bad input (one line, exit 2); tp 16 over 40 heads
    is an infeasible row (Megatron refuses it at run time), no longer an input error."""
    from dse.cli import main

    bad = tmp_path / "bad.csv"
    bad.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama2-13b,h100-sxm,64,64,3,1,1\n")
    assert main(["evaluate", str(bad), "-o", str(tmp_path / "o.parquet")]) == 2
    assert "row 1, column 'n_gpus': tp*pp*cp = 3*1*1 = 3 does not divide n_gpus = 64" in capsys.readouterr().err
    row = tmp_path / "row.csv"
    row.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama2-13b,h100-sxm,64,64,16,1,1\n")
    assert main(["evaluate", str(row), "-o", str(tmp_path / "o.parquet")]) == 0
    t = pd.read_parquet(tmp_path / "o.parquet")
    assert t["infeasible_reason"][0] == "layout: tp 16 does not divide n_heads 40"


def test_search_stages_layout_and_input_check_agree():
    """Brute force over every (tp, pp, cp, ep, vp, micro_batch) of small choice sets, on a dense and a MoE
    design whose GPU count, heads and layers break rules in many ways: a mapping survives the search's staged
    enumeration exactly when Layout finds no broken rule, and check_layout raises exactly where Layout's first
    broken rule is an input-error rule (codes 1, 2)."""
    from objectives.mapping import enumerate_mappings
    from objectives.pipeline import DESIGN_MODELS, check_layout, prepare, run_models
    from objectives.training.divisibility import RULES
    from objectives.training.layout import Layout

    choices = {"tp": (1, 2, 4, 8), "pp": (1, 2, 3, 4, 6), "cp": (1, 2), "ep": (1, 2, 4), "vp": (1, 2, 3),
               "micro_batch": (1, 2, 3)}
    input_codes = {r.code for r in RULES if r.input_error}
    for design in (dict(model="llama3-70b", n_gpus=96, global_batch=192, seq_len=32768),
                   dict(model="mixtral-8x7b", n_gpus=48, global_batch=96, seq_len=32768)):
        combos = list(itertools.product(*choices.values()))
        table = {k: np.full(len(combos), v, dtype=object) for k, v in design.items()}
        table["gpu"] = np.full(len(combos), "gb200")  # a 72-GPU NVLink domain: tp never pruned
        for i, name in enumerate(choices):
            table[name] = np.array([c[i] for c in combos], dtype=float)
        _, floats = prepare(table)
        layout = Layout()(run_models(floats, None, DESIGN_MODELS))
        valid = {c for c, bad in zip(combos, layout["con_layout"]) if bad == 0}

        _, one = prepare({**{k: v[:1] for k, v in table.items()}})
        encoded = {k: np.asarray(v, dtype=float) for k, v in choices.items()}
        owner, cand = enumerate_mappings(one, np.array([0]), list(choices), encoded, np.array([True]))
        found = {tuple(float(cand[k][i]) for k in choices) for i in range(len(owner))}
        assert found == {tuple(float(x) for x in c) for c in valid}
        assert 0 < len(valid) < len(combos)

        first = layout["layout_rule"]
        for code in np.unique(first):
            rows = np.flatnonzero(first == code)
            sub = {k: v[rows] for k, v in floats.items()}
            if int(code) in input_codes:
                with pytest.raises(objectives.InputError):
                    check_layout(sub)
            else:
                check_layout(sub)


def test_why_infeasible_counts_kinds():
    """Four inadmissible designs: two memory reasons with different numbers count as one kind (2), one
    layout reason, one feasible design outside a space constraint; the admissible one is not counted."""
    from dse.report.data import why_infeasible

    frame = pd.DataFrame({"admissible": [False, False, False, False, True],
                          "infeasible_reason": ["memory: 97.3 GB needed, 75.1 GB usable",
                                                "memory: 80.5 GB needed, 75.1 GB usable",
                                                "layout: tp 16 does not divide n_heads 40", "", ""]})
    assert why_infeasible(frame) == [("memory: # GB needed, # GB usable", 2, "memory: 80.5 GB needed, 75.1 GB usable"),
                                     ("layout: tp # does not divide n_heads #", 1, "layout: tp 16 does not divide n_heads 40"),
                                     ("space: outside the space's constraints", 1, "space: outside the space's constraints")]


def test_why_infeasible_names_the_space_constraint_and_the_best_value_reached():
    """A deadline no design meets: the feasible designs it excludes are counted under that constraint, with the
    best any feasible design reaches (the fastest: 6.56 days; a model-infeasible design's 0.3 days does not
    count); the first constraint a design breaks names it; a constraint some feasible design keeps (facility
    peak <= 30 MW: 10 MW designs keep it) is named without a best value, which would read as out of reach; a
    constraint whose column the table lacks falls back to the generic words."""
    from dse.report.data import why_infeasible

    frame = pd.DataFrame({"admissible": [False, False, False, False],
                          "feasible": [True, True, True, False],
                          "infeasible_reason": ["", "", "", "memory: 97.3 GB needed, 75.1 GB usable"],
                          "time_to_train_days": [6.56, 9.0, 12.0, 0.3],
                          "facility_power_peak_mw": [40.0, 10.0, 10.0, 1.0]})
    why = why_infeasible(frame, constraints=["facility_power_peak_mw <= 30", "time_to_train_days <= 0.5"])
    assert why == [("space: time_to_train_days <= #: the best design reaches #", 2,
                    "space: time_to_train_days <= 0.5: the best design reaches 6.56"),
                   ("memory: # GB needed, # GB usable", 1, "memory: 97.3 GB needed, 75.1 GB usable"),
                   ("space: facility_power_peak_mw <= #", 1, "space: facility_power_peak_mw <= 30")]
    assert why_infeasible(frame, constraints=["bogus_metric <= 1"])[0][0] == "space: outside the space's constraints"


def test_sweep_closing_table_says_why(tmp_path, capsys):
    """The default space on 1,000 and 2,000 GPUs (2^3 * 5^3 and 2^4 * 5^3): dp = n_gpus / (tp*pp*cp) is a
    power of two dividing the global batch of 1,024 only if tp*pp*cp holds the 5^3 = 125, which no default
    choice does: every design is infeasible, and the closing table says why, per kind."""
    from pathlib import Path

    from dse.cli import main

    text = (Path(__file__).parents[1] / "spaces" / "default.yaml").read_text()
    lines = [("  n_gpus: [1000, 2000]" if line.startswith("  n_gpus:") else line) for line in text.splitlines()]
    space = tmp_path / "nodivide.yaml"
    space.write_text("\n".join(lines) + "\n")
    assert main(["sweep", str(space), "--trials", "16", "--no-ray", "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "why designs were infeasible" in out
    assert "16  layout: no mapping passes 'dp*micro_batch divides global_batch # (n_gpus #)'" in out
    assert "Why designs were infeasible" in (tmp_path / "run" / "report.md").read_text()


def test_pytorch_fsdp_runs_data_parallelism_only():
    """llm-foundry (the pytorch-fsdp stack) has FSDP and nothing else: Llama-3-70B on 512 H100 at tp 8 pp 2
    is a row it cannot run (infeasible, rule 16, with its reason), and the search on that stack keeps
    tp = pp = cp = 1 (here ZeRO-3, dp 512, one sequence per GPU per step)."""
    row = dict(model="llama3-70b", gpu="h100-sxm", n_gpus=512, global_batch=512, seq_len=4096, stack="pytorch-fsdp")
    fixed = objectives.evaluate(dict(row, tp=8, pp=2, micro_batch=1))
    assert not fixed["feasible"][0] and fixed["layout_rule"][0] == 16
    assert fixed["infeasible_reason"][0] == "layout: pytorch-fsdp runs data parallelism only (tp 8, pp 2, cp 1)"
    searched = objectives.search_mapping({k: np.atleast_1d(np.asarray(v, dtype=object if isinstance(v, str) else float))
                                          for k, v in row.items()})
    assert searched["feasible"][0]
    assert (searched["tp"][0], searched["pp"][0], searched["cp"][0]) == (1, 1, 1)
