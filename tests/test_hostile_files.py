"""Hostile input, generated (issue 27), beside tests/test_hostile_input.py's spaces and tables: hostile YAML
text (nesting thousands deep, duplicate keys, tags such as ``!!int "abc"``, anchor bombs, lists of a million
values, bytes that are not UTF-8) and hostile invocations (``--seed``, ``--trials`` and ``--out`` values,
calibration files, and run directories damaged before ``--resume`` or ``dse report``: run.json of the
wrong shape, flipped or truncated or foreign parts, a garbled manifest or journal). Each must end in one
line and exit 2, or in a correct run (exit 0), within the suite's time limit: never a traceback.

Both run under the fixed hypothesis profile of ``tests/conftest.py`` (the same inputs every run) and are
counted in :data:`conftest.HOSTILE` with the others, printed in the session summary.
"""

from __future__ import annotations

import atexit
import copy
import functools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from conftest import HOSTILE, HOSTILE_EXAMPLES  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_hostile_input import BASE_SPACE, PROFILE, _call, _check, hostile_values, sweep_space  # noqa: E402

#: where a hostile value goes in the space (a scalar or a list position)
VALUE_PATHS = [("workload", "model"), ("workload", "train_tokens"), ("cluster", "gpu"), ("cluster", "n_gpus"),
               ("search", "seed"), ("search", "trials"), ("name",), ("constraints",)]
TAGS = ['!!int "abc"', '!!float "x"', '!!binary "@@@"', '!!timestamp "nope"', '!!set {a, b}', '!!omap [a]',
        '!!str 5', '!!null ""', '!!bool "maybe"', '!python/name:os.system', '!!python/object:os.system {}',
        '!custom 1', '!!map [1]', '!!seq {a: 1}']


def _space_text(raw) -> str:
    return yaml.safe_dump(raw, sort_keys=False)


def _with_value_text(path: tuple, text: str) -> str:
    """The base space with the YAML ``text`` (a tag, a nest, an alias) as the value at ``path``."""
    raw = copy.deepcopy(BASE_SPACE)
    node = raw
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = "@@HOLE@@"
    return _space_text(raw).replace("'@@HOLE@@'", text).replace("@@HOLE@@", text)


@st.composite
def hostile_yaml(draw) -> tuple[str, bytes]:
    """A space file's bytes, hostile in its YAML rather than its values."""
    kind = draw(st.sampled_from(["deep", "duplicate", "tag", "bomb", "huge-list", "not-utf8", "long-text"]))
    path = draw(st.sampled_from(VALUE_PATHS))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 63, 64, 65, 100, 1000, 5000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        return kind, _with_value_text(path, opener * depth + "1" + closer * depth).encode()
    if kind == "duplicate":
        text = _space_text(BASE_SPACE)
        key = draw(st.sampled_from(["name", "workload", "cluster", "search", "mapping"]))
        return kind, (text + f"{key}: {json.dumps(draw(hostile_values), default=str)}\n").encode()
    if kind == "tag":
        return kind, _with_value_text(path, draw(st.sampled_from(TAGS))).encode()
    if kind == "bomb":
        levels = draw(st.integers(2, 9))
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
        return kind, ("\n".join(lines) + "\n" + _with_value_text(path, f"*a{levels - 1}")).encode()
    if kind == "huge-list":
        n = draw(st.sampled_from([10_001, 30_000, 1_000_000]))
        item = draw(st.sampled_from(["h100-sxm", "1", "32"]))
        return kind, _with_value_text(path, "[" + ", ".join([item] * n) + "]").encode()
    if kind == "not-utf8":
        head = _space_text(BASE_SPACE).encode()
        return kind, head[: draw(st.integers(0, len(head)))] + draw(st.binary(min_size=1, max_size=16)) + b"\xff\xfe"
    return kind, _with_value_text(path, "x" * draw(st.sampled_from([10_000, 1_000_000]))).encode()


