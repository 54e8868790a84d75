"""`dse evaluate` on fixed tables: the fast path for given mappings, --columns, and the file formats."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli as _run

import objectives
from objectives.mapping import needed_models
from objectives.pipeline import CHUNK_ROWS, ECONOMICS_MODELS

MODELS = ["gpt3-175b", "llama3-70b", "llama3-8b", "mixtral-8x7b"]
GPUS = ["a100-sxm-80gb", "h100-sxm", "b200", "gb200"]


def fixed_table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` designs with every mapping column given: tp divides the heads (32, 64, 96) and stays in the
    scale-up domain (8 or 72), pp and pp*vp divide the layers (32, 80, 96), ep divides mixtral's 8 experts
    and dp*tp, dp*micro_batch divides the global batch; a third of the rows leave sequence_parallel blank
    (it follows tp), fp8 only where the GPU has it (not the A100)."""
    rng = np.random.default_rng(seed)
    model = rng.integers(0, len(MODELS), n)
    gpu = rng.integers(0, len(GPUS), n)
    tp = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    pp = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    dp = rng.choice([4.0, 8.0, 16.0, 64.0], n)
    mb = rng.choice([1.0, 2.0], n)
    sp = np.where(rng.random(n) < 1 / 3, np.nan, (tp > 1) * 1.0)
    return {
        "model": np.array(MODELS, dtype=object)[model], "gpu": np.array(GPUS, dtype=object)[gpu],
        "n_gpus": tp * pp * dp, "global_batch": dp * mb * rng.choice([4.0, 8.0], n),
        "tp": tp, "pp": pp, "cp": np.ones(n), "ep": np.where(model == 3, rng.choice([1.0, 2.0, 4.0], n), 1.0),
        "vp": np.where(pp > 1, rng.choice([1.0, 2.0], n), 1.0), "micro_batch": mb,
        "recompute": np.array(["none", "selective", "full"], dtype=object)[rng.integers(0, 3, n)],
        "sequence_parallel": sp, "zero_stage": rng.choice([0.0, 1.0, 3.0], n),
        "precision": np.where((gpu > 0) & (rng.random(n) < 0.5), "fp8", "bf16").astype(object),
        "train_tokens": np.full(n, 1e12),
    }


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit for numbers (a NaN equals a NaN of the same bits), by value for text."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" and b.dtype == a.dtype:
        return np.array_equal(np.ascontiguousarray(a).view(np.uint64), np.ascontiguousarray(b).view(np.uint64))
    return a.dtype == b.dtype and np.array_equal(a.astype(object), b.astype(object))


def test_fixed_rows_skip_the_search_and_give_its_values():
    """Fixed rows are evaluated as given (one candidate each) with the very values of the search path.

    Reference: the same rows with ``cp`` left blank and searched over the one choice cp = 1, their given
    value: the search path enumerates, filters and ranks exactly one candidate per row, the given mapping.
    More rows than one pipeline chunk, so the chunked run and the search's slices both take part. A row whose
    given mapping breaks a rule the search prunes on (an interleaved schedule Megatron refuses) has no
    candidate left in the search path, which then reports "no mapping passes" that rule; the fast path
    evaluates the given mapping and names the rule with its numbers: both are infeasible, and those rows are
    compared on that alone."""
    n = CHUNK_ROWS + 4000
    table = fixed_table(n)
    fast = objectives.search_mapping(table)
    searched = objectives.search_mapping(dict(table, cp=np.full(n, np.nan)), choices={"cp": (1,)})
    assert list(fast) == list(searched)
    assert fast["feasible"].any() and not fast["feasible"].all()  # both kinds of row are compared
    pruned = searched["n_mappings_tried"] == 0
    assert not fast["feasible"][pruned].any() and not searched["feasible"][pruned].any()
    assert all(r.startswith(("layout: ", "schedule: ")) for r in fast["infeasible_reason"][pruned])
    for name in fast:
        if name != "cp":  # the input column itself: given 1, or blank in the reference
            assert _same(fast[name][~pruned], searched[name][~pruned]), name
    assert np.all(fast["n_mappings_tried"] == 1)
    assert np.all(fast["tp"] == table["tp"]) and np.all(fast["recompute"] == table["recompute"])
    sp_blank = np.isnan(table["sequence_parallel"])
    assert np.all(fast["sequence_parallel"][sp_blank] == (table["tp"][sp_blank] > 1))


