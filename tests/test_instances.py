"""Cloud instances (objectives/catalog/instances.yaml): a renting design's columns and price are the catalog's,
the catalog's numbers are the source table's, a missing price is an infeasible row, and a slower fabric
never gives a shorter step."""

import csv
import importlib.util
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import objectives
from dse.cli import main
from dse.errors import UserError
from dse.spec import parse_spec
from objectives import catalog
from objectives.catalog.instances import PRICE_KINDS
from objectives.table import CATEGORIES

ROOT = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).parent / "data" / "cloud-instances.csv"  # verbatim copy of shared/data/cloud-instances.csv
PROVIDERS = {"AWS": "aws", "GCP": "gcp", "Azure": "azure", "OCI": "oci", "CoreWeave": "coreweave", "Lambda": "lambda"}
PRICE_COLUMNS = {"on_demand": "on_demand_usd_per_gpu_hr", "reserved_1y": "reserved_1y_usd_per_gpu_hr",
                 "reserved_3y": "reserved_3y_usd_per_gpu_hr", "spot": "spot_or_capacity_block_usd_per_gpu_hr"}


def _source_rows() -> dict[str, dict]:
    """Instance id -> its row of the source table (matched by provider and instance name)."""
    names = {(e["provider"], e["name"]): iid for iid, e in catalog.instances().items()}
    out = {}
    for row in csv.DictReader(SOURCE.open(newline="")):
        iid = names.get((PROVIDERS.get(row["provider"]), row["instance"]))
        if iid is not None:
            out[iid] = row
    assert set(out) == set(catalog.instances())
    return out


def _cell(text: str) -> float:
    return np.nan if text.strip() == "" else float(text)


def _every_instance_at_every_pricing(**design) -> dict:
    """One row per (instance, pricing) of the catalog, a fixed mapping (the columns are compared, not the fit)."""
    ids, kinds = list(catalog.instances()), list(CATEGORIES["pricing"])
    pairs = list(itertools.product(ids, kinds))
    table = dict(model="llama3-8b", n_gpus=144, global_batch=144, seq_len=8192, tp=1, pp=1, micro_batch=1,
                 train_tokens=1e12, instance=np.array([i for i, _ in pairs], dtype=object),
                 pricing=np.array([p for _, p in pairs], dtype=object))
    table.update(design)
    return objectives.evaluate(table), pairs


def test_the_catalog_holds_the_source_tables_numbers():
    """Every instance's GPU, count, NVLink domain, per-GPU line rate and four prices are the source table's
    cells exactly (blank stays NaN); only GCP A3 High's rate is derived: its 1,000 Gbit/s total over 8 GPUs."""
    rows = _source_rows()
    assert len(rows) == 35  # every row of the table but NVIDIA DGX Cloud, which names no GPU and no price
    for iid, entry in catalog.instances().items():
        row = rows[iid]
        assert entry["gpu"] == row["gpu"] and entry["gpu"] in catalog.gpus(), iid
        assert entry["instance_gpus"] == float(row["gpus_per_instance"]), iid
        assert entry["scaleup_size"] == float(row["scaleup_domain_gpus"]), iid
        rate = 1000.0 / 8 if iid == "gcp-a3-highgpu-8g" else _cell(row["scaleout_gbit_per_s_per_gpu"])
        np.testing.assert_equal(entry["nic_gbyte_s"], rate / 8, err_msg=iid)
        for k, kind in enumerate(CATEGORIES["pricing"]):
            np.testing.assert_equal(entry["prices"][k], _cell(row[PRICE_COLUMNS[kind]]), err_msg=f"{iid} {kind}")
    assert rows["gcp-a3-highgpu-8g"]["scaleout_gbit_per_s_per_instance"] == "1000"


