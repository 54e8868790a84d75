"""A space's own price file (``prices:``, dse/spec/prices.py): its prices per GPU-hour replace the catalog's for
the designs it names, a bad file is one line and exit 2, and the file's sha256 is in the run's record."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import yaml
from cli_run import run_cli

from dse.errors import UserError
from dse.problem import default_scorer
from dse.space import Space
from dse.spec import load_spec
from dse.store import RunStore

SPACE = {
    "name": "quotes",
    "workload": {"model": "llama3-8b", "train_tokens": 1e10, "global_batch": 64, "seq_len": 8192, "cost_mode": "cloud"},
    "cluster": {"instance": ["owned", "aws-p5.48xlarge", "lambda-8x-h100"], "pricing": ["on_demand", "spot"],
                "gpu": ["h100-sxm"], "n_gpus": [8]},
    "mapping": "auto",
    "objectives": [{"metric": "time_to_train_days", "direction": "min"}, {"metric": "run_cost_usd", "direction": "min"}],
    "search": {"sampler": "grid", "trials": 6, "batch_size": 6, "seed": 0},
}
#: p5 on demand at 0.6 of the catalog's $6.88 (= $4.128); its spot (Capacity Block) left at the catalog's
#: $4.916; an owned-vs-market cloud H100 at $2.43 for gpus.yaml's market $3.24 (0.75 of it)
QUOTES = "aws-p5.48xlarge: {on_demand: 4.128}\nh100-sxm: 2.43\n"


def _files(tmp_path, quotes: str | None = QUOTES, **space) -> object:
    (tmp_path / "q").mkdir(parents=True, exist_ok=True)
    raw = {**SPACE, **space}
    if quotes is not None:
        (tmp_path / "q" / "my-quotes.yaml").write_text(quotes)
        raw["prices"] = "my-quotes.yaml"  # relative to the space file
    path = tmp_path / "q" / "space.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _scored(path):
    space = Space(load_spec(path))
    params = [{"instance": i, "pricing": p} for i in ("owned", "aws-p5.48xlarge", "lambda-8x-h100")
              for p in ("on_demand", "spot")]
    table = space.table(params)
    with np.errstate(all="ignore"):
        return table, dict(default_scorer(space)(table))


def test_a_price_file_changes_the_run_cost_by_its_price_ratio(tmp_path):
    """Same designs, same step time and hours: the compute rental is billed GPUs x price x hours, so it moves
    by the price ratio (4.128 / 6.88 = 0.6; 2.43 / 3.24 = 0.75), the storage not at all; a price the file does
    not give (p5's spot, every Lambda price) stays the catalog's."""
    table, quoted = _scored(_files(tmp_path))
    _, listed = _scored(_files(tmp_path / "none", quotes=None))
    np.testing.assert_array_equal(table["cloud_usd_per_gpu_hr"], [2.43, 2.43, 4.128, 4.916, 3.99, np.nan])
    np.testing.assert_array_equal(quoted["cloud_usd_per_gpu_hr"], [2.43, 2.43, 4.128, 4.916, 3.99, np.nan])
    np.testing.assert_array_equal(listed["cloud_usd_per_gpu_hr"], [3.24, 3.24, 6.88, 4.916, 3.99, np.nan])
    assert list(quoted["feasible"]) == list(listed["feasible"]) == [True] * 5 + [False]
    np.testing.assert_array_equal(quoted["time_to_train_days"][:5], listed["time_to_train_days"][:5])
    ratio = quoted["run_cost_compute_usd"] / listed["run_cost_compute_usd"]
    np.testing.assert_allclose(ratio[:5], [0.75, 0.75, 0.6, 1.0, 1.0], rtol=1e-12)
    np.testing.assert_array_equal(quoted["run_cost_storage_usd"][:5], listed["run_cost_storage_usd"][:5])
    # p5 on demand, by hand: 8 GPUs x (6.88 - 4.128) $/GPU-h x the run's hours less
    hours = listed["time_to_train_days"][2] * 24.0
    assert listed["run_cost_usd"][2] - quoted["run_cost_usd"][2] == pytest.approx(8 * 2.752 * hours, rel=1e-12)
    # Lambda publishes no spot price and the file gives none: still "no published price", not a guess
    assert not quoted["feasible"][5] and quoted["infeasible_reason"][5] == \
        "price: no published price for lambda-8x-h100 at spot"


def test_the_price_file_and_its_sha256_are_in_the_runs_record(tmp_path, capsys):
    path = _files(tmp_path)
    rc, _, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", tmp_path / "run")
    assert rc == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    prices = record["spec"]["prices"]
    assert prices["path"] == str(tmp_path / "q" / "my-quotes.yaml")
    assert prices["sha256"] == hashlib.sha256(QUOTES.encode()).hexdigest()
    assert prices["usd_per_gpu_hr"] == {"instances": {"aws-p5.48xlarge": {"on_demand": 4.128}},
                                        "gpus": {"h100-sxm": 2.43}}
    trials = RunStore(tmp_path / "run").read_trials()  # the designs were scored at the file's prices
    p5 = trials[(trials["instance"] == "aws-p5.48xlarge") & (trials["pricing"] == "on_demand")]
    assert list(p5["cloud_usd_per_gpu_hr"]) == [4.128]
    # another file is another space (its hash), so a run is never resumed under other prices
    other = load_spec(_files(tmp_path / "other", quotes=QUOTES.replace("4.128", "4.2")))
    assert other.space_hash != load_spec(path).space_hash


@pytest.mark.parametrize("quotes, key, expect", [
    ("aws-p9.48xlarge: {on_demand: 1}\n", "aws-p9.48xlarge", "unknown id; did you mean 'aws-p5.48xlarge'"),
    ("aws-p5.48xlarge: {hourly: 1}\n", "aws-p5.48xlarge.hourly", "unknown pricing; valid: on_demand, reserved_1y, "
                                                                  "reserved_3y, spot"),
    ("aws-p5.48xlarge: {on_demand: -4}\n", "aws-p5.48xlarge.on_demand", "-4 is not a price; valid: a number of USD "
                                                                        "per GPU-hour, 0 or more"),
    ("h100-sxm: cheap\n", "h100-sxm", "'cheap' is not a price"),
    ("aws-p5.48xlarge: 4.1\n", "aws-p5.48xlarge", "must map a pricing (on_demand, reserved_1y, reserved_3y, spot)"),
    ("- 4.1\n", "(top)", "must map instance ids to {pricing: USD per GPU-hour}"),
    ("vera-rubin-nvl72: {server_usd: 9e4}\n", "vera-rubin-nvl72.server_usd",
     "unknown price; did you mean 'server_usd_per_gpu'? valid: usd_per_gpu_hr, server_usd_per_gpu"),
    ("vera-rubin-nvl72: {server_usd_per_gpu: -1}\n", "vera-rubin-nvl72.server_usd_per_gpu",
     "-1 is not a price; valid: a number of USD per GPU, 0 or more"),
    ("vera-rubin-nvl72: {}\n", "vera-rubin-nvl72", "must give usd_per_gpu_hr and/or server_usd_per_gpu"),
])
def test_a_bad_price_file_is_one_line_and_exit_2(tmp_path, capsys, quotes, key, expect):
    path = _files(tmp_path, quotes=quotes)
    rc, _, err = run_cli(capsys, "sweep", path, "--no-ray", "--quiet", "--out", tmp_path / "run")
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{tmp_path / 'q' / 'my-quotes.yaml'}: {key}: {expect}" in err, err
    assert not (tmp_path / "run").exists()


def test_a_missing_price_file_or_prices_given_twice(tmp_path):
    path = _files(tmp_path)
    (tmp_path / "q" / "my-quotes.yaml").unlink()
    with pytest.raises(UserError, match=r"q/my-quotes.yaml: no such price file"):
        load_spec(path)
    both = _files(tmp_path / "both", workload={**SPACE["workload"], "cloud_usd_per_gpu_hr": 2.0})
    with pytest.raises(UserError, match=r"space.yaml: prices: the space also gives workload.cloud_usd_per_gpu_hr"):
        load_spec(both)


def test_a_quoted_gpu_hour_is_what_owning_that_gpu_is_weighed_against():
    """A price file quoting h100-sxm at $2.40 makes an owned H100 design's compared rental that quote (its
    break-even against $2.40, not the cheapest catalog offer); a GPU it does not quote keeps the model's choice."""
    import numpy as np

    from dse.spec.prices import rental_quote_column

    quotes = {"gpus": {"h100-sxm": 2.4}, "instances": {}}
    got = rental_quote_column({"gpu": np.array(["h100-sxm", "b200", "h100-sxm"], dtype=object)}, quotes, 3)
    np.testing.assert_array_equal(np.isnan(got), [False, True, False])
    assert got[0] == got[2] == 2.4
    assert rental_quote_column({"gpu": "h100-sxm"}, {"gpus": {}, "instances": {}}, 3) is None


