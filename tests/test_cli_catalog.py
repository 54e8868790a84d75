"""`dse catalog`, `dse --version`, and the "did you mean" of a misspelled name: an objective or a constraint
in a space (one line, exit 2) and a column of `dse evaluate` (a warning naming it; carried through)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dse
import objectives
from dse.cli import main
from objectives import catalog
from objectives.table import CATEGORIES


def test_catalog_gpus_lists_every_gpu_with_its_numbers(capsys):
    assert main(["catalog", "gpus"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    ids = catalog.gpu_ids()
    assert lines[0] == f"{len(ids)} GPU systems (objectives/catalog/gpus.yaml):"
    assert [ln.split()[0] for ln in lines[3:]] == ids  # every id, one a line, in order
    for unit in ("bf16 TFLOP/s", "HBM GB", "HBM TB/s", "NVLink domain GPUs", "NIC GB/s", "TDP W", "server $/GPU",
                 "cloud $/GPU-h"):
        assert unit in lines[1]
    # H100 SXM (gpus.yaml): 989 dense bf16 TFLOP/s, 80 GB at 3.35 TB/s, 8-GPU NVLink domain, 700 W
    h100 = next(ln for ln in lines if ln.startswith("h100-sxm "))
    assert h100.split()[1:6] == ["989", "1,979", "–", "80", "3.35"] and " 700 " in h100
    gb200 = next(ln for ln in lines if ln.startswith("gb200 "))
    assert gb200.split()[6] == "72"  # an NVL72 rack's NVLink domain


def test_catalog_models_counts_parameters(capsys):
    assert main(["catalog", "models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[3:]] == catalog.model_ids()
    # Llama 3.1 405B: 405.9B parameters (objectives.training.transformer; the model card says 405B), 126 layers
    row = next(ln for ln in lines if ln.startswith("llama3.1-405b ")).split()
    assert row[1:4] == ["405.9", "405.9", "126"]
    mixtral = next(ln for ln in lines if ln.startswith("mixtral-8x7b ")).split()
    assert mixtral[1:3] == ["46.7", "12.88"]  # total and active (2 of 8 experts): the card's 46.7B / 12.9B


@pytest.mark.parametrize("what, first", [("networks", "4 scale-out fabrics"), ("storage", "4 storage systems")])
def test_catalog_networks_and_storage(what, first, capsys):
    assert main(["catalog", what]) == 0
    out = capsys.readouterr().out
    assert out.startswith(first)
    ids = catalog.network_ids() if what == "networks" else catalog.storage_ids()
    assert [ln.split()[0] for ln in out.splitlines()[3:]] == ids
    if what == "networks":  # ib-ndr-400: a 400G port is 50 GB/s, on 64-port switches, 0.25 µs a hop
        row = next(ln for ln in out.splitlines() if ln.startswith("ib-ndr-400 ")).split()
        assert row[1:5] == ["50", "64", "1", "0.25"]


def test_catalog_instances_and_metrics(capsys):
    assert main(["catalog", "instances"]) == 0
    out, terms = capsys.readouterr().out.split("\n\n")
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[3:]}
    assert sorted(rows) == sorted(catalog.instances())
    # p5en (cloud-instances.csv): 8 H200, EFA at 3,200 Gbit/s per instance, $7.912 on demand, $2.975 3-year
    assert rows["aws-p5en.48xlarge"][1:11] == ["h200-sxm", "8", "8", "400", "efa", "7.91", "–", "2.98", "–", "–"]
    # AWS Capacity Blocks (the spot column on AWS) hold at most 2,048 GPUs; on demand states no limit; a
    # Capacity Block is not preempted, CoreWeave's spot is, once per 5.76 node-hours (instances.yaml, X21 X22)
    assert rows["aws-p5.48xlarge"][-3:] == ["–", "2,048", "–"]
    assert rows["coreweave-hgx-h100"][-1] == "5.76"
    _prices_have_their_kind_and_date(terms)
    assert main(["catalog", "metrics"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split()[0]: ln for ln in out.splitlines()[3:]}
    assert set(rows) == set(objectives.METRICS)
    assert re.match(r"time_to_train_days\s+days\s+\S", rows["time_to_train_days"])
    assert re.match(r"power_mw\s+MW\s+average facility power at training load", rows["power_mw"])


def _prices_have_their_kind_and_date(text: str) -> None:
    """Below the instances, one line per published price: its kind and the date its source was read
    (instances.yaml price_kind, prices_read, from cloud-instances.csv's price_region_and_date)."""
    lines = text.splitlines()
    assert lines[0] == ("40 published instance prices, each with its kind (list, spot, capacity_block, "
                        "market_estimate) and the date its source was read:")
    assert lines[1].split() == ["instance", "pricing", "kind", "read", "$/GPU-h"]
    rows = {tuple(ln.split()[:2]): ln.split()[2:] for ln in lines[3:-1]}
    published = {(i, p) for i, e in catalog.instances().items() for j, p in enumerate(CATEGORIES["pricing"])
                 if np.isfinite(e["prices"][j])}
    assert set(rows) == published and len(rows) == 40
    # p5: on demand from the 2026-01-21 vantage data (C01), $55.04 / 8; its Capacity Block "valid to 2025-01-01"
    # (C02) is no read date; p5en's 3-year from the 2026-10-03 Savings Plans price file (C08)
    assert rows[("aws-p5.48xlarge", "on_demand")] == ["list", "2026-01-21", "6.88"]
    assert rows[("aws-p5.48xlarge", "spot")] == ["capacity_block", "date", "not", "stated", "4.92"]
    assert rows[("aws-p5en.48xlarge", "reserved_3y")] == ["list", "2026-10-03", "2.98"]
    assert rows[("coreweave-hgx-h100", "spot")] == ["spot", "2026-09-20", "2.46"]  # page read 2026-09-20 (C23)
    assert rows[("oci-bm.gpu.h200.8", "reserved_3y")] == ["market_estimate", "date", "not", "stated", "5"]  # Economize
    assert rows[("gcp-a3-megagpu-8g", "on_demand")][:4] == ["list", "date", "not", "stated"]  # catalog snapshot (2025)
    assert lines[-1] == "gpus.yaml's cloud $/GPU-h (a cloud design naming no instance): market_estimate, date not stated"


def test_catalog_without_an_argument_names_every_catalog(capsys):
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"gpus ({len(catalog.gpu_ids())}): " + ", ".join(catalog.gpu_ids())
    assert f"metrics ({len(objectives.METRICS)}): dse catalog metrics" in out


def test_version(capsys):
    with pytest.raises(SystemExit) as done:  # argparse's version action exits 0 after printing
        from dse.cli import build_parser

        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"dse {dse.__version__} (objectives {objectives.__version__})"
    assert main(["--version"]) == 0


SPACE = """name: typo
workload: {model: llama3-8b, train_tokens: 1e12, global_batch: 512, seq_len: 8192}
cluster: {gpu: [h100-sxm], n_gpus: [64, 128]}
objectives:
  - {metric: OBJECTIVE, direction: min}
  - {metric: tco_usd, direction: min}
constraints: [CONSTRAINT]
"""


@pytest.mark.parametrize("objective, constraint, where, says", [
    ("time_to_train_day", "power_mw <= 30", "objectives[0].metric",
     "'time_to_train_day' is not a metric column; did you mean 'time_to_train_days'"),
    ("time_to_train_days", "powr_mw <= 30", "constraints[0]", "unknown column 'powr_mw'; did you mean 'power_mw'"),
])
def test_a_misspelled_name_in_a_space_says_did_you_mean(tmp_path, capsys, objective, constraint, where, says):
    space = tmp_path / "typo.yaml"
    space.write_text(SPACE.replace("OBJECTIVE", objective).replace("CONSTRAINT", f'"{constraint}"'))
    assert main(["sweep", str(space), "--no-ray", "--quiet", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"dse sweep: error: {space}: {where}: {says}")
    assert not (tmp_path / "run").exists()


def test_an_unknown_column_in_evaluate_is_carried_through_with_a_warning(tmp_path, capsys):
    table = tmp_path / "designs.csv"
    table.write_text("model,gpu,n_gpus,global_batch,seq_len,precision,tp,pp,micro_batch,train_tokens,n_gpu,note\n"
                     "llama3-8b,h100-sxm,64,256,8192,bf16,2,1,1,1e12,128,first\n"
                     "llama3-8b,b200,64,256,8192,bf16,2,1,1,1e12,256,second\n")
    out = tmp_path / "out.parquet"
    assert main(["evaluate", str(table), "-o", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dse evaluate: warning: {table}: 2 columns the model does not know, carried through to the "
                   f"output unchanged: 'n_gpu' (did you mean 'n_gpus' or 'gpu'?), 'note'"]
    frame = pd.read_parquet(out)
    assert list(frame["n_gpu"]) == [128, 256] and list(frame["note"]) == ["first", "second"]
    assert list(frame["n_gpus"]) == [64, 64]  # the misspelled column changed nothing
    # a table the model knows every column of draws no warning
    assert main(["evaluate", str(Path(__file__).resolve().parents[1] / "examples" / "designs.csv"),
                 "-o", str(tmp_path / "ok.parquet")]) == 0
    assert capsys.readouterr().err == ""
