"""Network topology (objectives/training/topology.py) and the network catalog, checked by hand.

Fat-tree sizing (hardware-catalog 2.4): radix k, d = k/2 ports down at 1:1; one tier holds k endpoints,
two k*d, three k*(k/2)*d. Counts against NVIDIA's DGX SuperPOD B200 table (S44).
"""

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import objectives
from objectives import catalog
from objectives.calibration import Calibration
from objectives.pipeline import prepare
from objectives.training.topology import down_ports, fat_tree, fat_tree_capacity

CATALOG = Path(catalog.__file__).parent


def _fixed(**row):
    """A 405B-class design with a fixed mapping (tp 8, pp 16) on H100s."""
    base = dict(model="llama3.1-405b", gpu="h100-sxm", n_gpus=16384, global_batch=2048, seq_len=8192,
                tp=8, pp=16, micro_batch=1, train_tokens=15e12)
    base.update(row)
    return base


def test_capacity_of_a_fat_tree():
    # k = 64 at 1:1: d = 32; 1 tier 64, 2 tiers 64*32 = 2,048, 3 tiers 64*32*32 = 65,536
    assert down_ports(64, 1.0) == 32
    np.testing.assert_array_equal(fat_tree_capacity(64, [1, 2, 3]), [64, 2048, 65536])
    # Quantum-X800 k = 144: 144*72 = 10,368 (S38), 144*72*72 = 746,496; SN5600 at 400G k = 128: 8,192
    np.testing.assert_array_equal(fat_tree_capacity(144, [2, 3]), [10368, 746496])
    assert fat_tree_capacity(128, 2) == 8192
    # 2:1 above the leaf: d = floor(64*2/3) = 42 down, 22 up; 2 tiers hold 64*42 = 2,688
    assert down_ports(64, 2.0) == 42
    assert fat_tree_capacity(64, 2, 2.0) == 2688


@pytest.mark.parametrize("n, tiers, leaf, spine, core", [
    (64, 1, 1, 0, 0),          # one switch
    (512, 2, 16, 8, 0),        # S44: 2 SUs: 512/32 = 16 leaf, 512/64 = 8 spine
    (1024, 2, 32, 16, 0),      # S44: 4 SUs
    (2048, 2, 64, 32, 0),      # S44: 8 SUs, the 2-tier limit
    (2049, 3, 65, 65, 33),     # one more: ceil(2049/32) = 65 leaf, 65*32 = 2,080 up, /32 = 65 spine, /64 -> 33 core
    (4096, 3, 128, 128, 64),   # S44: 16 SUs
    (16384, 3, 512, 512, 256), # S44: 64 SUs
    (65536, 3, 2048, 2048, 1024),  # the 3-tier limit
    (65537, 4, 2049, 2049, 2049 + 1025),  # a fourth tier: 2,049*32 = 65,568 up; spine 2,049; then 2,049 + 1,025
])
def test_switch_counts_non_blocking(n, tiers, leaf, spine, core):
    t = fat_tree(n, 64, 1.0)
    assert (t["tiers"], t["leaf"], t["spine"], t["core"]) == (tiers, leaf, spine, core)
    # cables: N from GPUs to leaves, then the leaves' uplinks (= N at 1:1, full leaves) per layer above
    assert t["links_leaf"] == n
    assert t["links_spine"] == (0 if tiers == 1 else leaf * 32)


def test_switch_counts_two_to_one():
    # 16,384 GPUs, k = 64, 2:1: d = 42, u = 22; 3 tiers (2,688 < 16,384 <= 86,016)
    # leaf = ceil(16,384/42) = 391; uplinks 391*22 = 8,602; spine ceil(8,602/32) = 269; core ceil(8,602/64) = 135
    t = fat_tree(16384, 64, 2.0)
    assert (t["tiers"], t["leaf"], t["spine"], t["core"]) == (3, 391, 269, 135)
    assert t["links_spine"] == 8602 and t["links_core"] == 8602
    # 795 switches instead of 1,280 at 1:1; cables 16,384 + 2*8,602 = 33,588 instead of 49,152


def test_16k_h100_fabric_ports_cost_and_power():
    out = objectives.evaluate(_fixed(network="ib-ndr-400"))
    # 1,280 switches x 64 ports = 81,920 ports; 3 x 16,384 = 49,152 cables, 98,304 transceivers
    assert out["net_tiers"][0] == 3 and out["net_switches"][0] == 1280
    assert out["net_switch_ports"][0] == 81920
    assert out["net_links"][0] == 49152 and out["net_transceivers"][0] == 98304
    # capex: switches 1,280 x 43,000 = 55,040,000; optics 98,304 x 500 = 49,152,000;
    # fibre 49,152 x 100 = 4,915,200; NICs 16,384 x 2,000 = 32,768,000; total 141,875,200
    assert out["net_capex_switch_usd"][0] == 55_040_000
    assert out["net_capex_optics_usd"][0] == 49_152_000 + 4_915_200
    assert out["net_capex_nic_usd"][0] == 32_768_000
    assert out["net_capex_usd"][0] == 141_875_200
    # per GPU: switches $3,360 + cables and optics $3,300 (S47 3-tier: $2,812 + $3,800, at $36k a switch)
    # power: 1,280 x 800 W + switch-side optics (16,384 + 2 x 32,768) x 8.5 W = 1,024,000 + 696,320 = 1,720,320 W
    # = 105 W per GPU (S49 measured 115-250 W per GPU of network power)
    assert out["net_power_w"][0] == 1_720_320


