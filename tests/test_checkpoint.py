"""Storage and checkpointing (objectives/training/checkpoint.py) and the storage catalog, checked by hand."""

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import evaluate_405b

from objectives import catalog
from objectives.training.checkpoint import INTERVAL_OVER_WRITE, daly_interval_s, dataset_bytes_per_token, sync_write_limit_s

CATALOG = Path(catalog.__file__).parent

# Llama-3.1 405B (models.yaml): L = 126, h = 16,384, 128 heads, 8 KV heads of 128, SwiGLU d_ff = 53,248,
# vocabulary 128,256, untied embeddings. Per layer: Q and O 2 x 16,384^2 = 536,870,912; K and V
# 2 x 16,384 x 1,024 = 33,554,432; MLP 3 x 16,384 x 53,248 = 2,617,245,696; two norms 32,768:
# 3,187,703,808 x 126 = 401,650,679,808; embeddings 2 x 128,256 x 16,384 = 4,202,692,608; final norm 16,384.
PARAMS_405B = 405_853_388_800
# 14 bytes per parameter (bf16 weights 2 + fp32 master, m, v 4 each): 5,681.947 GB
CKPT_405B_GB = PARAMS_405B * 14 / 1e9


_eval = evaluate_405b


def test_405b_checkpoint_size():
    out = _eval()
    assert out["n_params"][0] == PARAMS_405B
    assert out["ckpt_size_gb"][0] == pytest.approx(5681.947, abs=1e-3)  # hardware-catalog: 405B -> ~5.7-6.5 TB


def test_405b_storage_sizing_and_write_time_sync():
    out = _eval()  # default storage pfs-large: 500 TB, 120 GB/s read, 75 GB/s write per unit
    # dataset: 15e12 tokens x 4 bytes (vocabulary 128,256 >= 65,500: int32 tokens) = 60 TB
    assert out["storage_dataset_tb"][0] == pytest.approx(60.0)
    # need: 2 checkpoints x 5.682 TB + 60 TB = 71.364 TB -> one 500 TB unit
    assert out["storage_need_tb"][0] == pytest.approx(71.3639, abs=1e-4)
    assert out["storage_units"][0] == 1
    # write: min(1 x 75, 16,384 GPUs x 5 GB/s) = 75 GB/s -> 5,681.947 / 75 = 75.76 s, all of it a stall
    assert out["storage_write_gbyte_s"][0] == 75
    assert out["ckpt_write_s"][0] == pytest.approx(75.7593, abs=1e-4)
    assert out["ckpt_stall_s"][0] == out["ckpt_write_s"][0]
    assert out["ckpt_lag_s"][0] == 0
    # read back on restart at 120 GB/s: 47.35 s
    assert out["ckpt_read_s"][0] == pytest.approx(47.3496, abs=1e-4)
    assert out["storage_capex_usd"][0] == 250_000 and out["storage_power_w"][0] == 2800


def test_405b_async_checkpoint_stalls_for_setup_and_the_host_copy():
    out = _eval(ckpt_mode="async")
    # 6 s of save setup (prices.yaml ckpt_async_fixed_s, X16) plus each GPU copying its
    # 5,681.947 GB / 16,384 = 0.3468 GB shard at 25 GB/s (13.9 ms): 6.0139 s
    assert out["ckpt_stall_s"][0] == pytest.approx(6 + CKPT_405B_GB / 16384 / 25)
    assert out["ckpt_stall_s"][0] == pytest.approx(6.013872, abs=1e-6)
    # the 75.76 s write runs behind training; the checkpoint is durable that much later
    assert out["ckpt_lag_s"][0] == pytest.approx(75.7593, abs=1e-4)