def test_every_published_price_has_its_kind_and_the_date_it_was_read():
    """price_kind: list for on-demand and commitment prices, the instance's spot_kind for its spot column, a
    market estimate where the figure is a third party's (OCI H200's 3-year, Economize via C08); prices_read:
    the ISO date prices_source gives that price, None ('date not stated') for a snapshot dated by year or AWS
    Capacity Block rates 'valid to 2025-01-01'. An unpublished price has neither."""
    kinds = set(catalog.instances()["aws-p5.48xlarge"]["price_kind"].values()) - {None}
    assert kinds == {"list", "capacity_block"}
    for iid, e in catalog.instances().items():
        for j, pricing in enumerate(CATEGORIES["pricing"]):
            kind, read = e["price_kind"][pricing], e["prices_read"][pricing]
            if np.isnan(e["prices"][j]):
                assert kind is None and read is None, (iid, pricing)
                continue
            assert kind in PRICE_KINDS, (iid, pricing)
            if (iid, pricing) != ("oci-bm.gpu.h200.8", "reserved_3y"):
                assert kind == ("list" if pricing != "spot" else e["spot_kind"]), (iid, pricing)
            assert read is None or (re.fullmatch(r"\d{4}-\d{2}-\d{2}", read) and read in e["prices_source"]), iid
    dated = {iid: e["prices_read"]["on_demand"] for iid, e in catalog.instances().items()}
    assert dated["aws-p5.48xlarge"] == "2026-01-21" and dated["lambda-8x-h100"] == "2026-09-20"
    assert dated["gcp-a3-megagpu-8g"] is None  # "us-east4, catalog snapshot (2025) (C11)"
    assert catalog.instances()["aws-p5.48xlarge"]["prices_read"]["spot"] is None  # "rates valid to 2025-01-01"
    assert catalog.instances()["oci-bm.gpu.h200.8"]["price_kind"]["reserved_3y"] == "market_estimate"


