"""Storage and checkpointing (objectives/checkpoint.py) and the storage catalog, checked by hand."""

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from objectives import catalog
from objectives.checkpoint import dataset_bytes_per_token
from conftest import evaluate_405b

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
    assert out["storage_write_gbps"][0] == 75
    assert out["ckpt_write_s"][0] == pytest.approx(75.7593, abs=1e-4)
    assert out["ckpt_stall_s"][0] == out["ckpt_write_s"][0]
    assert out["ckpt_lag_s"][0] == 0
    # read back on restart at 120 GB/s: 47.35 s
    assert out["ckpt_read_s"][0] == pytest.approx(47.3496, abs=1e-4)
    assert out["storage_capex_usd"][0] == 250_000 and out["storage_power_w"][0] == 2800


def test_405b_async_checkpoint_stalls_only_for_the_host_copy():
    out = _eval(ckpt_mode="async")
    # each GPU copies its 5,681.947 GB / 16,384 = 0.3468 GB shard at 25 GB/s: 13.9 ms
    assert out["ckpt_stall_s"][0] == pytest.approx(CKPT_405B_GB / 16384 / 25)
    assert out["ckpt_stall_s"][0] == pytest.approx(0.013872, abs=1e-6)
    # the 75.76 s write runs behind training; the checkpoint is durable that much later
    assert out["ckpt_lag_s"][0] == pytest.approx(75.7593, abs=1e-4)


def test_more_units_buy_bandwidth_until_the_nodes_limit_it():
    out = _eval(storage_units_min=8)
    # 8 x 75 = 600 GB/s -> 9.470 s
    assert out["storage_units"][0] == 8
    assert out["ckpt_write_s"][0] == pytest.approx(CKPT_405B_GB / 600)
    # 64 GPUs can only push 64 x 5 = 320 GB/s into the same 8 units: 17.76 s
    small = _eval(storage_units_min=8, n_gpus=64, tp=8, pp=8, global_batch=64)
    assert small["storage_write_gbps"][0] == 320
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