def test_405b_async_interval_against_its_write_time():
    """Llama-3.1 405B, 16,384 GPUs, async, pfs-large, by hand.

    Checkpoint 405,853,388,800 x 14 B = 5,681.947 GB. Job MTBF M = 50,677 GPU-h x 3,600 / 16,384 =
    11,135.08 s. Stall d = 6.0139 s. Daly: sqrt(2 d M) = 365.97 s, x 1.005508, - d = 361.97 s. The write may
    take a third of it, 120.66 s, i.e. 5,681.947 / 120.66 = 47.09 GB/s: one 75 GB/s unit suffices (capacity:
    71.4 TB of 500). Write 75.76 s; interval max(361.97, 3 x 75.76 = 227.28, one step) = 361.97 s, 4.8 writes.
    At 32,768 GPUs: M = 5,567.54 s, d = 6.0069 s, Daly 254.64 s, budget 84.88 s (66.94 GB/s): still one unit,
    the interval 254.64 s = 3.36 writes.
    """
    out = _eval(ckpt_mode="async")
    assert out["ckpt_write_budget_s"][0] == pytest.approx(361.966 / 3, abs=1e-3)
    assert out["storage_write_need_gbyte_s"][0] == pytest.approx(47.0924, abs=1e-4)
    assert out["storage_units"][0] == 1
    assert out["ckpt_write_s"][0] == pytest.approx(75.7593, abs=1e-4)
    assert out["ckpt_interval_s"][0] == pytest.approx(361.966, abs=1e-3)
    big = _eval(ckpt_mode="async", n_gpus=32768, global_batch=4096)
    assert big["ckpt_interval_s"][0] == pytest.approx(254.6375, abs=1e-3)
    assert big["storage_write_need_gbyte_s"][0] == pytest.approx(66.9416, abs=1e-4)
    assert big["storage_units"][0] == 1
    assert big["ckpt_interval_s"][0] >= INTERVAL_OVER_WRITE * big["ckpt_write_s"][0]


def test_slow_storage_buys_units_for_the_interval_and_cost_follows():
    """The same async 405B job on 15 GB/s QLC and 12 GB/s HDD units: capacity needs one unit of each, the
    47.09 GB/s write budget (above) ceil(47.09 / 15) = 4 QLC and ceil(47.09 / 12) = 4 HDD units. Writes
    5,681.947 / 60 = 94.70 s and / 48 = 118.37 s; 3 writes (284.10, 355.12 s) stay under Daly's 361.97 s,
    which holds. Capex 4 x $250,000 and 4 x $90,000; power 4 x 450 W and 4 x 1,500 W."""
    tiers = np.array(["allflash-qlc", "pfs-hdd"])
    out = _eval(ckpt_mode="async", storage=tiers, n_gpus=np.full(2, 16384.0))
    np.testing.assert_array_equal(out["storage_units"], [4, 4])
    np.testing.assert_allclose(out["ckpt_write_s"], CKPT_405B_GB / np.array([60.0, 48.0]))
    np.testing.assert_allclose(out["ckpt_interval_s"], 361.966, atol=1e-3)
    np.testing.assert_array_equal(out["storage_capex_usd"], [1_000_000, 360_000])
    np.testing.assert_array_equal(out["storage_power_w"], [1800, 6000])
    # the cost model pays for them: owned storage = capex x (capital recovery at 10% over 5 years, 0.263797,
    # + 6% upkeep) a year, a delivered year charged 1 / 0.8 of a calendar year (objectives.economics.capital)
    years = out["time_to_train_days"] / 365.25
    np.testing.assert_allclose(out["run_cost_storage_usd"], out["storage_capex_usd"] * (0.263797 + 0.06) * years / 0.8,
                               rtol=2e-6)


def test_a_fixed_interval_sizes_storage_and_stretches_at_the_node_limit():
    """ckpt_every_s = 60 s asks a 20 s write: 5,681.947 / 20 = 284.10 GB/s -> ceil(284.10 / 75) = 4 units,
    300 GB/s, 18.94 s, interval 60 s. With 0.01 GB/s per GPU to storage the 16,384 nodes push only
    163.84 GB/s: ceil(163.84 / 75) = 3 units (a fourth would add nothing), 34.68 s, and the interval
    stretches to 3 x 34.68 = 104.04 s."""
    out = _eval(ckpt_mode="async", ckpt_every_s=60.0)
    assert out["storage_units"][0] == 4
    assert out["ckpt_write_s"][0] == pytest.approx(CKPT_405B_GB / 300)
    assert out["ckpt_interval_s"][0] == 60.0
    slow = _eval(ckpt_mode="async", ckpt_every_s=60.0, storage_link_gbyte_s=0.01)
    assert slow["storage_units"][0] == 3
    assert slow["storage_write_gbyte_s"][0] == pytest.approx(163.84)
    assert slow["ckpt_interval_s"][0] == pytest.approx(3 * CKPT_405B_GB / 163.84)
    assert slow["ckpt_interval_s"][0] == pytest.approx(104.0396, abs=1e-4)
    assert slow["ckpt_lag_s"][0] == pytest.approx(CKPT_405B_GB / 163.84)  # each failure also loses the write


