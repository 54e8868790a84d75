"""The pipeline's fast paths give exactly the numbers of the plain ones.

Large tables run in chunks, with each constant column entering a chunk as its one value; object columns
are factorized by object identity first; the training model runs alone. Each is checked bit for bit
against the straightforward computation.
"""

import numpy as np
import pandas as pd
import pytest

import objectives
import objectives.mapping
import objectives.pipeline
from objectives.base import lookup, select
from objectives.table import factorize

MODELS = ["gpt3-175b", "llama3-70b", "mixtral-8x7b", "llama3-8b"]
GPUS = ["a100-sxm-80gb", "h100-sxm", "b200", "gb200"]


def _table(n=300, seed=0):
    """Varied designs: every categorical, MoE and dense models, named and natural networks, constants."""
    rng = np.random.default_rng(seed)
    tp, pp, dp, mb = (rng.choice(v, n) for v in ([1, 2, 4, 8], [1, 2, 4], [8, 16, 32], [1, 2]))
    return {
        "model": np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)],
        "gpu": np.array(GPUS, dtype=object)[rng.integers(0, len(GPUS), n)],
        "network": np.array(["ib-ndr-400", None, "roce-400"], dtype=object)[rng.integers(0, 3, n)],
        "n_gpus": (tp * pp * dp).astype(float), "global_batch": (dp * mb * 8).astype(float),
        "tp": tp.astype(float), "pp": pp.astype(float), "micro_batch": mb.astype(float),
        "vp": np.where(pp > 1, rng.choice([1, 2], n), 1).astype(float),
        "ep": np.where(rng.random(n) < 0.5, 8.0, 1.0), "cp": 1.0,
        "recompute": np.array(["none", "selective", "full"], dtype=object)[rng.integers(0, 3, n)],
        "precision": np.array(["bf16", "fp8"], dtype=object)[rng.integers(0, 2, n)],
        "stack": np.array(["megatron-core", "megatron-2021", "pytorch-fsdp"], dtype=object)[rng.integers(0, 3, n)],
        "zero_stage": rng.choice([0, 1, 2, 3], n).astype(float),
        "train_tokens": 1e12, "cost_mode": "cloud", "oversubscription": 2.0,
    }


def _assert_same(a, b):
    assert list(a) == list(b)
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype.kind in "fb":
            np.testing.assert_array_equal(x, y, err_msg=k)  # NaN equals NaN, bit for bit otherwise
        else:
            assert (x.astype(str) == y.astype(str)).all(), k


@pytest.mark.parametrize("constant", [False, True])
def test_chunks_give_the_numbers_of_one_batch(monkeypatch, constant):
    table = _table()
    if constant:  # one GPU, model and precision for every row: their columns are constant in every chunk
        table.update(gpu="h100-sxm", model="llama3-70b", precision="fp8", ep=1.0)
    whole = objectives.evaluate(table)
    monkeypatch.setattr(objectives.pipeline, "CHUNK_ROWS", 64)
    _assert_same(objectives.evaluate(table), whole)


def test_search_in_small_slices_gives_the_same_mappings(monkeypatch):
    table = {k: v for k, v in _table(12, seed=1).items() if k not in ("tp", "pp", "micro_batch", "vp", "zero_stage")}
    table["gpu"] = "h100-sxm"  # a constant column enters the candidates as its one value
    choices = {"tp": (1, 2, 4, 8), "pp": (1, 2, 4), "micro_batch": (1, 2), "zero_stage": (1, 3), "vp": (1, 2)}
    once = objectives.search_mapping(table, choices=choices)
    monkeypatch.setattr(objectives.pipeline, "CHUNK_ROWS", 40)
    monkeypatch.setattr(objectives.mapping, "MAX_JOINED_ROWS", 20)
    _assert_same(objectives.search_mapping(table, choices=choices), once)