def test_bandwidth_and_latency_each_collective_sees():
    cal = Calibration.load()
    # 256 GPUs = 32 HGX domains: one leaf per rail holds all 32 (d = 32): one hop, no oversubscription
    small = objectives.evaluate(_fixed(n_gpus=256, global_batch=256, pp=4, network="ib-ndr-400", oversubscription=2))
    assert small["net_oversub_seen"][0] == 1 and small["net_hops"][0] == 1
    assert small["net_bw_out_gbyte_s"][0] == pytest.approx(50 * cal.scaleout_eff)
    assert small["net_latency_s"][0] == pytest.approx(cal.scaleout_latency_s + 250e-9)
    # 16,384 GPUs at 2:1: the job spans 2,048 domains > 42 per leaf: 42/22 = 1.909 oversubscribed, 2*3-1 = 5 hops
    big = objectives.evaluate(_fixed(network="ib-ndr-400", oversubscription=2))
    assert big["net_oversub_seen"][0] == pytest.approx(42 / 22)
    assert big["net_hops"][0] == 5
    # ring collectives keep the NIC rate (ring neighbours share a leaf); all-to-all and pipeline sends,
    # spread over the fabric, get 46.5 x 22/42 = 24.36 GB/s
    assert big["net_bw_out_gbyte_s"][0] == pytest.approx(50 * cal.scaleout_eff)
    assert big["net_bw_cross_gbyte_s"][0] == pytest.approx(50 * cal.scaleout_eff * 22 / 42)
    assert big["net_latency_s"][0] == pytest.approx(cal.scaleout_latency_s + 5 * 250e-9)  # 11.25 us
    one = objectives.evaluate(_fixed(network="ib-ndr-400", oversubscription=1))
    assert one["net_bw_cross_gbyte_s"][0] == pytest.approx(50 * cal.scaleout_eff)
    # the step-time model sees it: pipeline sends slow down, a step never gets faster, the fabric is cheaper
    assert big["time_pp_comm_s"][0] > one["time_pp_comm_s"][0]
    assert big["step_time_s"][0] >= one["step_time_s"][0]
    assert big["net_capex_usd"][0] < one["net_capex_usd"][0]
    # an MoE all-to-all across the fabric slows too
    moe = dict(model="mixtral-8x7b", n_gpus=4096, global_batch=4096, seq_len=4096, tp=1, pp=1, ep=8,
               network="ib-ndr-400", scaleup_size=4)
    a2a = objectives.evaluate({**_fixed(**moe), "oversubscription": np.array([1.0, 2.0])})
    assert a2a["time_ep_comm_s"][1] > a2a["time_ep_comm_s"][0]


def test_a_row_without_a_network_keeps_the_calibrated_network():
    cal = Calibration.load()
    plain = objectives.evaluate(_fixed())
    # costed as the natural fabric (H100: 400G InfiniBand, k = 64) ...
    assert plain["net_switch_radix"][0] == 64 and plain["net_tiers"][0] == 3
    # ... but the collectives see exactly the calibrated figures: NIC x 0.93, NCCL's flat latency
    assert plain["net_bw_out_gbyte_s"][0] == plain["net_bw_cross_gbyte_s"][0] == 50 * cal.scaleout_eff
    assert plain["net_latency_s"][0] == cal.scaleout_latency_s
    named = objectives.evaluate(_fixed(network="ib-ndr-400", net_hop_latency_s=0.0))
    assert named["step_time_s"][0] == plain["step_time_s"][0]
    assert named["net_capex_usd"][0] == plain["net_capex_usd"][0]
    # natural fabric by NIC speed: A100 (25 GB/s) -> 200G, B300 (100) -> XDR 800G
    ids = catalog.natural_network(np.array([25.0, 12.5, 50.0, 100.0]))
    assert list(ids) == ["ib-ndr-200", "ib-ndr-200", "ib-ndr-400", "ib-xdr-800"]


