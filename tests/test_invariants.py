"""The physical invariants of tests/invariants.py: they catch a broken table, and the model keeps them."""

import numpy as np
import pandas as pd
from invariants import broken_rows, system_value

import objectives


def test_system_values_come_from_the_catalog():
    np.testing.assert_array_equal(system_value(["b200", "gb200", "gb300", "h100-sxm"], "scaleup_size"), [8, 72, 72, 8])
    np.testing.assert_array_equal(system_value(["b200", "gb200", "gb300"], "nic_gbyte_s"), [50, 50, 100])
    assert np.isnan(system_value(["my-gpu"], "scaleup_size")[0])


def test_a_broken_table_is_caught_row_by_row():
    """Row 0: the old nvl72 network's H200 in a 72-GPU domain, unpriced. Row 1: a GB200 rack, fine. Row 2: a
    B200 at 800G (its system has 400G). Row 3: an async checkpoint written back to back (interval = write).
    Row 4: interval exactly 3 writes, fine."""
    table = pd.DataFrame({
        "gpu": ["h200-sxm", "gb200", "b200", "b200", "b200"],
        "scaleup_size": [72, 72, 8, 8, 8],
        "net_capex_scaleup_usd": [0.0, 0.0, 0.0, 0.0, 0.0],
        "nic_gbyte_s": [50, 50, 100, 50, 50],
        "ckpt_interval_s": [400.0, 400.0, 400.0, 75.76, 227.28],
        "ckpt_write_s": [75.76, 75.76, 75.76, 75.76, 75.76],
    })
    bad = broken_rows(table)
    assert set(bad) == {"nvlink_domain_beyond_system", "nvlink_extension_unpriced", "nic_faster_than_system",
                        "ckpt_interval_under_3_writes"}
    np.testing.assert_array_equal(bad["nvlink_domain_beyond_system"], [0])
    np.testing.assert_array_equal(bad["nvlink_extension_unpriced"], [0])
    np.testing.assert_array_equal(bad["nic_faster_than_system"], [2])
    np.testing.assert_array_equal(bad["ckpt_interval_under_3_writes"], [3])
    # declared what-ifs are not breaches, but an unpriced extension still is
    ok = broken_rows(table, whatif=("scaleup_size", "nic_gbyte_s"))
    assert set(ok) == {"nvlink_extension_unpriced", "ckpt_interval_under_3_writes"}


def test_the_model_keeps_the_invariants_over_systems_fabrics_and_storage():
    """Every system on every fabric and storage tier, sync and async, at three sizes, plus the what-if
    72-GPU B200 domain: no breach."""
    gpus = ["b200", "gb200", "gb300", "h200-sxm"]
    nets = ["ib-ndr-400", "ib-xdr-800", "roce-400"]
    tiers = ["pfs-small", "pfs-large", "allflash-qlc", "pfs-hdd"]
    grid = pd.MultiIndex.from_product([gpus, nets, tiers, ["sync", "async"], [2016.0, 8064.0, 32256.0]],
                                      names=["gpu", "network", "storage", "ckpt_mode", "n_gpus"]).to_frame(index=False)
    cols = {k: np.asarray(grid[k].tolist(), dtype=np.float64 if k == "n_gpus" else object) for k in grid}
    cols.update(model="llama3.1-405b", global_batch=2016, seq_len=8192, tp=8, pp=14, micro_batch=1, train_tokens=15e12)
    out = objectives.evaluate(cols)
    assert broken_rows(out) == {}
    whatif = objectives.evaluate(dict(cols, scaleup_size=72.0))
    assert set(broken_rows(whatif)) == {"nvlink_domain_beyond_system"}  # a what-if, and priced
    assert broken_rows(whatif, whatif=("scaleup_size",)) == {}
