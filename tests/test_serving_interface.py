"""The serving model's interface: `dse evaluate` sees a serving table by its input_len and output_len
columns, `dse validate --kind serving` reports the published measurements, and every serving output is in
objectives.METRICS with its unit."""

import pandas as pd
import pytest

import objectives
from dse.cli import main

OUTPUTS = ("output_tokens_per_s_per_gpu", "output_tokens_per_s", "ttft_s", "tpot_s", "tokens_per_s_per_user",
           "kv_cache_gb", "max_concurrency", "usd_per_mtok_out", "feasible", "infeasible_reason")


def test_every_serving_output_has_its_unit():
    for name in OUTPUTS:
        assert name in objectives.METRICS and ";" in objectives.METRICS[name], name
    assert objectives.METRICS["tpot_s"].startswith("s;") and objectives.METRICS["usd_per_mtok_out"].startswith("USD;")
    for name in ("input_len", "output_len", "kv_precision", "attn_dp", "concurrency", "ttft_slo_s", "tpot_slo_s",
                 "serving", "replicas", "engine", "request_rate_per_s"):
        assert name in objectives.INPUT_COLUMNS, name
    # training's meaning wins where both models name a column
    assert objectives.METRICS["con_memory"] == objectives.metrics()["con_memory"]


def test_dse_evaluate_dispatches_a_serving_table(tmp_path, capsys):
    src = tmp_path / "serve.csv"
    src.write_text("model,gpu,n_gpus,tp,precision,kv_precision,engine,input_len,output_len,tpot_slo_s\n"
                   "llama3.3-70b,h200-sxm,1,1,fp8,fp8,trtllm,1000,1000,0.05\n"
                   "llama3.3-70b,b200,1,1,fp4,fp8,vllm,1000,1000,\n"
                   "llama3-70b,h100-sxm,1,1,bf16,bf16,sglang,1000,1000,\n")
    out = tmp_path / "out.parquet"
    assert main(["evaluate", str(src), "-o", str(out), "--columns", ",".join(OUTPUTS)]) == 0
    assert "3 serving designs, 2 feasible" in capsys.readouterr().out  # pp, ep, attn_dp absent: searched
    table = pd.read_parquet(out)
    assert list(table.columns) == list(OUTPUTS)
    assert table["tpot_s"][0] <= 0.05 and table["feasible"].tolist() == [True, True, False]
    assert table["infeasible_reason"][2].startswith("memory: one request needs")


def test_dse_evaluate_serving_bad_input_is_one_line(tmp_path, capsys):
    src = tmp_path / "bad.csv"
    # a whole mapping given that does not make the instance (a blank or absent cell would be searched)
    src.write_text("model,gpu,n_gpus,tp,pp,ep,attn_dp,input_len,output_len\nllama3-70b,h100-sxm,4,2,1,1,1,1000,1000\n")
    assert main(["evaluate", str(src), "-o", str(tmp_path / "o.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "row 1, column 'n_gpus': tp*attn_dp*pp = 2*1*1 = 2 is not n_gpus = 4" in err
    assert main(["evaluate", str(src), "-o", str(tmp_path / "o.parquet"), "--columns", "tpot_ms"]) == 2


@pytest.mark.parametrize("kind", ["serving"])
def test_dse_validate_serving(capsys, kind, tmp_path):
    assert main(["validate", "--kind", kind, "--out", str(tmp_path / "v.csv")]) == 0
    text = capsys.readouterr().out
    assert "published serving measurements from 5 sources" in text  # 3 shared-data sources and 2 DeepSeek-R1 ones
    assert "trtllm-perf-overview-dsr1" in text and "trtllm-dsr1-best-perf" in text
    assert "MAPE of output tokens/s per GPU:" in text and "trtllm-1.0-perf-overview" in text
    # the intervals' coverage on left-out architectures, from the stored residuals (tests/test_serving_intervals.py)
    # (80% since the refits of 2026-12-03: python -m objectives.serving.fit --cross-validate)
    assert "80% intervals of output tokens/s per GPU on left-out model architectures: 80% of measurements" in text
    assert "(objectives/catalog/serving_runs.csv)" in text
    table = pd.read_csv(tmp_path / "v.csv")
    assert len(table) >= 500
    inside = (table["measured_output_tokens_per_s_per_gpu"] >= table["predicted_output_tokens_per_s_per_gpu_lo"]) \
        & (table["measured_output_tokens_per_s_per_gpu"] <= table["predicted_output_tokens_per_s_per_gpu_hi"])
    assert 0.80 <= inside.mean() <= 0.95  # in sample (the shipped factors and intervals saw every row): 87%
