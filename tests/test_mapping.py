"""The vectorized mapping search against brute force, one candidate at a time."""

import itertools

import numpy as np

import objectives

CHOICES = {"tp": (1, 2, 4, 8), "pp": (1, 2, 4), "micro_batch": (1, 2), "recompute": ("selective", "full"),
           "zero_stage": (1, 3), "vp": (1, 2)}
DESIGNS = [dict(model="llama3-70b", gpu="h100-sxm", n_gpus=64, global_batch=256),
           dict(model="gpt3-175b", gpu="a100-sxm-80gb", n_gpus=256, global_batch=512),
           dict(model="llama3-8b", gpu="b200", n_gpus=16, global_batch=64),
           dict(model="gpt3-175b", gpu="a100-sxm-40gb", n_gpus=8, global_batch=8)]  # cannot fit


def _brute_force(design):
    best = None
    for values in itertools.product(*CHOICES.values()):
        row = dict(design, **dict(zip(CHOICES, values)), cp=1, ep=1)
        if row["vp"] > 1 and row["pp"] == 1:
            continue
        if row["n_gpus"] % (row["tp"] * row["pp"]) or row["global_batch"] % (row["n_gpus"] // (row["tp"] * row["pp"]) * row["micro_batch"]):
            continue
        out = objectives.evaluate(row)
        if out["con_layout"][0] > 0 or not out["feasible"][0]:
            continue
        key = (out["step_time_s"][0], out["hbm_used_gb"][0])
        if best is None or key < best[0]:
            best = (key, values)
    return best


def test_search_equals_brute_force():
    table = {k: np.array([d[k] for d in DESIGNS]) for k in DESIGNS[0]}
    out = objectives.search_mapping(dict(table, cp=1, ep=1), choices=CHOICES)
    for i, design in enumerate(DESIGNS):
        best = _brute_force(design)
        if best is None:
            assert not out["feasible"][i]
            continue
        assert out["feasible"][i]
        assert out["step_time_s"][i] == best[0][0]
        got = tuple(out[k][i] for k in CHOICES)
        assert tuple(str(g) if isinstance(g, str) else float(g) for g in got) == \
            tuple(str(v) if isinstance(v, str) else float(v) for v in best[1])


def test_given_mapping_cells_are_kept():
    out = objectives.search_mapping(dict(model=["llama3-70b"] * 2, gpu="h100-sxm", n_gpus=64, global_batch=256,
                                         tp=[4.0, np.nan], pp=[np.nan, 2.0]))
    assert out["tp"][0] == 4 and out["pp"][1] == 2
    assert out["n_mappings_tried"].min() > 1


def test_staged_enumeration_keeps_only_valid_layouts():
    from objectives.mapping import DEFAULT_CHOICES, enumerate_mappings
    from objectives.pipeline import prepare
    from objectives.table import encode

    _, floats = prepare(dict(model="llama3-70b", gpu="h100-sxm", n_gpus=96, global_batch=192, tp=1, pp=1, micro_batch=1))
    choices = {k: (encode(k, np.asarray(v)) if k == "recompute" else np.asarray(v, dtype=float)) for k, v in DEFAULT_CHOICES.items()}
    owner, cand = enumerate_mappings(floats, np.array([0]), ["tp", "pp", "cp", "micro_batch", "vp"], choices, np.array([True]))
    dp = 96 / (cand["tp"] * cand["pp"] * cand["cp"])
    assert len(owner) > 10
    assert np.all(dp == np.floor(dp)) and np.all(192 % (dp * cand["micro_batch"]) == 0)
    assert np.all(cand["tp"] <= 8) and np.all(cand["cp"] == 1)  # tp inside the NVLink domain, cp only >= 16K tokens
    assert np.all((cand["vp"] == 1) | (cand["pp"] > 1))
    assert np.all(cand["sequence_parallel"] == (cand["tp"] > 1))


def test_a_narrowed_mapping_still_runs_tp_1():
    """A space that narrows any mapping column (``mapping: {tp: [1, 2]}``) passes the model's defaults with
    its lists (dse.space.Space.mapping_choices), sequence_parallel (1,) among them. Sequence parallelism is a
    no-op at tp 1, so a tp 1 candidate runs with it off (once, whatever the list) instead of being dropped by
    the rule "sequence parallelism only with tp > 1": such a sweep never ran tp 1 (a tp 2 mapping 3% slower
    here, Llama 3 8B on 64 H100s, where ``mapping: auto`` runs tp 1). A given cell is kept as given."""
    from objectives.mapping import DEFAULT_CHOICES

    design = dict(model="llama3-8b", gpu="h100-sxm", n_gpus=64, global_batch=512, seq_len=8192)
    auto = objectives.search_mapping(design)
    assert auto["tp"][0] == 1 and auto["sequence_parallel"][0] == 0
    tried = {}
    for sp in ((1,), (0,), (0, 1)):
        out = objectives.search_mapping(design, choices={**DEFAULT_CHOICES, "tp": (1, 2), "sequence_parallel": sp})
        assert out["tp"][0] == 1 and out["sequence_parallel"][0] == 0, sp
        assert out["step_time_s"][0] == auto["step_time_s"][0], sp
        tried[sp] = out["n_mappings_tried"][0]
    assert tried[(1,)] == tried[(0,)] < tried[(0, 1)]  # tp 1 enumerated once; only tp 2 doubles with (0, 1)
    given = objectives.search_mapping(dict(design, tp=1, sequence_parallel=1), choices={**DEFAULT_CHOICES, "tp": (1, 2)})
    assert given["sequence_parallel"][0] == 1


def test_a_nonsense_override_makes_an_infeasible_row_not_a_crash():
    """A design whose every mapping scores NaN (a zero head dimension) is one infeasible row; the other
    designs of the table keep their best mappings (found by the hostile-input test: the row had no best
    candidate and the table failed)."""
    with np.errstate(all="ignore"):
        out = objectives.search_mapping(dict(model="llama3-8b", gpu="h100-sxm", n_gpus=64, global_batch=512,
                                             d_head=np.array([128.0, 0.0])), choices=CHOICES)
    assert len(out["feasible"]) == 2
    assert out["feasible"][0] and np.isfinite(out["step_time_s"][0])
    assert not out["feasible"][1]