def test_sync_write_limit_is_where_daly_gives_three_writes():
    """s^2 - 33 s + 9 = 0: s = 0.275019, W = 2 s^2 M = 0.151271 M; Daly(W) = 3 W there, more below it."""
    m = 11135.083
    w = sync_write_limit_s(m)
    assert w == pytest.approx(0.151271 * m, rel=1e-5)
    assert daly_interval_s(w, m) == pytest.approx(3 * w, rel=1e-9)
    assert daly_interval_s(w / 2, m) > 3 * w / 2
    # the 405B sync reference: the 75.76 s write is far under 1,684 s; Daly's 1,249 s holds (16.5 writes)
    out = _eval()
    assert out["ckpt_write_budget_s"][0] == pytest.approx(1684.417, abs=1e-3)
    assert out["ckpt_interval_s"][0] == pytest.approx(daly_interval_s(out["ckpt_write_s"][0], m), rel=1e-6)


def test_interval_keeps_to_a_fixed_value_but_not_under_a_step():
    out = _eval(ckpt_every_s=1800.0)
    assert out["ckpt_interval_s"][0] == 1800.0
    tiny = _eval(ckpt_every_s=1e-3, ckpt_mode="async", storage_units_min=1e6)  # nodes limit the write
    assert tiny["ckpt_interval_s"][0] == pytest.approx(max(tiny["step_time_s"][0], 3 * tiny["ckpt_write_s"][0]))


def test_more_units_buy_bandwidth_until_the_nodes_limit_it():
    out = _eval(storage_units_min=8)
    # 8 x 75 = 600 GB/s -> 9.470 s
    assert out["storage_units"][0] == 8
    assert out["ckpt_write_s"][0] == pytest.approx(CKPT_405B_GB / 600)
    # 64 GPUs can only push 64 x 5 = 320 GB/s into the same 8 units: 17.76 s
    small = _eval(storage_units_min=8, n_gpus=64, tp=8, pp=8, global_batch=64)
    assert small["storage_write_gbyte_s"][0] == 320
    assert small["ckpt_write_s"][0] == pytest.approx(CKPT_405B_GB / 320)


def test_storage_tiers_trade_bandwidth_for_price():
    out = _eval(storage=np.array(["pfs-small", "pfs-large", "allflash-qlc", "pfs-hdd"]), n_gpus=np.full(4, 16384.0))
    # each holds 71.4 TB in one unit; write GB/s 65, 75, 15, 12 -> 87.4, 75.8, 378.8, 473.5 s
    np.testing.assert_array_equal(out["storage_units"], [1, 1, 1, 1])
    np.testing.assert_allclose(out["ckpt_write_s"], CKPT_405B_GB / np.array([65, 75, 15, 12]))
    np.testing.assert_array_equal(out["storage_capex_usd"], [150_000, 250_000, 250_000, 90_000])


def test_dataset_bytes_per_token_follows_megatron():
    # Megatron-Core stores uint16 tokens for vocabularies under 65,500, int32 otherwise (X15)
    np.testing.assert_array_equal(dataset_bytes_per_token([32000, 50257, 65499, 65500, 128256]), [2, 2, 2, 4, 4])
    # no train_tokens: no dataset counted, the checkpoints alone size the storage
    out = _eval(train_tokens=np.nan)
    assert out["storage_dataset_tb"][0] == 0
    assert out["storage_need_tb"][0] == pytest.approx(2 * CKPT_405B_GB / 1e3)


def test_storage_catalog_has_sources():
    raw = yaml.safe_load((CATALOG / "storage.yaml").read_text())["storage"]
    assert {"pfs-small", "pfs-large", "allflash-qlc"} <= set(raw)
    assert catalog.DEFAULT_STORAGE in raw
    sources = (CATALOG / "SOURCES.md").read_text()
    for sid, spec in raw.items():
        for f in catalog.STORAGE_FIELDS:
            e = spec[f]
            assert set(e) == {"value", "source", "confidence"}, (sid, f)
            assert e["confidence"] in {"spec", "meas", "rep", "est", "rec"}, (sid, f)
            assert len(e["source"]) >= 20 and e["value"] > 0, (sid, f)
            for key in re.findall(r"(?<![\w-])([SX]\d+)\b", e["source"]):
                assert f"[{key}]" in sources, (sid, f, key)
