"""Spec dimensions -> Optuna distributions, batch design tables and the exhaustive grid."""

from __future__ import annotations

import copy

import numpy as np
from conftest import TOY_SPACE
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from dse.space import Space
from dse.spec import parse_spec


def toy(vocab, **cluster):
    raw = copy.deepcopy(TOY_SPACE)
    raw["cluster"].update(cluster)
    return Space(parse_spec(raw, source="toy.yaml", vocab=vocab))


def test_distributions(vocab):
    space = toy(vocab)
    assert isinstance(space.distributions["gpu"], CategoricalDistribution)
    assert space.distributions["log2(n_gpus)"] == IntDistribution(3, 12)
    assert space.distributions["knob"] == FloatDistribution(1.0, 4.0, step=0.5)


def test_log_int_and_fixed_dimensions(vocab):
    space = toy(vocab, n_gpus={"min": 8, "max": 1024, "scale": "log"}, knob=2.5, gpu=["g2"])
    assert space.distributions == {"n_gpus": IntDistribution(8, 1024, log=True)}
    assert space.constants["knob"] == 2.5 and space.constants["gpu"] == "g2"  # one-value lists are fixed
    assert space.design_columns == ["n_gpus"]


def test_table_is_columnar_with_scalar_constants(vocab):
    space = toy(vocab)
    params = [{"gpu": "g1", "log2(n_gpus)": 3, "knob": 1.5}, {"gpu": "g3", "log2(n_gpus)": 10, "knob": 4.0}]
    table = space.table(params)
    assert table["n_gpus"].tolist() == [8, 1024] and table["n_gpus"].dtype == np.int64
    assert table["gpu"].tolist() == ["g1", "g3"]
    assert table["knob"].dtype == np.float64
    assert table["model"] == "toy-1b" and table["global_batch"] == 512  # scalars: the model broadcasts
    back = space.params_of(table)
    assert back["log2(n_gpus)"].tolist() == [3, 10]


def test_grid_covers_every_combination(vocab):
    space = toy(vocab)
    grid = space.grid()
    assert grid["log2(n_gpus)"] == list(range(3, 13))
    assert grid["knob"] == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    assert space.grid_size() == 3 * 10 * 7
    table = space.grid_table()
    assert len(table["gpu"]) == 210
    rows = set(zip(table["gpu"], table["n_gpus"].tolist(), table["knob"].tolist()))
    assert len(rows) == 210


def test_mapping_choices_narrow_defaults(vocab):
    raw = copy.deepcopy(TOY_SPACE)
    raw["mapping"] = {"tp": [1, 2], "recompute": "full"}
    space = Space(parse_spec(raw, source="toy.yaml", vocab=vocab))
    choices = space.mapping_choices({"tp": (1, 2, 4, 8), "pp": (1, 2), "recompute": ("none", "full")})
    assert choices == {"tp": (1, 2), "pp": (1, 2), "recompute": ("none", "full")}
    assert space.constants["recompute"] == "full"  # a single value fixes the column instead