def test_a_quoted_system_price_prices_an_announced_rack(tmp_path):
    """Rubin Ultra NVL576 has no published price (gpus.yaml: null, an announced system), so an owned design on
    it is infeasible with that reason; a price file's ``server_usd_per_gpu`` quote prices it: 144 GPU packages
    bill one whole Kyber rack, its servers' capex 144 x $95,000 = $13.68M, and an H100 the file does not quote
    keeps the catalog's price (144 x gpus.yaml's server_usd_per_gpu)."""
    space = {"workload": {**SPACE["workload"], "cost_mode": "owned", "global_batch": 576},
             "cluster": {"gpu": ["rubin-ultra-nvl576", "h100-sxm"], "n_gpus": [144]},
             "search": {"sampler": "grid", "trials": 2, "batch_size": 2, "seed": 0}}

    def scored(quotes):
        s = Space(load_spec(_files(tmp_path / str(len(quotes or "")), quotes=quotes, **space)))
        table = s.table([{"gpu": "rubin-ultra-nvl576"}, {"gpu": "h100-sxm"}])
        with np.errstate(all="ignore"):
            return dict(default_scorer(s)(table))

    unpriced = scored(None)
    assert not unpriced["feasible"][0] and unpriced["infeasible_reason"][0].startswith("price: no published price")
    quoted = scored("rubin-ultra-nvl576: {server_usd_per_gpu: 95000}\n")
    assert quoted["feasible"][0], quoted["infeasible_reason"][0]
    assert quoted["capex_servers_usd"][0] == pytest.approx(144 * 95000.0, rel=1e-12)
    from objectives import catalog

    assert quoted["capex_servers_usd"][1] == pytest.approx(144 * catalog.gpus()["h100-sxm"]["server_usd_per_gpu"], rel=1e-12)