def test_the_builder_makes_the_catalog_from_the_source_table():
    """instances.yaml is tools/build_instances.py's output from the table (the verbatim copy here), byte for byte."""
    spec = importlib.util.spec_from_file_location("build_instances", ROOT / "tools" / "build_instances.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    path = ROOT / "objectives" / "catalog" / "instances.yaml"
    assert builder.build(SOURCE.parent, path) == path.read_text()


def test_a_renting_row_gets_its_instances_columns_and_price():
    out, pairs = _every_instance_at_every_pricing(gpu="b300")  # the row's own gpu is the instance's where it rents
    rows = _source_rows()
    for r, (iid, kind) in enumerate(pairs):
        row, entry = rows[iid], catalog.instances()[iid]
        assert out["gpu"][r] == row["gpu"] and out["cost_mode"][r] == "cloud", (iid, kind)
        assert out["provider"][r] == iid.split("-")[0] == entry["provider"]
        assert out["scaleup_size"][r] == float(row["scaleup_domain_gpus"])
        price = _cell(row[PRICE_COLUMNS[kind]])
        np.testing.assert_equal(out["cloud_usd_per_gpu_hr"][r], price, err_msg=f"{iid} {kind}")
        rate = _cell(row["scaleout_gbit_per_s_per_gpu"]) if iid != "gcp-a3-highgpu-8g" else 125.0
        if np.isfinite(rate):
            assert out["nic_gbyte_s"][r] == rate / 8, iid
        else:  # no rate published: the GPU system's NIC (gpus.yaml) at the fabric's port
            assert out["nic_gbyte_s"][r] == min(catalog.gpus()[row["gpu"]]["nic_gbyte_s"], 50.0), iid
    # the fabric kind's figures (instances.yaml fabrics): p5's EFA, A3 Mega's TCPXO, ND H100 v5's InfiniBand
    at = {iid: r for r, (iid, kind) in enumerate(pairs) if kind == "on_demand"}
    assert out["net_eff_rel"][at["aws-p5.48xlarge"]] == 0.957
    assert out["net_transport_latency_s"][at["aws-p5.48xlarge"]] == 15e-6
    assert out["net_eff_rel"][at["gcp-a3-megagpu-8g"]] == 0.972
    assert out["net_transport_latency_s"][at["gcp-a3-megagpu-8g"]] == 52e-6
    assert out["net_eff_rel"][at["azure-nd-h100-v5"]] == 1.0 and out["network"][at["azure-nd-h100-v5"]] == "ib-ndr-400"
    # storage: AWS FSx for Lustre $0.145 and S3 $0.023 per GB-month; CoreWeave $0.07 and $0.06; GCP's file
    # system is not priced (storage.yaml's pfs-large stands in), GCS is $0.020
    assert out["storage_cloud_usd_per_tb_month"][at["aws-p5.48xlarge"]] == 145
    assert out["storage_object_usd_per_tb_month"][at["aws-p5.48xlarge"]] == 23
    assert out["storage_cloud_usd_per_tb_month"][at["coreweave-hgx-h100"]] == 70
    assert out["storage_cloud_usd_per_tb_month"][at["gcp-a3-megagpu-8g"]] == 210
    assert out["storage_object_usd_per_tb_month"][at["gcp-a3-megagpu-8g"]] == 20


def test_a_three_year_reservation_is_cheaper_than_on_demand_wherever_both_are_published():
    both = {iid: e["prices"] for iid, e in catalog.instances().items() if np.isfinite(e["prices"][[0, 2]]).all()}
    assert set(both) == {"aws-p5en.48xlarge", "oci-bm.gpu.h200.8"}  # the table's only such pairs
    for iid, prices in both.items():
        assert prices[2] < prices[0], iid  # $2.975 < $7.912, $5.00 < $10.00
    out = objectives.evaluate(dict(model="llama3-8b", n_gpus=64, global_batch=64, seq_len=8192, tp=1, pp=1,
                                   micro_batch=1, train_tokens=1e11, instance="aws-p5en.48xlarge",
                                   pricing=np.array(["on_demand", "reserved_3y"], dtype=object)))
    assert out["run_cost_usd"][1] < out["run_cost_usd"][0]
    # the run's cost is the hours used; the reservation commits to three years of 64 GPUs
    np.testing.assert_allclose(out["lifetime_cost_usd"][1] - out["run_cost_storage_usd"][1],
                               64 * 2.975 * 3 * 365.25 * 24, rtol=1e-12)


def test_a_rented_design_has_no_capex_and_an_owned_one_has():
    out = objectives.evaluate(dict(model="llama3-8b", gpu="h100-sxm", n_gpus=64, global_batch=64, seq_len=8192, tp=1,
                                   pp=1, micro_batch=1, train_tokens=1e11,
                                   instance=np.array(["owned", "aws-p5.48xlarge", "coreweave-hgx-h100", None], dtype=object)))
    np.testing.assert_array_equal(out["capex_usd"][1:3], 0.0)
    np.testing.assert_array_equal(out["capex_servers_usd"][1:3], 0.0)
    assert out["capex_usd"][0] == out["capex_usd"][3] > 64 * 36_750  # owned, the blank cell too
    assert list(out["provider"]) == ["owned", "aws", "coreweave", "owned"]
    assert list(out["instance"]) == ["owned", "aws-p5.48xlarge", "coreweave-hgx-h100", "owned"]
    # owning: the lifetime cost holds the capex and five years of running; renting on demand: the run
    assert out["lifetime_cost_usd"][0] > out["capex_usd"][0] > out["run_cost_usd"][0]
    assert out["lifetime_cost_usd"][1] == pytest.approx(out["run_cost_usd"][1], rel=1e-12)
    np.testing.assert_array_equal(out["tco_usd"], out["run_cost_usd"])


def test_a_missing_price_is_an_infeasible_row_with_its_reason():
    out = objectives.search_mapping(dict(
        model="llama3-8b", n_gpus=64, global_batch=64, seq_len=8192, train_tokens=1e11,
        instance=np.array(["azure-nd-h100-v5", "azure-nd-h100-v5", "gcp-a4-highgpu-8g", "gcp-a4-highgpu-8g"],
                          dtype=object),
        pricing=np.array(["on_demand", "reserved_3y", "on_demand", "on_demand"], dtype=object),
        cloud_usd_per_gpu_hr=np.array([np.nan, np.nan, np.nan, 9.0])))  # a table's own price is a what-if
    assert list(out["feasible"]) == [True, False, False, True]
    assert list(out["con_price"]) == [0, 1, 1, 0]
    assert out["infeasible_reason"][1] == "price: no published price for azure-nd-h100-v5 at reserved_3y"
    assert out["infeasible_reason"][2] == "price: no published price for gcp-a4-highgpu-8g at on_demand"
    assert np.isnan(out["run_cost_usd"][1:3]).all() and np.isnan(out["lifetime_cost_usd"][1:3]).all()
    assert out["cloud_usd_per_gpu_hr"][3] == 9.0 and np.isfinite(out["run_cost_usd"][3])
    # the search still found the design's best mapping: the price does not decide the mapping
    assert out["step_time_s"][1] == out["step_time_s"][0]


def test_a_rental_larger_than_the_advertised_cluster_is_infeasible():
    """AWS Capacity Blocks hold at most 64 instances each and 256 across blocks (C03): 2,048 p5 GPUs."""
    out = objectives.search_mapping(dict(model="llama3-8b", n_gpus=np.array([2048.0, 4096.0, 4096.0]), global_batch=4096,
                                         seq_len=8192, train_tokens=1e12, instance="aws-p5.48xlarge",
                                         pricing=np.array(["spot", "spot", "on_demand"], dtype=object)))
    assert list(out["feasible"]) == [True, False, True]
    assert out["infeasible_reason"][1] == \
        "rental: 4096 GPUs, above the largest aws-p5.48xlarge cluster advertised at spot (2048)"


def test_an_instance_without_a_published_cluster_fabric_rents_one_instance():
    """Lambda's rows (C24) give no scale-out fabric, line rate or cluster: a lambda-8x-h100 rental is one
    instance, 8 GPUs, at most (instances.yaml max_cluster_gpus, one_instance), not a 16-GPU InfiniBand cluster;
    AWS p5 documents its fabric (EFA) and no on-demand limit, so 1,024 on-demand GPUs (128 instances) rent."""
    entries = catalog.instances()
    assert [i for i, e in entries.items() if e["one_instance"]] == ["lambda-8x-h100", "lambda-8x-b200",
                                                                    "lambda-8x-a100-80gb"]
    assert list(entries["lambda-8x-h100"]["max_gpus"]) == [8.0] * 4
    out = objectives.search_mapping(dict(
        model="llama3-8b", n_gpus=np.array([16.0, 8.0, 1024.0]), global_batch=1024, seq_len=8192, train_tokens=1e11,
        instance=np.array(["lambda-8x-h100", "lambda-8x-h100", "aws-p5.48xlarge"], dtype=object), pricing="on_demand"))
    assert list(out["feasible"]) == [False, True, True]
    assert list(out["rental_max_gpus"]) == [8.0, 8.0, np.inf]
    assert list(out["con_rental_gpus"][:2]) == [8.0, 0.0]  # 16 - 8, 8 - 8
    assert out["infeasible_reason"][0] == \
        "rental: 16 GPUs, no published cluster fabric for lambda-8x-h100: at most 8 GPUs (one instance)"
    assert list(out["infeasible_reason"][1:]) == ["", ""]
    # a table's own rental_max_gpus is a what-if (a cluster the source does not show): the general reason
    what_if = objectives.search_mapping(dict(model="llama3-8b", n_gpus=32.0, global_batch=64, seq_len=8192,
                                             train_tokens=1e11, instance="lambda-8x-h100", rental_max_gpus=16.0))
    assert what_if["infeasible_reason"][0] == \
        "rental: 32 GPUs, above the largest lambda-8x-h100 cluster advertised at on_demand (16)"


def _topology_slower(a: int, b: int, out) -> bool:
    """Row a's fabric is no faster than row b's in every figure the collectives read."""
    return (out["net_bw_out_gbyte_s"][a] <= out["net_bw_out_gbyte_s"][b]
            and out["net_bw_cross_gbyte_s"][a] <= out["net_bw_cross_gbyte_s"][b]
            and out["net_latency_s"][a] >= out["net_latency_s"][b])


@pytest.mark.parametrize("design", [
    dict(model="llama3-70b", n_gpus=1152, global_batch=1152, seq_len=8192, train_tokens=15e12),
    dict(model="mixtral-8x7b", n_gpus=576, global_batch=576, seq_len=4096, train_tokens=1e12),
])
def test_a_slower_fabric_never_gives_a_shorter_step(design):
    """Every pair of catalog instances with the same GPU and NVLink domain, the same design, each with its best
    mapping: where one fabric is no faster than the other in bandwidth (ring and cross) and latency, its step
    is no shorter. Includes GCP A3 Mega (200G TCPXO) against AWS p5 (400G EFA) and Azure ND H100 v5 (400G IB)."""
    ids = [iid for iid, e in catalog.instances().items() if e["gpu"] in ("h100-sxm", "h200-sxm", "b200", "gb200")]
    out = objectives.search_mapping({**design, "instance": np.array(ids, dtype=object), "pricing": "on_demand"})
    compared = 0
    for a, b in itertools.permutations(range(len(ids)), 2):
        same = out["gpu"][a] == out["gpu"][b] and out["scaleup_size"][a] == out["scaleup_size"][b]
        if same and _topology_slower(a, b, out):
            compared += 1
            assert out["step_time_s"][a] >= out["step_time_s"][b] * (1 - 1e-12), (ids[a], ids[b])
    assert compared >= 20
    mega, p5 = ids.index("gcp-a3-megagpu-8g"), ids.index("aws-p5.48xlarge")
    assert out["step_time_s"][mega] > out["step_time_s"][p5]


def test_unknown_instance_or_pricing_is_one_line_and_exit_2(tmp_path, capsys):
    for column, value in (("instance", "aws-p9.96xlarge"), ("pricing", "reserved_5y")):
        src = tmp_path / f"{column}.csv"
        pd.DataFrame({"model": ["llama3-8b"] * 2, "n_gpus": [64, 64], "global_batch": [64, 64],
                      "instance": ["aws-p5.48xlarge", "aws-p5.48xlarge"], "pricing": ["on_demand", "spot"],
                      column: ["aws-p5.48xlarge" if column == "instance" else "spot", value]}).to_csv(src, index=False)
        rc = main(["evaluate", str(src), "-o", str(tmp_path / "o.parquet")])
        out, err = capsys.readouterr()
        assert rc == 2
        assert len(err.strip().splitlines()) == 1, err
        assert f"row 2, column '{column}'" in err and f"'{value}' is not one of" in err, err
        valid = ("aws-p5.48xlarge", "gcp-a3-megagpu-8g", "owned") if column == "instance" else CATEGORIES["pricing"]
        assert all(v in err for v in valid), err
        assert not (tmp_path / "o.parquet").exists()


SPACE = {
    "workload": {"model": "llama3-8b", "global_batch": 64, "train_tokens": 1e11},
    "cluster": {"n_gpus": [64], "instance": ["aws-p5.48xlarge", "gcp-a3-megagpu-8g"], "pricing": ["on_demand", "spot"]},
    "objectives": [{"metric": "time_to_train_days", "direction": "min"}, {"metric": "run_cost_usd", "direction": "min"}],
}


def test_a_space_sweeps_instances_and_names_what_is_valid():
    spec = parse_spec(SPACE, source="clouds.yaml")  # renting only: the instances name the GPU
    assert [d.name for d in spec.dimensions] == ["n_gpus", "instance", "pricing"]
    with pytest.raises(UserError, match=r"cluster.instance\[1\]: 'aws-p9' is not a valid instance; valid: owned, "):
        parse_spec({**SPACE, "cluster": {**SPACE["cluster"], "instance": ["aws-p5.48xlarge", "aws-p9"]}}, source="clouds.yaml")
    with pytest.raises(UserError, match=r"cluster.pricing\[0\]: 'hourly' is not a valid pricing; valid: on_demand"):
        parse_spec({**SPACE, "cluster": {**SPACE["cluster"], "pricing": ["hourly"]}}, source="clouds.yaml")
    with pytest.raises(UserError, match=r"cluster.gpu: is required"):  # an owned design needs its GPU
        parse_spec({**SPACE, "cluster": {**SPACE["cluster"], "instance": ["owned", "aws-p5.48xlarge"]}}, source="c.yaml")


def test_an_owned_design_has_no_pricing_and_needs_its_gpu():
    """A space sweeping `pricing` beside `instance: owned` gives its owned designs no pricing (one design, not
    four, on a front); an owned design without a GPU is one line naming the column."""
    out = objectives.evaluate(dict(model="llama3-8b", gpu="h100-sxm", n_gpus=64, global_batch=64, tp=1, pp=1,
                                   micro_batch=1, train_tokens=1e11,
                                   instance=np.array(["owned", "owned", "aws-p5.48xlarge"], dtype=object),
                                   pricing=np.array(["spot", "reserved_3y", "spot"], dtype=object)))
    assert list(out["pricing"]) == [None, None, "spot"]
    assert out["run_cost_usd"][0] == out["run_cost_usd"][1] > 0
    with pytest.raises(objectives.InputError, match=r"row 1, column 'gpu': is required for a design that owns"):
        objectives.evaluate(dict(model="llama3-8b", n_gpus=64, global_batch=64, tp=1, pp=1, micro_batch=1,
                                 instance=np.array(["aws-p5.48xlarge", "owned"], dtype=object)))
