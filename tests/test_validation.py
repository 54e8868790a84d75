"""The model against published measured training runs (objectives/catalog/training_runs.csv).

Bounds (issue "Training performance model"): mean absolute percentage error of tokens/s per GPU at most
8% with every source weighing the same, at most 6% on Narayanan et al. SC'21 Table 1, and no source above
12%, Megatron-Bridge included (its rows measured in a container with a since-fixed slowdown of their model
are excluded from the catalog on the evidence of the tables themselves; training_runs.md, Exclusions).
"""

import pytest

from objectives.validation import load_runs, predict, summarize


@pytest.fixture(scope="module")
def summary():
    return summarize(predict(load_runs()))


def test_headline_error(summary):
    assert summary.mape_source_weighted <= 0.08


def test_narayanan_table1(summary):
    assert summary.mape_paper <= 0.06


def test_every_source(summary):
    for source, row in summary.per_source.iterrows():
        assert row["mape"] <= 0.12, (source, row["mape"])


def test_every_included_run_is_predicted_feasible():
    result = predict(load_runs())
    assert result["predicted_feasible"].all(), result.loc[~result["predicted_feasible"], ["run_id", "model"]]
    assert len(result) >= 290