def test_mixed_table_equals_its_parts_row_by_row():
    """A table of fixed rows and rows with searched mapping cells gives each row what its part gives alone."""
    table = fixed_table(600, seed=1)
    search = np.arange(600) % 3 == 1  # every third row searches tp and pp
    mixed = dict(table, tp=np.where(search, np.nan, table["tp"]), pp=np.where(search, np.nan, table["pp"]))
    out = objectives.search_mapping(mixed)
    fixed_alone = objectives.search_mapping({k: v[~search] for k, v in table.items()})
    searched_alone = objectives.search_mapping({k: v[search] for k, v in mixed.items()})
    assert list(out) == list(fixed_alone) == list(searched_alone)
    tried = out["n_mappings_tried"][search]  # 0 where no candidate passed the rules (a given vp Megatron refuses)
    assert np.all(out["n_mappings_tried"][~search] == 1) and np.all((tried > 1) | (tried == 0)) and np.mean(tried > 1) > 0.5
    for name in out:
        assert _same(out[name][~search], fixed_alone[name]), name
        assert _same(out[name][search], searched_alone[name]), name


def test_outputs_skip_the_economics_nothing_asked_needs():
    """Asking for training metrics alone runs no economics module; asking for a cost runs Cost and every
    module feeding it; the values asked for are those of the full evaluation."""
    table = fixed_table(200, seed=2)
    full = objectives.search_mapping(table)
    training = objectives.search_mapping(table, outputs=["step_time_s", "mfu", "feasible"])
    assert needed_models(ECONOMICS_MODELS, ["step_time_s", "mfu"]) == ()
    assert "tco_usd" not in training and "power_mw" not in training
    costed = needed_models(ECONOMICS_MODELS, ["tco_usd"])
    assert type(costed[-1]).__name__ == "Cost" and len(costed) > 1  # Cost reads what earlier modules give
    for name in ("step_time_s", "mfu", "feasible", "tp", "gpu"):
        assert _same(training[name], full[name]), name
    assert _same(objectives.search_mapping(table, outputs=["tco_usd"])["tco_usd"], full["tco_usd"])


def test_reasons_only_where_asked_for():
    """``infeasible_reason`` is built only when the outputs name it, and then equals the full evaluation's
    (the table has infeasible rows with several reasons)."""
    table = fixed_table(300, seed=3)
    full = objectives.search_mapping(table)
    assert len(set(full["infeasible_reason"])) > 2
    assert "infeasible_reason" not in objectives.search_mapping(table, outputs=["step_time_s", "feasible"])
    asked = objectives.search_mapping(table, outputs=["step_time_s", "infeasible_reason"])
    assert list(asked["infeasible_reason"]) == list(full["infeasible_reason"])


@pytest.fixture
def fixed_parquet(tmp_path):
    table = fixed_table(300, seed=3)
    table["note"] = np.array(["a", None, "c"] * 100, dtype=object)
    path = tmp_path / "fixed.parquet"
    pq.write_table(pa.table(table), path)
    return path, table


def test_columns_writes_exactly_those_columns(tmp_path, capsys, fixed_parquet):
    src, table = fixed_parquet
    rc, _, err = _run(capsys, "evaluate", src, "-o", tmp_path / "all.parquet")
    assert rc == 0, err
    asked = ["mfu", "gpu", "tco_usd", "feasible", "note"]
    rc, out, err = _run(capsys, "evaluate", src, "-o", tmp_path / "some.parquet", "--columns", " mfu,gpu, tco_usd,feasible,note")
    assert rc == 0, err
    assert "5 columns" in out
    some, full = pq.read_table(tmp_path / "some.parquet"), pq.read_table(tmp_path / "all.parquet")
    assert some.column_names == asked  # in the order asked, no input column unless named
    for name in asked:
        assert some[name].equals(full[name]), name
    assert some["note"].to_pylist()[:3] == ["a", None, "c"]  # text reads back as text, a blank as null
    assert not isinstance(pd.read_parquet(tmp_path / "some.parquet")["gpu"].dtype, pd.CategoricalDtype)
    assert b"dse.units" in pq.read_schema(tmp_path / "some.parquet").metadata


@pytest.mark.parametrize("columns, needles", [
    ("mfu,step_time", ["--columns: unknown column 'step_time'; did you mean 'step_time_s'?", "valid: model, gpu,"]),
    ("mfu,notes", ["unknown column 'notes'; did you mean 'note'?"]),
    ("mfu,,mfu", ["--columns: names 'mfu' more than once"]),
    (",", ["--columns: names no column"]),
])
def test_columns_bad_name_is_one_line_exit_2(tmp_path, capsys, fixed_parquet, columns, needles):
    src, _ = fixed_parquet
    rc, _, err = _run(capsys, "evaluate", src, "-o", tmp_path / "o.parquet", "--columns", columns)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1, err
    assert all(needle in err for needle in needles), err
    assert not (tmp_path / "o.parquet").exists()