def test_a_gpu_runs_at_the_lesser_of_its_system_nic_and_the_fabric_port():
    """The fabric sets switches and NICs; the system how fast a GPU drives them: HGX B200 and GB200 carry
    400G ConnectX-7 (50 GB/s), GB300 800G ConnectX-8 (100 GB/s). On XDR 800 (100 GB/s ports) that is 50,
    50 and 100; a GB300 on NDR 400 runs at 50; a B200 on RoCE 400 at 50. A table's nic_gbyte_s is a what-if
    and wins (B200 at 100 on XDR)."""
    table = _fixed(gpu=np.array(["b200", "gb200", "gb300", "gb300", "b200", "b200"]),
                   network=np.array(["ib-xdr-800", "ib-xdr-800", "ib-xdr-800", "ib-ndr-400", "roce-400", "ib-xdr-800"]),
                   n_gpus=np.full(6, 16128.0), tp=8, pp=14,
                   nic_gbyte_s=np.array([np.nan, np.nan, np.nan, np.nan, np.nan, 100.0]))
    _, cols = prepare(table)
    np.testing.assert_array_equal(cols["nic_gbyte_s"], [50, 50, 100, 50, 50, 100])
    np.testing.assert_array_equal(cols["net_port_gbyte_s"], [100, 100, 100, 50, 50, 100])
    out = objectives.evaluate(table)
    # one NIC per GPU at the dearer of the system's and the fabric's: a ConnectX-8 ($3,250) bought for a B200
    # on XDR still runs at 400G; a GB300 tray keeps its ConnectX-8 on NDR 400 ($3,250, not the fabric's $2,000)
    np.testing.assert_array_equal(out["net_capex_nic_usd"], 16128 * np.array([3250, 3250, 3250, 3250, 2000, 3250]))
    priced = objectives.evaluate(dict(table, net_nic_usd=1000.0))  # a table's NIC price is a what-if
    np.testing.assert_array_equal(priced["net_capex_nic_usd"], np.full(6, 16128 * 1000.0))
    # the collectives see the GPU's rate: 50 x 0.93 = 46.5 GB/s on the B200 row, 93 on the GB300 row
    cal = Calibration.load()
    np.testing.assert_allclose(out["net_bw_out_gbyte_s"][[0, 2]], [50 * cal.scaleout_eff, 100 * cal.scaleout_eff])


def test_the_nvlink_domain_is_the_systems_and_a_larger_one_is_a_priced_what_if():
    """HGX B200 is an 8-GPU NVLink domain, a GB200 NVL72 rack a 72-GPU one (its switch trays in the rack
    price); no network changes that. scaleup_size: 72 on B200s is a what-if: NVLink switches for the
    extension at $6,250 and 190 W per GPU (prices.yaml), 16,128 x 6,250 = $100.8M."""
    table = _fixed(gpu=np.array(["b200", "gb200", "b200", "gb200"]), network="ib-xdr-800",
                   n_gpus=np.full(4, 16128.0), tp=8, pp=14, scaleup_size=np.array([np.nan, np.nan, 72.0, 8.0]))
    _, cols = prepare(table)
    np.testing.assert_array_equal(cols["scaleup_size"], [8, 72, 72, 8])
    np.testing.assert_array_equal(cols["server_gpus"], [8, 72, 8, 72])
    out = objectives.evaluate(table)
    np.testing.assert_array_equal(out["net_capex_scaleup_usd"], [0, 0, 16128 * 6250, 0])
    base = objectives.evaluate(_fixed(gpu="b200", network="ib-xdr-800", n_gpus=16128, tp=8, pp=14))
    assert out["net_power_w"][2] - base["net_power_w"][0] == pytest.approx(16128 * 190)
    assert "scaleup_size" not in catalog.NETWORK_FIELDS


def test_the_removed_nvl72_network_names_what_to_use():
    with pytest.raises(objectives.InputError) as err:
        objectives.evaluate(_fixed(gpu="b200", network=np.array(["ib-xdr-800", "nvl72-ib-xdr-800"]),
                                   n_gpus=np.full(2, 16384.0)))
    text = str(err.value)
    assert "row 1, column 'network': network 'nvl72-ib-xdr-800' was removed" in text
    assert "gpu: gb200 or gb300 with network: ib-xdr-800" in text and "scaleup_size: 72 as a what-if" in text
    assert "\n" not in text


def test_unknown_network_is_a_clear_input_error():
    with pytest.raises(objectives.InputError, match="unknown network 'ib-ndr-401'"):
        objectives.evaluate(_fixed(network="ib-ndr-401"))


def test_network_catalog_has_sources():
    raw = yaml.safe_load((CATALOG / "networks.yaml").read_text())["networks"]
    assert {"ib-ndr-400", "ib-xdr-800", "roce-400"} <= set(raw)
    assert not set(raw) & set(catalog.REMOVED["network"])
    sources = (CATALOG / "SOURCES.md").read_text()
    for nid, spec in raw.items():
        for f in catalog.NETWORK_FIELDS:
            e = spec[f]
            assert set(e) == {"value", "source", "confidence"}, (nid, f)
            assert e["confidence"] in {"spec", "meas", "rep", "est", "rec"}, (nid, f)
            assert len(e["source"]) >= 20, (nid, f)
            assert e["value"] > 0, (nid, f)
            for key in re.findall(r"(?<![\w-])([SX]\d+)\b", e["source"]):
                assert f"[{key}]" in sources, (nid, f, key)
        assert "scaleup_size" not in spec and "nic_gbyte_s" not in spec, nid  # the system's, not the fabric's
