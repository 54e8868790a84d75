"""`dse evaluate` and `dse validate`: real output, and one clear line with exit status 2 for bad input."""

import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest
from cli_run import run_cli as _run

GOOD = """model,gpu,n_gpus,global_batch,tp,pp,micro_batch,recompute,note
llama3-70b,h100-sxm,64,256,4,4,1,selective,fixed mapping
llama3-70b,h100-sxm,64,256,,,,,searched mapping
gpt3-175b,b200,1024,1536,8,,1,full,partly searched
"""


def test_evaluate_writes_inputs_plus_metrics(tmp_path, capsys):
    src = tmp_path / "designs.csv"
    src.write_text(GOOD)
    dst = tmp_path / "out.parquet"
    rc, out, err = _run(capsys, "evaluate", str(src), "-o", str(dst))
    assert rc == 0, err
    table = pd.read_parquet(dst)
    assert list(table["note"]) == ["fixed mapping", "searched mapping", "partly searched"]  # carried through
    assert table.loc[0, "tp"] == 4 and table.loc[0, "pp"] == 4
    assert table.loc[2, "tp"] == 8 and table.loc[2, "pp"] >= 1
    assert table["feasible"].all()
    assert (table["step_time_s"] > 0).all() and (table["mfu"] < 1).all()
    # a searched mapping is never slower than the given one for the same design
    assert table.loc[1, "step_time_s"] <= table.loc[0, "step_time_s"]
    assert b"dse.units" in pq.read_schema(dst).metadata


@pytest.mark.parametrize("body, needle", [
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxmm,64,256,4,4,1\n", "row 1, column 'gpu': unknown gpu 'h100-sxmm'"),
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxm,64,256,4,4,1\nllama3-70b,h100-sxm,60,256,8,4,1\n", "row 2, column 'n_gpus': tp*pp*cp = 8*4*1 = 32 does not divide n_gpus = 60"),
    # a searched row (tp blank) is no input error whatever its n_gpus; the given row after it is, by its own number
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxm,60,240,,1,1\nllama3-70b,h100-sxm,64,256,4,4,1\n"
     "llama3-70b,h100-sxm,64,256,4,4,3\n", "row 3, column 'global_batch': global_batch 256 is not a multiple of dp*micro_batch = 4*3"),
    ("model,gpu,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxm,256,4,4,1\n", "column 'n_gpus': is required"),
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxm,-8,256,4,4,1\n", "row 1, column 'n_gpus': -8 is not valid"),
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch,recompute\nllama3-70b,h100-sxm,64,256,4,4,1,sometimes\n", "row 1, column 'recompute': 'sometimes' is not one of none, selective, full"),
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nmy-model,h100-sxm,64,256,4,4,1\n", "row 1, column 'model': unknown model 'my-model'"),
    ("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,h100-sxm,64,256,4,4,1.5\n", "column 'micro_batch': 1.5 is not a non-negative whole number"),
])
def test_evaluate_bad_input_is_one_line_exit_2(tmp_path, capsys, body, needle):
    src = tmp_path / "bad.csv"
    src.write_text(body)
    rc, out, err = _run(capsys, "evaluate", str(src), "-o", str(tmp_path / "o.parquet"))
    assert rc == 2
    assert len(err.strip().splitlines()) == 1, err
    assert str(src) in err and needle in err, err
    assert not (tmp_path / "o.parquet").exists()


def test_evaluate_missing_file(tmp_path, capsys):
    rc, _, err = _run(capsys, "evaluate", str(tmp_path / "nope.csv"), "-o", str(tmp_path / "o.parquet"))
    assert rc == 2 and "nope.csv: no such file" in err


def test_console_script_exits_2_without_traceback(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("model,gpu,n_gpus,global_batch,tp,pp,micro_batch\nllama3-70b,x100,64,256,4,4,1\n")
    proc = subprocess.run([sys.executable, "-m", "dse.cli", "evaluate", str(src), "-o", str(tmp_path / "o.csv")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_validate_prints_sources_and_writes_rows(tmp_path, capsys):
    dst = tmp_path / "rows.csv"
    rc, out, err = _run(capsys, "validate", "--out", str(dst))
    assert rc == 0, err
    assert "narayanan21-table1" in out and "MAPE of tokens/s per GPU" in out
    rows = pd.read_csv(dst)
    assert {"measured_tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu", "ape"} <= set(rows.columns)


@pytest.mark.parametrize("body, needle", [
    ("a,b\n1,2\n", "missing column(s) source_key, measured_tokens_per_s_per_gpu"),
    ("source_key,measured_tokens_per_s_per_gpu,model,gpu,n_gpus,global_batch\nx,100,llama3-70b,q100,8,8\n", "row 1, column 'gpu': unknown gpu 'q100'"),
])
def test_validate_bad_input(tmp_path, capsys, body, needle):
    src = tmp_path / "runs.csv"
    src.write_text(body)
    rc, _, err = _run(capsys, "validate", str(src))
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
