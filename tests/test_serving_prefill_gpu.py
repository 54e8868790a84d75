"""A disaggregated design's prefill pool on another GPU (``prefill_gpu``; objectives/serving/prefill_pool.py).

One design throughout: Llama 3.3 70B (80 layers, d_model 8192, 64 heads, 8 KV heads, d_head 128, FFN 28,672)
in fp8 with an fp8 KV cache under trtllm, 4,000 tokens in and 500 out, one request in flight, disaggregated:
a decode instance of one H200 and a prefill instance of one GPU, one prompt a prefill step (max_num_tokens
4,000), at the round calibration of tests/test_serving_prefix.py (HBM at 80%, GEMMs at the catalog's rate,
no host time).

The prefill step on a B200 (gpus.yaml: fp8 4,500 TFLOP/s at MAMF 0.763, bf16 2,250 at flash-attention 0.5,
8 TB/s HBM), compute-bound: per prompt token G = 2 x 68,451,041,280 weights / (4,500e12 x 0.763 x 8192 /
(8192 + gemm_n_half)) (GEMMs, 41.3 us) + 163,840 B of KV written and 38,338,560 B of activations at 6.4 TB/s
(6.0 us) = 47.3 us; per token and key A = 2 x 64 x 256 x 80 / (0.5 x 2,250e12) = 2.33 ns, 2,000 keys a token
(causal): T_prefill = 4,000 G + 4,000 x 2,000 A + F = 189.2 + 18.6 ms + F (the output layer, the fixed
costs; under 1 ms) = 208.2 ms, against 471 ms on the H200 (1,979 TFLOP/s fp8).

TTFT = pp x chunks x T_prefill + T_prefill / 2 + KV transfer + T_decode / 2 (objectives/serving/
disaggregated.py), the transfer over the NICs (two GPU types share no NVLink domain): 4,000 x 163,840 B =
655.36 MB over min(50, 50) GB/s x scaleout_eff 0.93 + 10 us = 14.10 ms; T_decode the H200's, 18.56 ms:
TTFT = 1.5 x 208.2 + 14.1 + 9.3 = 335.7 ms.

Cost (owned) and power: one H200 decode GPU and ceil(ratio) = 1 prefill GPU, each its own system's: servers
$39,750 (HGX H200) + $62,375 (HGX B200) = $102,125; power at load 0.75 x (1,275 + 1,787.5) W = 2,296.9 W
plus the fabric's. Against the same design with an H100 prefill GPU ($36,750, 1,275 W), the same fabric:
+$25,625 of servers, +$5,483.75 of facility (512.5 W of peak x prices.yaml $10.7M per MW), +384.4 W at load.
Rented per GPU (cost_mode cloud, no instance): $4.02 (H200) + $5.27 (B200) = $9.29 an hour.
"""

import numpy as np
import pytest
import yaml

from dse.cli import main
from dse.spec.prices import apply_prices
from objectives import InputError, search_serving
from objectives.serving import ServingCalibration, evaluate_serving

ROUND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                           expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(0.0,) * 4,
                           host_request_s=(0.0,) * 4)
ROW = {"model": "llama3.3-70b", "gpu": "h200-sxm", "n_gpus": 1, "tp": 1, "precision": "fp8", "kv_precision": "fp8",
       "engine": "trtllm", "input_len": 4000, "output_len": 500, "concurrency": 1, "serving": "disaggregated",
       "prefill_n_gpus": 1, "max_num_tokens": 4000, "cost_mode": "owned"}
WEIGHTS = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672)  # 68,451,041,280


def run(**row):
    """Each column of the rows evaluated (ROW's columns unless given), at the ROUND calibration."""
    table = {k: v if isinstance(v, list) else [v] for k, v in {**ROW, **row}.items()}
    n = max(len(v) for v in table.values())
    out = evaluate_serving({k: v * n if len(v) == 1 else v for k, v in table.items()}, cal=ROUND)
    return {k: np.asarray(v) for k, v in out.items()}


def test_prefill_step_and_ttft_from_the_prefill_gpu():
    # H200 decode with a B200 prefill pool; H200 alone; B200 alone
    out = run(gpu=["h200-sxm", "h200-sxm", "b200"], prefill_gpu=["b200", None, None])
    assert out["feasible"].all()
    t_p, t_d = out["step_time_mixed_s"], out["step_time_decode_s"]
    # the prefill step is the B200's, the decode step the H200's, bit for bit
    assert t_p[0] == t_p[2] and t_d[0] == t_d[1]
    # by hand (module doc): compute-bound, 4,000 G + 4,000 x 2,000 A + F
    g = 2.0 * WEIGHTS / (4500e12 * 0.763 * 8192 / (8192 + ROUND.base.gemm_n_half)) \
        + 163_840 / 6.4e12 + 2.0 * 80 * (4 * 8192 + 64 * 256 + 2 * 8 * 128 + 2 * 8192 + 6 * 28672) / 6.4e12
    a = 2.0 * 64 * 256 * 80 / (0.5 * 2250e12)
    assert g == pytest.approx(47.29e-6, rel=1e-3) and a == pytest.approx(2.33017e-9, rel=1e-5)
    fixed = t_p[0] - 4000 * g - 4000 * 2000 * a
    assert 0.0 < fixed < 0.001
    assert t_p[0] == pytest.approx(0.2082, abs=5e-4) and t_p[1] == pytest.approx(0.471, abs=1e-3)
    # the KV over the NICs at the slower side's (50 GB/s each), not NVLink, although both fit one 8-GPU domain
    transfer = 4000 * 163_840 / (50e9 * ROUND.base.scaleout_eff) + ROUND.base.scaleout_latency_s
    assert transfer == pytest.approx(14.10e-3, rel=1e-3)
    np.testing.assert_allclose(out["kv_transfer_s"][0], transfer, rtol=1e-12)
    assert out["kv_transfer_s"][1] < transfer / 5  # the same GPU: over NVLink
    ttft = 1.5 * t_p[0] + transfer + 0.5 * t_d[0]
    np.testing.assert_allclose(out["ttft_s"][0], ttft, rtol=1e-12)
    assert ttft == pytest.approx(0.3357, abs=5e-4)


