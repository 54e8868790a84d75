"""Space files and flags that used to end in a traceback (issue 27): each is now one line naming the file or
the flag and what is wrong, exit status 2, and no run directory is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run_cli

REPO = Path(__file__).resolve().parents[1]
SMALL = (REPO / "spaces" / "small.yaml").read_text()


def _space(tmp_path, text: str | bytes, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("content, expect", [
    (b"name: x\n\xff\xfe oops\n", "not UTF-8 text: byte 0xff at offset 8"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML: nested more than 64 levels deep"),
    (SMALL.replace("name:", 'name: !!int "abc"\nignored:', 1), "not valid YAML: a tagged value cannot be read"),
    (SMALL.replace("name:", "name: first\nname:", 1), "not valid YAML: key 'name' given twice"),
    (SMALL.replace("seed: 0", "seed: 1e308"), "search.seed: must be a whole number from 0 to 4294967295"),
    (SMALL.replace("seed: 0", "seed: -1"), "search.seed: must be a whole number from 0 to 4294967295"),
])
def test_a_bad_space_file_is_one_line(tmp_path, capsys, content, expect):
    path = _space(tmp_path, content)
    rc, out, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", tmp_path / "run")
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(path) in err and expect in err, err
    assert not (tmp_path / "run").exists()


def test_a_directory_given_as_the_space(tmp_path, capsys):
    (tmp_path / "space.yaml").mkdir()
    rc, _, err = run_cli(capsys, "sweep", tmp_path / "space.yaml", "--no-ray", "--quiet", "--out", tmp_path / "run")
    assert rc == 2 and "is not a file" in err and len(err.strip().splitlines()) == 1


def test_a_seed_the_generator_cannot_take(tmp_path, capsys):
    path = _space(tmp_path, SMALL)
    for seed in ("-5", str(2**32)):
        rc, _, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--seed", seed, "--out", tmp_path / "run")
        assert rc == 2 and f"--seed: must be a whole number from 0 to 4294967295, not {seed}" in err, err


@pytest.mark.parametrize("where", ["a-file", "a-file/below", "missing-parent-of-proc"])
def test_an_out_that_cannot_be_written_is_one_line(tmp_path, capsys, where):
    path = _space(tmp_path, SMALL)
    (tmp_path / "a-file").write_text("not a directory")
    out = Path("/proc/dse-cannot-write-here") if where == "missing-parent-of-proc" else tmp_path / where
    rc, _, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", out)
    assert rc == 2, err
    assert f"{out}: cannot create the run directory:" in err and len(err.strip().splitlines()) == 1


def test_stated_ceilings_and_bounded_excerpts(tmp_path, capsys):
    """A million-value list, trials of 1e308 and an aliased structure that expands enormously reach their
    message in a bounded line: the list and the trials name their ceiling, the value is shown as an excerpt."""
    from dse.spec.parse import MAX_CHOICES, MAX_TRIALS

    many = SMALL.replace("trials: 2912", "trials: 1e308")
    levels = ["&a [x, x, x, x, x, x, x, x, x, x]"] + [
        f"&{k} [" + ", ".join([f"*{p}"] * 10) + "]" for p, k in zip("abcdefg", "bcdefgh")]
    bomb = SMALL.replace("model: llama3-8b", "model: [" + ", ".join(levels) + "]")  # 10^8 leaves when expanded
    lines = SMALL.splitlines()
    cluster = next(i for i, line in enumerate(lines) if line.startswith("cluster:"))
    huge = "\n".join(lines[:cluster + 1] + ["  n_gpus: [" + ", ".join(str(8 * (i + 1)) for i in range(MAX_CHOICES + 1)) + "]"]
                     + [line for line in lines[cluster + 1:] if not line.strip().startswith("n_gpus")]) + "\n"
    for text, expect in ((many, f"search.trials: must be a whole number from 1 to {MAX_TRIALS:,}"),
                         (bomb, "workload.model"),
                         (huge, f"lists {MAX_CHOICES + 1:,} choices; at most {MAX_CHOICES:,}")):
        path = _space(tmp_path, text)
        rc, _, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", tmp_path / "run")
        assert rc == 2 and expect in err, err[:300]
        assert len(err) < 2000 and len(err.strip().splitlines()) == 1


def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch):
    """--out '' used to write the run into the current directory."""
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, "sweep", _space(tmp_path, SMALL), "--no-ray", "--quiet", "--out", "")
    assert rc == 2 and "--out: is empty" in err
    assert not (tmp_path / "run.json").exists() and not (tmp_path / "trials").exists()


def test_a_grid_beyond_its_ceiling_is_one_line(tmp_path, capsys):
    """Issue 27: a range stepped to 6e14 values ran out of memory; so would an integer range the grid
    enumerates whole."""
    for text, expect in ((SMALL.replace("step: 0.5", "step: 1e-14"), "step: gives 600,000,000,000,001 values; at most 10,000"),
                         (SMALL.replace("n_gpus: {min: 32, max: 2048, scale: pow2}", "n_gpus: {min: 32, max: 2000000}"),
                          "cluster.n_gpus: the grid would enumerate 1,999,969 values; at most 10,000")):
        rc, _, err = run_cli(capsys, "sweep", _space(tmp_path, text), "--no-ray", "--quiet", "--out", tmp_path / "run")
        assert rc == 2 and expect in err, err


def test_a_run_json_of_the_wrong_shape_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("[1, 2]")
    for argv in (("sweep", "--resume", tmp_path / "run", "--no-ray"), ("report", tmp_path / "run")):
        rc, _, err = run_cli(capsys, *argv)
        assert rc == 2 and "run.json is not a run's record" in err and len(err.strip().splitlines()) == 1, err


def test_an_address_where_no_ray_cluster_answers_is_one_line(tmp_path):
    """Issue 27: --address 127.0.0.1:1 hung in ray.init's retries; the GCS probe that looks for a token now
    says at once that nothing answers there. (A process of its own: a test before may have joined Ray here.)"""
    import subprocess
    import sys

    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, "-m", "dse.cli", "sweep", str(_space(tmp_path, SMALL)), "--quiet",
                           "--address", "127.0.0.1:1", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--address: no Ray cluster answers at 127.0.0.1:1" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