def test_training_models_alone():
    table = _table(50)
    full = objectives.evaluate(table)
    training = objectives.evaluate(table, models=objectives.TRAINING_MODELS)
    provided = {k for m in objectives.TRAINING_MODELS for k in m.provides}
    assert provided <= set(training) and "tco_usd" not in training and "goodput" not in training
    for k in provided:
        np.testing.assert_array_equal(training[k], full[k], err_msg=k)
    with pytest.raises(ValueError, match="needs"):
        objectives.evaluate(table, models=objectives.TRAINING_MODELS[::-1])


@pytest.mark.parametrize("values", [
    np.array(["a", "b", None, "a", np.nan, "c", "b"], dtype=object),
    np.array([1, 1.0, True, "x", None, 2], dtype=object),  # equal values at different addresses merge
    np.array([str(i % 5) for i in range(1000)], dtype=object),  # a distinct object per cell
    np.array(["b", "a", "b", "c"] * 50, dtype=object)[::3],  # strided
    np.array([None, None], dtype=object),
    np.array([], dtype=object),
    np.array(["a", "b", "a"]),  # not an object column
    np.array(["gpu", "model", "gpu", "x"] * 3000, dtype=object),  # few objects: looked up in numpy
    np.array(["b", "".join(["a", "b"]), "b", "a"] * 3000, dtype=object),  # equal text at two addresses
    np.array(["a"] * 12345 + ["z"] + ["a"] * 20000, dtype=object),  # an object the sample misses
    np.array([f"n{i % 300}" for i in range(5000)], dtype=object),  # more distinct objects than a lookup takes
])
def test_factorize_is_pandas_factorize(values):
    codes, distinct = factorize(values)
    want_codes, want_distinct = pd.factorize(values)
    np.testing.assert_array_equal(codes, want_codes)
    assert list(distinct) == list(want_distinct)


def test_select_and_lookup_are_choose_and_take():
    rng = np.random.default_rng(0)
    options = tuple(rng.random(100) for _ in range(3))
    options[2][::7] = np.nan
    for codes in (rng.integers(0, 3, 100).astype(float), np.zeros(100), np.broadcast_to(2.0, (100,))):
        np.testing.assert_array_equal(select(codes, options), np.choose(codes.astype(np.intp), options))
        np.testing.assert_array_equal(lookup((2.0, 1.0, 0.5), codes), np.take([2.0, 1.0, 0.5], codes.astype(np.intp)))


@pytest.mark.parametrize("tokens", [-1.0, 0.0, float("inf")])
def test_a_token_count_without_meaning_is_an_input_error(tokens):
    """Issue 27: train_tokens of -1, 0 or inf gave negative, zero or infinite days and dollars on rows the
    model called feasible; now the cell is named (blank stays allowed: no training run costed)."""
    row = dict(model="llama3-8b", gpu="h100-sxm", n_gpus=8, global_batch=8, tp=1, pp=1, micro_batch=1)
    with pytest.raises(objectives.InputError, match="column 'train_tokens'.*finite number of tokens > 0"):
        objectives.evaluate(dict(row, train_tokens=[1e12, tokens]))
    assert objectives.evaluate(dict(row, train_tokens=[1e12, float("nan")]))["time_to_train_days"][0] > 0


def test_a_global_batch_beyond_any_run_is_an_input_error():
    row = dict(model="llama3-8b", gpu="h100-sxm", n_gpus=8, tp=1, pp=1, micro_batch=1, train_tokens=1e12)
    with pytest.raises(objectives.InputError, match="column 'global_batch': 1e\\+300 sequences is not valid; at most 1e\\+08"):
        objectives.evaluate(dict(row, global_batch=1e300))


def test_true_is_not_a_count():
    """Issue 27: a CSV cell 'True' (read as a boolean) became 1 in numeric columns; it is an InputError there,
    and means 1 only in the yes/no flags."""
    row = dict(model="llama3-8b", gpu="h100-sxm", n_gpus=8, tp=2, pp=1, micro_batch=1)
    with pytest.raises(objectives.InputError, match="column 'global_batch': 'True' is not a number"):
        objectives.evaluate(dict(row, global_batch=np.array([True])))
    flagged = objectives.evaluate(dict(row, global_batch=8, sequence_parallel=np.array([True])))
    assert flagged["sequence_parallel"][0] == 1