def test_csv_input_gives_the_parquet_input_values(tmp_path, capsys, fixed_parquet):
    """A CSV table (text blanks, numbers as written) gives the values of the same table in Parquet, also
    as CSV output with --columns."""
    src, table = fixed_parquet
    csv = tmp_path / "fixed.csv"
    pd.DataFrame(table).to_csv(csv, index=False)
    rc, _, err = _run(capsys, "evaluate", src, "-o", tmp_path / "from_parquet.parquet")
    assert rc == 0, err
    rc, _, err = _run(capsys, "evaluate", csv, "-o", tmp_path / "from_csv.parquet")
    assert rc == 0, err
    a, b = pq.read_table(tmp_path / "from_parquet.parquet"), pq.read_table(tmp_path / "from_csv.parquet")
    assert a.column_names == b.column_names
    for name in a.column_names:
        assert a[name].cast(b[name].type).equals(b[name]) or a[name].to_pylist() == b[name].to_pylist(), name
    rc, _, err = _run(capsys, "evaluate", csv, "-o", tmp_path / "some.csv", "--columns", "gpu,step_time_s")
    assert rc == 0, err
    some = pd.read_csv(tmp_path / "some.csv")
    assert list(some.columns) == ["gpu", "step_time_s"]
    assert np.allclose(some["step_time_s"], a["step_time_s"].to_numpy(), rtol=1e-12, equal_nan=True)


def test_slices_write_the_table_of_one_pass(tmp_path, capsys, monkeypatch, fixed_parquet):
    """A Parquet output written in slices (one row group each) holds the cells of the whole table evaluated
    at once: the same values, column types and order, the text of reasons and a note with blanks included.
    300 rows in slices of 64: 5 row groups, the last of 44 rows."""
    import dse.commands.evaluate as evaluate_command

    src, table = fixed_parquet
    whole = objectives.search_mapping(table)
    monkeypatch.setattr(evaluate_command, "SLICE_ROWS", 64)
    rc, out, err = _run(capsys, "evaluate", src, "-o", tmp_path / "sliced.parquet")
    assert rc == 0, err
    assert f"300 designs, {int(np.sum(whole['feasible']))} feasible" in out
    meta = pq.ParquetFile(tmp_path / "sliced.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [64, 64, 64, 64, 44]
    sliced = pq.read_table(tmp_path / "sliced.parquet")
    assert sliced.column_names == list(whole)
    for name, values in whole.items():
        got = sliced[name].to_numpy(zero_copy_only=False)
        if np.asarray(values).dtype.kind == "f":
            assert np.array_equal(got, np.asarray(values, dtype=np.float64), equal_nan=True), name
        else:
            expected = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in values]
            assert list(got) == expected, name


def test_input_error_in_a_later_slice_names_its_row_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """A bad cell in the fourth slice (row 200 of 300, slices of 64) is reported with its row in the whole
    table (data row 201, 1-based) after three slices were written, and no output file is left behind."""
    import dse.commands.evaluate as evaluate_command

    table = fixed_table(300, seed=3)
    table["gpu"] = table["gpu"].copy()
    table["gpu"][200] = "h100-typo"
    src = tmp_path / "bad.parquet"
    pq.write_table(pa.table(table), src)
    monkeypatch.setattr(evaluate_command, "SLICE_ROWS", 64)
    rc, _, err = _run(capsys, "evaluate", src, "-o", tmp_path / "o.parquet")
    assert rc == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "row 201" in err and "h100-typo" in err, err
    assert list(tmp_path.iterdir()) == [src]


def test_csv_with_an_old_column_name_is_one_line_exit_2(tmp_path, capsys):
    """A table that still gives a column renamed for its unit (nic_gbps, now nic_gbyte_s) is refused with
    one line naming the file, the column and its new name, and writes nothing."""
    csv = tmp_path / "old.csv"
    pd.DataFrame({"model": ["llama3-70b"], "gpu": ["h100-sxm"], "n_gpus": [64], "global_batch": [512],
                  "nic_gbps": [25.0]}).to_csv(csv, index=False)
    rc, out, err = _run(capsys, "evaluate", csv, "-o", tmp_path / "o.parquet")
    assert rc == 2
    assert err.strip() == f"dse evaluate: error: {csv}, column 'nic_gbps': was renamed 'nic_gbyte_s' (GB/s)", err
    assert not (tmp_path / "o.parquet").exists()


def test_a_terminated_evaluate_leaves_no_hidden_temporary(tmp_path):
    """Issue 27: a killed `dse evaluate` left its hidden temporary behind. SIGTERM while the output is being
    written (its `.out.parquet.tmp` exists): exit 130, neither the output nor the temporary remains."""
    import os
    import signal
    import subprocess
    import sys
    import time

    rows = 400_000
    table = tmp_path / "big.csv"
    table.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch,train_tokens\n"
                     + "llama3-8b,h100-sxm,8,128,1,1,1,1e12\n" * rows)
    out = tmp_path / "out.parquet"
    tmp = tmp_path / ".out.parquet.tmp"
    proc = subprocess.Popen([sys.executable, "-m", "dse.cli", "evaluate", str(table), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not tmp.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.skip("the write finished before the temporary was seen")
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert not tmp.exists() and not out.exists()
