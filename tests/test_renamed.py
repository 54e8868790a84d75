"""Columns renamed for their units (objectives.renamed): an old name is one line naming the new one."""

import re
from pathlib import Path

import pytest

import objectives
from objectives.renamed import RENAMED_COLUMNS, renamed_note

REPO = Path(__file__).resolve().parents[1]

#: a valid design (Megatron-LM's GPT-3 175B on 1024 H100s) that the old names are added to
DESIGN = {"model": "gpt3-175b", "gpu": "h100-sxm", "n_gpus": 1024, "global_batch": 1536, "tp": 8, "pp": 8,
          "micro_batch": 1, "train_tokens": 300e9}


def test_every_new_name_is_a_column_and_no_old_one_is():
    """Each new name is an input column or a metric, each old name neither: the table is not stale."""
    columns = set(objectives.INPUT_COLUMNS) | set(objectives.METRICS)
    assert objectives.RENAMED_COLUMNS is RENAMED_COLUMNS
    assert not set(RENAMED_COLUMNS) & columns
    assert set(RENAMED_COLUMNS.values()) <= columns
    assert all(re.search(r"_(gbps|tbps|tflops)(_|$)", old) for old in RENAMED_COLUMNS)


@pytest.mark.parametrize("old, note", [
    ("nic_gbps", "was renamed 'nic_gbyte_s' (GB/s)"),
    ("gpu_hbm_tbps", "was renamed 'gpu_hbm_tbyte_s' (TB/s)"),
    ("gpu_fp8_tflops", "was renamed 'gpu_fp8_tflop_s' (TFLOP/s)"),
    ("model_tflops_per_gpu", "was renamed 'model_tflop_s_per_gpu' (TFLOP/s per GPU)"),
])
def test_the_note_says_the_unit(old, note):
    assert renamed_note(old) == note


def test_the_unit_of_a_renamed_metric_is_the_one_its_note_says():
    """A renamed metric's declared unit (METRICS: 'unit; meaning') is the unit its new name spells."""
    for old, new in RENAMED_COLUMNS.items():
        if new in objectives.METRICS:
            unit = re.search(r"\((.*)\)$", renamed_note(old)).group(1)
            assert objectives.METRICS[new].split(";")[0] == unit.replace(" per GPU", ""), new


@pytest.mark.parametrize("entry", [objectives.evaluate, objectives.search_mapping])
@pytest.mark.parametrize("old, value", [("nic_gbps", 25.0), ("storage_link_gbps", 5.0),
                                        ("model_tflops_per_gpu", 400.0)])
def test_a_table_with_an_old_name_is_one_input_error(entry, old, value):
    """Input, catalog field or metric: the old name is an InputError naming it and the new name, not a
    column the model would ignore beside the catalog's value; the same design under the new name runs."""
    with pytest.raises(objectives.InputError) as info:
        entry({**DESIGN, old: value})
    assert info.value.column == old and info.value.row is None
    assert str(info.value) == f"column '{old}': {renamed_note(old)}"
    new = RENAMED_COLUMNS[old]
    if new in objectives.INPUT_COLUMNS:
        assert entry({**DESIGN, new: value})[new][0] == value


def test_no_old_name_is_left_in_the_repository():
    """Code, spaces, catalogs, docs and tests use the new names; only the table of renames and the tests of
    the error an old name gets spell the old ones; README.md included."""
    old = re.compile(r"\b(" + "|".join(map(re.escape, RENAMED_COLUMNS)) + r")\b")
    allowed = {REPO / "objectives" / "renamed.py", Path(__file__).resolve(), REPO / "tests" / "test_evaluate_table.py",
               REPO / "tests" / "test_sweep_spaces.py"}
    found = []
    for folder in ("objectives", "dse", "spaces", "tests", "benchmarks", "docs", "tools", "examples"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".py", ".yaml", ".yml", ".md", ".csv", ".json", ".toml") and path not in allowed:
                found += [f"{path.relative_to(REPO)}: {m.group(1)}" for m in old.finditer(path.read_text())]
    found += [f"README.md: {m.group(1)}" for m in old.finditer((REPO / "README.md").read_text())]
    assert not found, found