@settings(PROFILE, max_examples=HOSTILE_EXAMPLES["yaml"])
@given(hostile_yaml())
def test_hostile_yaml_ends_in_one_line_or_a_run(case):
    kind, data = case
    work = Path(tempfile.mkdtemp(prefix="dse-hostile-"))
    try:
        rc, stderr, seconds = sweep_space(data, work, "yaml")
        _check("sweep", rc, stderr, seconds, f"{kind} space ({len(data):,} bytes):\n{data[:300]!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@functools.cache
def _pristine() -> Path:
    """A finished run of the base space (16 trials, two parts), made once, copied for each damage."""
    work = Path(tempfile.mkdtemp(prefix="dse-hostile-run-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    raw = copy.deepcopy(BASE_SPACE)
    (work / "space.yaml").write_text(_space_text(raw))
    rc, stderr, _ = _call(["sweep", str(work / "space.yaml"), "--no-ray", "--quiet", "--trials", "16",
                           "--out", str(work / "run")])
    assert rc == 0, stderr
    raw["search"]["seed"] = 7
    (work / "other.yaml").write_text(_space_text(raw))
    rc, stderr, _ = _call(["sweep", str(work / "other.yaml"), "--no-ray", "--quiet", "--trials", "16",
                           "--out", str(work / "other")])
    assert rc == 0, stderr
    return work


def _damage(run: Path, other: Path, kind: str, draw) -> None:
    parts = sorted((run / "trials").glob("part-*.parquet"))
    target = parts[draw(st.integers(0, len(parts) - 1))]
    if kind == "run.json":
        doc = draw(st.one_of(hostile_values, st.just({"spec": 1}), st.just({"status": "done"}),
                             st.just({"spec": {"search": []}})))
        (run / "run.json").write_text(json.dumps(doc, default=str) if draw(st.booleans()) else '{"spec": {"na')
    elif kind == "flip":
        data = bytearray(target.read_bytes())
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= 0xFF
        target.write_bytes(bytes(data))
    elif kind == "truncate":
        data = target.read_bytes()
        target.write_bytes(data[: draw(st.integers(0, len(data) - 1))])
    elif kind == "foreign":
        shutil.copy(sorted((other / "trials").glob("part-*.parquet"))[0], target)
    elif kind == "delete":
        target.unlink()
    elif kind == "directory":
        target.unlink()
        target.mkdir()
    elif kind == "manifest":
        (run / "trials" / "_manifest.json").write_text(json.dumps(draw(hostile_values), default=str)[:200])
    else:  # journal
        lines = (run / "study.journal").read_text().splitlines()
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = draw(st.sampled_from(["{", "null", "[1, 2]", '{"op_code": 99}', "\x00", ""]))
        (run / "study.journal").write_text("\n".join(lines) + "\n")


@st.composite
def hostile_invocations(draw) -> tuple[str, list[str], Path]:
    """A command line against a fresh copy of the pristine run: flags, calibration files, damaged runs."""
    base = _pristine()
    work = Path(tempfile.mkdtemp(prefix="dse-hostile-"))
    space = work / "space.yaml"
    shutil.copy(base / "space.yaml", space)
    kind = draw(st.sampled_from(["seed", "trials", "out", "calibration", "resume", "resume", "report"]))
    common = ["--no-ray", "--quiet"]
    if kind in ("seed", "trials"):
        # hostile values, or a valid but small count (a valid large --trials is a long run, not bad input)
        value = draw(st.one_of(st.sampled_from(["-5", "-1", "0", "1e308", "4294967296", "abc", "nan", "", "0x10",
                                                "10000001", "2.5", "99999999999999999999"]),
                               st.integers(-(10**30), -1).map(str), st.integers(10**7 + 1, 10**30).map(str),
                               st.integers(0, 32).map(str)))
        return kind, ["sweep", str(space), *common, f"--{kind}", value, "--out", str(work / "run")], work
    if kind == "out":
        (work / "a-file").write_text("x")
        (work / "loop").symlink_to(work / "loop")
        out = draw(st.sampled_from(["", str(work / "a-file"), str(work / "a-file" / "run"), str(work / ("n" * 300)),
                                    str(work / "loop" / "run"), "/proc/self/dse-run", str(work / "ok")]))
        return kind, ["sweep", str(space), *common, "--trials", "8", "--out", out], work
    if kind == "calibration":
        cal = json.loads((Path(__file__).parents[1] / "objectives" / "calibration.json").read_text())
        key = draw(st.sampled_from(sorted(cal.get("fitted", cal)) + ["intervals", "bogus"]))
        holder = cal["fitted"] if "fitted" in cal and key in cal["fitted"] else cal
        holder[key] = draw(st.one_of(hostile_values, st.lists(hostile_values, max_size=4)))
        (work / "cal.json").write_text(json.dumps(cal, default=str) if draw(st.booleans()) else "{\"fitted\": {")
        raw = yaml.safe_load(space.read_text())
        raw["calibration"] = "cal.json"
        space.write_text(_space_text(raw))
        return kind, ["sweep", str(space), *common, "--trials", "8", "--out", str(work / "run")], work
    run = work / "run"
    shutil.copytree(base / "run", run)
    damage = draw(st.sampled_from(["run.json", "flip", "truncate", "foreign", "delete", "directory", "manifest",
                                   "journal"]))
    _damage(run, base / "other", damage, draw)
    if kind == "report":
        return f"report/{damage}", ["report", str(run), "--out", str(work / "report")], work
    return f"resume/{damage}", ["sweep", "--resume", str(run), *common, "--trials", "24"], work


@settings(PROFILE, max_examples=HOSTILE_EXAMPLES["invocations"])
@given(hostile_invocations())
def test_hostile_invocations_end_in_one_line_or_a_run(case):
    kind, argv, work = case
    try:
        rc, stderr, seconds = _call(argv)
        HOSTILE["invocations"] += 1
        HOSTILE["rejected" if rc == 2 else "accepted"] += 1
        command = argv[0]
        if command == "report" and rc == 0:  # a report names what it could not show, on stderr: not an error
            stderr = "\n".join(line for line in stderr.splitlines() if not line.startswith("dse report: "))
        if rc == 0 and command == "sweep":  # a resume that set a part aside says so, in a line of its own
            stderr = "\n".join(line for line in stderr.splitlines() if not line.startswith("dse sweep: "))
        _check(command, rc, stderr, seconds, f"{kind}: dse {' '.join(argv)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