def test_cost_and_power_count_both_systems():
    out = run(prefill_gpu=["b200", "h100-sxm"])
    np.testing.assert_array_equal(out["prefill_gpus"], [1.0, 1.0])
    np.testing.assert_array_equal(out["deployment_gpus"], [2.0, 2.0])
    fabric_w = out["power_it_mw"][0] * 1e6 - 0.75 * (1275.0 + 1787.5)
    assert fabric_w > 0  # the KV crosses the NICs: a fabric, priced and powered
    np.testing.assert_allclose(out["power_it_mw"][1] * 1e6 - 0.75 * (1275.0 + 1275.0), fabric_w, rtol=1e-9)
    assert (out["power_it_mw"][0] - out["power_it_mw"][1]) * 1e6 == pytest.approx(384.375, rel=1e-9)
    servers = out["capex_usd"] - out["net_capex_usd"]  # and the facility
    assert servers[0] - servers[1] == pytest.approx(25_625.0 + 512.5 * 10.7, rel=1e-9)
    facility_b200 = ((1275.0 + 1787.5) + fabric_w) * 10.7  # USD: W x $10.7M per MW
    assert servers[0] == pytest.approx(39_750.0 + 62_375.0 + facility_b200, rel=1e-9)
    cloud = run(prefill_gpu="b200", cost_mode="cloud")
    assert cloud["usd_per_hr"][0] == pytest.approx(4.02 + 5.27, rel=1e-12)


def test_same_gpu_or_blank_is_the_model_without_the_column():
    plain = run()
    for same in ("h200-sxm", None):
        out = run(prefill_gpu=same)
        for k in ("ttft_s", "tpot_s", "usd_per_mtok_out", "power_mw", "kv_transfer_s", "output_tokens_per_s_per_gpu"):
            np.testing.assert_array_equal(out[k], plain[k])


def test_infeasible_with_a_reason():
    out = run(prefill_gpu=["b200", "rubin-cpx", "b200"], serving=["aggregated", "disaggregated", "disaggregated"],
              gpu=["h200-sxm", "vera-rubin-nvl72", "h200-sxm"], engine=["trtllm", "trtllm", "vllm"],
              precision="fp8")
    assert not out["feasible"][0] and out["infeasible_reason"][0].startswith("prefill_gpu: an aggregated design")
    # Rubin CPX: no published price (gpus.yaml); its power is its rack's share (X45)
    assert out["con_prefill_gpu"][1] == 4 and out["infeasible_reason"][1].startswith("price: no published price")
    assert out["feasible"][2]
    quoted = run(gpu="vera-rubin-nvl72", prefill_gpu="rubin-cpx", prefill_server_usd_per_gpu=25_000.0)
    assert quoted["con_prefill_gpu"][0] == 0 and np.isfinite(quoted["usd_per_mtok_out"][0])
    with pytest.raises(InputError, match="unknown prefill_gpu 'b900'"):
        run(prefill_gpu="b900")


def test_cpx_prefill_search_keeps_tp_in_its_domain_and_a_given_tp_takes_the_nic():
    table = {**ROW, "gpu": "vera-rubin-nvl72", "prefill_gpu": "rubin-cpx", "prefill_server_usd_per_gpu": 25_000.0,
             "n_gpus": 2, "tp": None, "prefill_n_gpus": None, "concurrency": 8}
    out = search_serving({k: [v] for k, v in table.items()}, cal=ROUND)
    assert out["feasible"][0] and out["prefill_tp"][0] == 1  # a CPX's NVLink domain is one GPU
    given = run(gpu="vera-rubin-nvl72", prefill_gpu="rubin-cpx", prefill_server_usd_per_gpu=25_000.0, n_gpus=2, tp=2,
                prefill_n_gpus=2, prefill_tp=[1, 2], prefill_pp=[2, 1])
    # tp 2 on two CPX: the all-reduces over the NICs (objectives.training.collectives), slower than two pipeline stages'
    # sends; the row is honest about it rather than refused
    assert given["feasible"].all()
    assert given["step_time_mixed_s"][1] > given["step_time_mixed_s"][0] / 2


def test_price_file_quotes_the_prefill_gpu():
    table = {"gpu": np.array(["vera-rubin-nvl72"] * 2, dtype=object),
             "prefill_gpu": np.array(["rubin-cpx", None], dtype=object)}
    out = apply_prices(table, {"servers": {"rubin-cpx": 25_000.0}, "gpus": {}}, 2)
    np.testing.assert_array_equal(out["prefill_server_usd_per_gpu"], [25_000.0, np.nan])


def test_unknown_prefill_gpu_in_a_space_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    raw = yaml.safe_load((Path(__file__).parents[1] / "spaces" / "serving-deepseek-r1.yaml").read_text())
    raw["cluster"]["prefill_gpu"] = ["rubin-cpx", "rubin-cpxx"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "bad.yaml", "--no-ray"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cluster.prefill_gpu[1]: unknown prefill_gpu 'rubin-cpxx'" in err
