"""The mapping search cut by candidates (objectives.mapping.CANDIDATE_BUDGET) gives, bit for bit, what it
gives in one piece: a row's candidates never straddle two pieces, so its best one is chosen among the same
candidates, in the same order."""

import numpy as np
import pytest

import objectives
from objectives import mapping

nan = np.nan
#: rows of very different candidate counts: thousands (a large cluster, every cell blank), a few hundred (a
#: small one), three (only micro_batch blank), one (a given mapping), none valid (7 GPUs cannot divide a
#: batch of 5: a fallback candidate), and one that fits on no mapping (gpt3-175b on eight 40 GB GPUs)
ROWS = [
    dict(model="llama3-70b", gpu="h100-sxm", n_gpus=1024, global_batch=1024),
    dict(model="llama3-8b", gpu="h100-sxm", n_gpus=8, global_batch=64),
    dict(model="mixtral-8x7b", gpu="gb200", n_gpus=4096, global_batch=2048),
    dict(model="llama3-8b", gpu="b200", n_gpus=64, global_batch=512, tp=8, pp=1, cp=1, ep=1, vp=1, recompute="selective",
         zero_stage=1),
    dict(model="llama3-8b", gpu="b200", n_gpus=7, global_batch=5),
    dict(model="gpt3-175b", gpu="a100-sxm-40gb", n_gpus=8, global_batch=8),
    dict(model="llama3-70b", gpu="b200", n_gpus=256, global_batch=512, tp=4, pp=4, cp=1, ep=1, vp=1, micro_batch=1,
         recompute="full", zero_stage=1),
    dict(model="mixtral-8x7b", gpu="h100-sxm", n_gpus=512, global_batch=1024),
    dict(model="llama3-8b", gpu="b200", n_gpus=128, global_batch=256, tp=2, pp=1, cp=1, ep=1, vp=1, recompute="full",
         zero_stage=3),
]
MAPPING = ("tp", "pp", "cp", "ep", "vp", "micro_batch", "zero_stage")


def _table() -> dict[str, np.ndarray]:
    table = {k: np.array([row[k] for row in ROWS], dtype=object) for k in ("model", "gpu")}
    table.update({k: np.array([row[k] for row in ROWS], dtype=float) for k in ("n_gpus", "global_batch")})
    table.update({k: np.array([row.get(k, nan) for row in ROWS], dtype=float) for k in MAPPING})
    table["recompute"] = np.array([row.get("recompute", "") for row in ROWS], dtype=object)
    table["train_tokens"] = np.full(len(ROWS), 1e12)
    return table


def _search(monkeypatch, budget, joined):
    monkeypatch.setattr(mapping, "CANDIDATE_BUDGET", budget)
    monkeypatch.setattr(mapping, "MAX_JOINED_ROWS", joined)
    with np.errstate(all="ignore"):
        return objectives.search_mapping(_table())


def test_sliced_search_is_the_unsliced_one_bit_for_bit(monkeypatch):
    whole = _search(monkeypatch, np.inf, 1 << 40)
    tried = whole["n_mappings_tried"]
    assert tried.max() > 2000 and tried[1] < 300 and tried[3] == 3 and tried[6] == 1 and tried[4] == 0
    assert whole["feasible"].tolist() == [True, True, True, True, False, False, True, True, True]
    # a budget under one big row's candidates: the big rows go one per piece, the small ones many together
    sliced = _search(monkeypatch, 300, 50)
    assert list(sliced) == list(whole)
    for name, value in whole.items():
        if value.dtype.kind == "O":
            assert sliced[name].tolist() == value.tolist(), name
        else:
            assert sliced[name].dtype == value.dtype and sliced[name].tobytes() == value.tobytes(), name


@pytest.mark.parametrize("budget", [1, 40, 300, 5000])
def test_pieces_hold_whole_rows_within_the_budget(budget):
    """Pieces come in row order, each row's candidates in one piece (its fallback last), and together they
    are the candidates of one pass; a piece over the budget is one row (with a stage's expansion of it)."""
    from objectives.pipeline import prepare
    from objectives.table import encode

    given = {k: v[[0, 1, 2, 4, 7]] for k, v in _table().items() if k not in MAPPING + ("recompute",)}
    _, floats = prepare({**given, **dict.fromkeys(MAPPING, 1), "recompute": "none", "sequence_parallel": 1})
    choices = {k: (encode(k, np.asarray(v)) if k == "recompute" else np.asarray(v, dtype=float))
               for k, v in mapping.DEFAULT_CHOICES.items()}
    rows, searched, follows = np.arange(5), [c for c in mapping.MAPPING_COLUMNS if c != "sequence_parallel"], np.ones(5, bool)
    owner, cand = mapping.enumerate_mappings(floats, rows, searched, choices, follows)
    pieces = list(mapping.iter_mappings(floats, rows, searched, choices, follows, budget=budget))
    assert len(pieces) > 1 or budget == 5000
    owners = [np.unique(o) for o, _ in pieces]
    assert np.array_equal(np.concatenate(owners), rows)  # each row in one piece, pieces in row order
    for o, _ in pieces:  # row 3 (7 GPUs) has only its fallback candidate, with whichever piece it fell in
        assert np.sum(o != 3) <= budget or len(np.unique(o[o != 3])) == 1
    # in row order (the one pass puts every fallback last), the same candidates in the same order
    order = np.argsort(owner, kind="stable")
    parts = [np.argsort(o, kind="stable") for o, _ in pieces]
    assert np.array_equal(np.concatenate([o[p] for (o, _), p in zip(pieces, parts)]), owner[order])
    for name in cand:
        assert np.array_equal(np.concatenate([c[name][p] for (_, c), p in zip(pieces, parts)]), cand[name][order]), name


def test_evaluate_of_a_blank_table_in_slices_of_rows_and_candidates(tmp_path, capsys, monkeypatch):
    """`dse evaluate` in slices of 4 rows, each searched 300 candidates at a time, writes the cells of the
    one-pass search of the whole table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from cli_run import run_cli

    import dse.commands.evaluate as evaluate_command

    whole = _search(monkeypatch, np.inf, 1 << 40)
    src = tmp_path / "blank.parquet"
    pq.write_table(pa.table(_table()), src)
    monkeypatch.setattr(mapping, "CANDIDATE_BUDGET", 300)
    monkeypatch.setattr(mapping, "MAX_JOINED_ROWS", 50)
    monkeypatch.setattr(evaluate_command, "SLICE_ROWS", 4)
    rc, out, err = run_cli(capsys, "evaluate", src, "-o", tmp_path / "sliced.parquet")
    assert rc == 0, err
    assert f"{len(ROWS)} designs, 7 feasible" in out
    sliced = pq.read_table(tmp_path / "sliced.parquet")
    assert sliced.column_names == list(whole)
    for name, value in whole.items():
        got = sliced[name].to_numpy(zero_copy_only=False)
        if value.dtype.kind == "f":
            assert got.dtype == value.dtype and got.tobytes() == value.tobytes(), name
        elif value.dtype.kind != "O":
            assert got.tolist() == value.tolist(), name
        else:
            assert got.tolist() == [None if v is None or v is nan else v for v in value.tolist()], name
