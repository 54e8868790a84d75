"""Space files: parsing, defaults, and one clear line (file, key path, what is valid) per mistake."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import TOY_SPACE

from dse.errors import UserError
from dse.spec import Constraint, load_spec, parse_spec


def spec_of(vocab, **changes):
    raw = copy.deepcopy(TOY_SPACE)
    for path, value in changes.items():
        node = raw
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        if value is _DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return parse_spec(raw, source="spaces/toy.yaml", vocab=vocab)


_DELETE = object()


def test_toy_space_parses(vocab):
    spec = spec_of(vocab)
    assert spec.name == "toy"
    kinds = {d.name: d.kind for d in spec.dimensions}
    assert kinds == {"gpu": "choice", "n_gpus": "pow2", "knob": "float"}
    n_gpus = next(d for d in spec.dimensions if d.name == "n_gpus")
    assert (n_gpus.low, n_gpus.high) == (8, 4096)
    assert spec.directions == ["min", "min"]
    assert spec.constraints == (Constraint("power_mw", "<=", 10.0),)
    assert spec.search.sampler == "nsga2" and spec.search.batch_size == 64
    assert spec.mapping == {}


def test_defaults_shorthand_and_hash(vocab):
    raw = copy.deepcopy(TOY_SPACE)
    del raw["search"], raw["constraints"]
    raw["objectives"] = [{"time_s": "min"}, "cost_usd"]
    raw["workload"]["train_tokens"] = "300e9"  # YAML 1.1 reads this as text
    spec = parse_spec(raw, source="x.yaml", vocab=vocab)
    assert spec.search.sampler == "nsga2" and spec.search.seed == 0
    assert [o.metric for o in spec.objectives] == ["time_s", "cost_usd"]
    assert spec.workload["train_tokens"] == 300e9
    assert spec.space_hash == spec.with_search(trials=99).space_hash  # trials do not change the space
    assert spec.space_hash != spec.with_search(seed=1).space_hash


def test_mapping_restriction_and_outer_mapping(vocab):
    spec = spec_of(vocab, mapping={"tp": [1, 2, 4], "recompute": "selective"})
    assert spec.mapping == {"tp": (1, 2, 4), "recompute": ("selective",)}
    spec = spec_of(vocab, cluster__pp=[1, 2])  # a mapping column moved to the outer level
    assert any(d.name == "pp" for d in spec.dimensions)


@pytest.mark.parametrize(
    "changes, where, says",
    [
        ({"colour": "red"}, "spaces/toy.yaml: colour", "unknown key; valid: name, description"),
        ({"cluster__gpus": ["g1"]}, "cluster.gpus", "unknown column 'gpus'; did you mean 'gpu' or 'n_gpus'? valid:"),
        ({"cluster__gpu": ["g1", "h9"]}, "cluster.gpu[1]", "unknown gpu 'h9'; valid: g1, g2, g3"),
        ({"workload__model": "gpt-9"}, "workload.model", "unknown model 'gpt-9'; valid: toy-1b, toy-7b"),
        ({"cluster__n_gpus": {"min": 64, "max": 8}}, "cluster.n_gpus", "empty range: min 64 is above max 8"),
        ({"cluster__n_gpus": {"min": 9, "max": 15, "scale": "pow2"}}, "cluster.n_gpus", "no power of two"),
        ({"cluster__n_gpus": {"min": 8, "max": 64, "scale": "cubic"}}, "cluster.n_gpus.scale", "valid: linear, log, pow2"),
        ({"cluster__knob": {"min": 0, "max": 4, "scale": "log"}}, "cluster.knob.min", "needs min > 0"),
        ({"cluster__knob": {"min": 1, "max": 4, "step": 0.7}}, "cluster.knob.step", "multiple of step"),
        ({"cluster__knob": {"max": 4}}, "cluster.knob.min", "is required"),
        ({"cluster__knob": []}, "cluster.knob", "empty list"),
        ({"cluster__gpu": {"min": 1, "max": 2}}, "cluster.gpu", "takes names, not a range"),
        ({"cluster__n_gpus": "many"}, "cluster.n_gpus", "must be a number, not 'many'"),
        ({"cluster__n_gpus": 12.5}, "cluster.n_gpus", "must be a whole number"),
        ({"cluster__knob": True}, "cluster.knob", "must be a number, not true/false"),
        ({"cluster": ["g1"]}, "spaces/toy.yaml: cluster", "must be a mapping"),
        ({"workload__global_batch": [1, 2]}, "workload.global_batch", "the workload is fixed"),
        ({"workload__tp": 2}, "workload.tp", "is a mapping column"),
        ({"workload__n_gpus": 8}, "cluster.n_gpus", "also given under 'workload'"),
        ({"cluster__n_gpus": _DELETE}, "cluster.n_gpus", "is required"),
        ({"objectives": [{"metric": "speed", "direction": "min"}]}, "objectives[0].metric", "'speed' is not a metric column; valid:"),
        ({"objectives": [{"metric": "time_s", "direction": "down"}]}, "objectives[0].direction", "valid: min, max"),
        ({"objectives": ["time_s", "time_s"]}, "objectives[1].metric", "already an objective"),
        ({"objectives": ["time_s", "cost_usd", "power_mw", "hbm_used_gb"]}, "objectives", "one, two or three"),
        ({"objectives": []}, "objectives", "one to three"),
        ({"constraints": ["power_mw < = 3"]}, "constraints[0]", "is not 'COLUMN <= NUMBER'"),
        ({"constraints": ["watts <= 3"]}, "constraints[0]", "unknown column 'watts'"),
        ({"constraints": ["gpu <= 3"]}, "constraints[0]", "is a name"),
        ({"search__sampler": "cmaes"}, "search.sampler", "valid: nsga2, tpe, random, grid"),
        ({"search__trials": 0}, "search.trials", "a whole number from 1 to 10,000,000"),
        ({"search__batch_size": 1}, "search.batch_size", "at least 2"),
        ({"search__batch": 8}, "search.batch", "unknown key; valid: sampler, trials, batch_size, seed"),
        ({"search__sampler": "grid", "cluster__knob": {"min": 1.0, "max": 2.0}}, "cluster.knob", "needs every range discrete"),
        ({"mapping": {"dp": [2]}}, "mapping.dp", "unknown mapping column; valid: tp, pp"),
        ({"mapping": {"recompute": ["sometimes"]}}, "mapping.recompute[0]", "valid: none, selective, full"),
        ({"mapping": "manual"}, "mapping", "give 'auto'"),
        ({"cluster__pp": [1], "mapping": {"pp": [1, 2]}}, "mapping.pp", "also a cluster dimension"),
        ({"name": "my space"}, "name", "letters, digits"),
    ],
)
def test_mistakes_name_file_key_and_what_is_valid(vocab, changes, where, says):
    with pytest.raises(UserError) as err:
        spec_of(vocab, **changes)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("spaces/toy.yaml: ")
    assert where in err.value.where
    assert says in text


def test_load_spec_reads_yaml_and_reports_syntax_errors(vocab, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(TOY_SPACE))
    assert load_spec(good, vocab=vocab).name == "toy"
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload:\n  model: [toy-1b\ncluster: {}\n")
    with pytest.raises(UserError) as err:
        load_spec(bad, vocab=vocab)
    assert str(err.value).startswith(f"{bad}: line ") and "not valid YAML" in str(err.value)
    with pytest.raises(UserError, match="no such space file"):
        load_spec(tmp_path / "missing.yaml", vocab=vocab)
    unsafe = tmp_path / "unsafe.yaml"
    unsafe.write_text("workload: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_spec(unsafe, vocab=vocab)


def test_constraint_violation_is_relative_and_signed():
    import numpy as np

    c = Constraint("power_mw", "<=", 20.0)
    assert c.violation(np.array([10.0, 20.0, 30.0])).tolist() == [-0.5, 0.0, 0.5]
    c = Constraint("mfu", ">=", 0.4)
    assert c.violation(np.array([0.5, np.nan])).tolist()[0] == pytest.approx(-0.25)
    assert c.violation(np.array([np.nan]))[0] == np.inf
