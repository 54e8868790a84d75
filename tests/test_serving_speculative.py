"""Speculative decoding in the serving model (``spec_decode``, ``spec_tokens``, ``spec_accept_tokens_per_step``;
objectives/serving/speculative.py, step.py, batching.py; docs/serving.md).

Hand-derived case (test_mtp_at_batch_one_by_hand): a dense Llama-3-8B-shaped model (32 layers, d_model 4,096,
32 heads, 8 KV heads of 128, FFN 14,336, vocabulary 128,256) carried by the ``deepseek-v3`` label (the catalog
model with an MTP module, so ``mtp`` may run; its architecture fields overridden), bf16 on one H200 under
trtllm, 1,000 tokens in and 1,000 out, one request in flight, at the round calibration of
tests/test_serving_prefix.py (HBM at 80%: 4.8 TB/s x 0.8 = 3.84e12 B/s; no host time).

- Weights a decode step reads: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) = 32 x 218,103,808 =
  6,979,321,856 weights x 2 B = 13.959 GB, and the output layer 4096 x 128,256 = 525,336,576 x 2 B = 1.051 GB:
  15.009 GB / 3.84e12 B/s = 3.909 ms; the KV read, 1,500 tokens (ISL + OSL/2) x 32 layers x 2 x 8 x 128 x 2 B =
  196.6 MB, 0.051 ms: T_decode = 3.960 ms, 1 / T_decode = 252.5 tokens/s per user (the mean step, a
  thousandth of them carrying the prompt, 3.980 ms: 251.3).
- MTP with k = 1 draft token: the verify step reads the same weights once for its 2 tokens a request (the
  compute of one more token at batch 1 is microseconds), 3.96 ms; the draft is one layer of the model, 218,103,808
  x 2 B = 436 MB, 0.114 ms, plus its 1/32 of the KV read, 0.002 ms, plus the output layer again, 0.274 ms: a
  step of 3.960 + 0.390 = 4.350 ms. It emits tau = 1.875 tokens (DeepSeek-V3 report Sec. 5.4.3: the second
  token accepted 85-90% of the time, the midpoint), so TPOT = 4.350 / 1.875 = 2.320 ms: 431 tokens/s per user,
  1.70x without it (the report's 1.8x TPS on its own deployment).
"""

import numpy as np
import pandas as pd
import pytest

from objectives import InputError
from objectives.serving import ServingCalibration, evaluate_serving
from objectives.serving import evaluate as ev
from objectives.serving.speculative import ServingSpeculative, accept_len, accept_table, spec_models
from objectives.serving.validation import DESIGN_COLUMNS, fit_runs, load_runs, predict, speculative_summary

ROUND = ServingCalibration(hbm_eff=0.8, gemm_eff_scale=(1.0, 1.0, 1.0), gemm_rows_half=1.0, expert_load_cv=0.0,
                           expert_gemm_scale=1.0, allreduce_latency_s=10e-6, host_step_s=(0.0,) * 4,
                           host_request_s=(0.0,) * 4)
DENSE = dict(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128, d_ff=14336, vocab_size=128256,
             moe_experts=0, moe_topk=0, kv_lora_rank=0, q_lora_rank=0, qk_rope_dim=0, qk_nope_dim=0, v_head_dim=0,
             moe_dense_layers=0, dense_d_ff=0, moe_shared_experts=0)
ROW = dict(model="deepseek-v3", gpu="h200-sxm", n_gpus=1, tp=1, precision="bf16", kv_precision="bf16", engine="trtllm",
           input_len=1000, output_len=1000, concurrency=1, **DENSE)


def run(rows, cal=ROUND):
    n = max(len(v) for v in rows.values() if isinstance(v, list))
    table = {k: v if isinstance(v, list) else [v] * n for k, v in rows.items()}
    return {k: np.asarray(v) for k, v in evaluate_serving(table, cal=cal).items()}


def test_acceptance_formula():
    """Leviathan et al. 2023 Eq. 1: a step verifying k drafts of i.i.d. acceptance a emits (1 - a^(k+1)) / (1 - a)
    tokens. a = 0.8: k = 1 gives 1.8, k = 3 gives (1 - 0.4096) / 0.2 = 2.952; so a measured 1.8 at k = 1 (a
    solved, 0.8) reads 2.952 at k = 3. A measured length is used as published, linear between two."""
    assert accept_len({1: 1.8}, 3) == pytest.approx(2.952, abs=1e-9)
    assert accept_len({1: 1.8}, 1) == 1.8 and accept_len({1: 1.8}, 0) == 1.0
    assert accept_len({1: 1.92, 3: 2.82}, 2) == pytest.approx(2.37)
    # DeepSeek-R1 MTP (TensorRT-LLM tech blog 1): 1.92, 2.58, 2.82, 2.99, 3.01 at k = 1..5, as published
    table = accept_table()[spec_models().index("deepseek-r1"), 1]
    np.testing.assert_allclose(table[:6], [1.0, 1.92, 2.58, 2.82, 2.99, 3.01])
    assert np.all(np.diff(table) >= 0) and np.all(table <= np.arange(len(table)) + 1.0)


def test_mtp_at_batch_one_by_hand():
    out = run({**ROW, "spec_decode": ["none", "mtp"], "spec_tokens": [np.nan, 1]})
    weights = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert weights == 6_979_321_856
    bw = 4.8e12 * 0.8
    t_decode = (2.0 * weights + 2.0 * 4096 * 128256 + 1500 * 32 * 2 * 8 * 128 * 2) / bw
    assert t_decode == pytest.approx(3.960e-3, rel=1e-3)
    assert out["step_time_decode_s"][0] == pytest.approx(t_decode, rel=0.01)
    draft = (2.0 * weights / 32 + 1500 * 2 * 8 * 128 * 2 + 2.0 * 4096 * 128256) / bw  # one layer + output layer
    assert draft == pytest.approx(0.390e-3, rel=0.01)
    assert out["spec_accept_tokens_per_step"][1] == 1.875
    assert out["step_time_decode_s"][1] == pytest.approx(t_decode + draft, rel=0.01)  # 4.350 ms
    per_user = out["tokens_per_s_per_user"]
    assert per_user[0] == pytest.approx(251.3, rel=0.01)
    assert per_user[1] == pytest.approx(1.875 / (t_decode + draft), rel=0.015)  # 431
    assert per_user[1] / per_user[0] == pytest.approx(1.70, abs=0.03)
    assert out["spec_weights_gb"][1] == pytest.approx(2.0 * (weights / 32 + 2 * 4096**2) / 1e9)  # + its 2h x h, bf16


def test_none_reproduces_the_model_without_speculation():
    """spec_decode none (the default) is bit for bit the model without the speculative module, on every
    published run of the fit."""
    runs = fit_runs(load_runs())
    table = {c: runs[c].to_numpy() for c in DESIGN_COLUMNS if c in runs and not c.startswith("spec_")}
    with_spec = evaluate_serving({**table, "spec_decode": np.array(["none"] * len(runs), dtype=object)})
    without = evaluate_serving(table, models=tuple(m for m in ev.SERVING_MODELS if not isinstance(m, ServingSpeculative)))
    compared = 0
    for k, v in without.items():
        if k in with_spec and np.asarray(v).dtype.kind == "f" and not k.startswith("spec_"):
            np.testing.assert_array_equal(np.asarray(with_spec[k]), np.asarray(v), err_msg=k)
            compared += 1
    assert compared > 100


def test_speculation_loses_throughput_at_large_batch():
    """Llama 3.3 70B fp8 on one B200 with an EAGLE-3 head, k = 3 (tau 2.59 at k = 3 from the K = 7 measurement),
    128 tokens in and 512 out (a short context: little KV to share among the verified tokens), a token budget of
    16,384 (the budget does not bind): at one request the verify step costs about a decode step (10.4 -> 11.7
    ms: the weights' 70 GB read once) and emits 2.6 tokens, so tokens/s per user rises 2.3x; at 512 requests the
    GEMMs are compute-bound (512 x 4 rows of 2 x 70e9 FLOPs, 0.29 PFLOP a step, against 0.07 without), the
    verify costs 3.2x a decode step (39 -> 124 ms) for 2.6 tokens, and output tokens/s per GPU falls (-16%)."""
    row = dict(model="llama3.3-70b", gpu="b200", n_gpus=1, tp=1, precision="fp8", kv_precision="fp8",
               engine="trtllm", input_len=128, output_len=512, max_num_tokens=16384)
    out = run({**row, "spec_decode": ["none", "eagle3", "none", "eagle3"], "spec_tokens": [np.nan, 3, np.nan, 3],
               "concurrency": [1, 1, 512, 512]}, cal=None)
    assert out["feasible"].all()
    assert out["spec_accept_tokens_per_step"][1] == pytest.approx(2.589, abs=0.01)
    assert out["tokens_per_s_per_user"][1] > 2.0 * out["tokens_per_s_per_user"][0]
    assert out["step_time_decode_s"][3] > 3.0 * out["step_time_decode_s"][2]
    assert out["output_tokens_per_s_per_gpu"][3] < 0.9 * out["output_tokens_per_s_per_gpu"][2]


def test_infeasible_speculation_is_a_reason_not_an_exception():
    out = run({**dict(ROW, model="llama3.3-70b", **{k: np.nan for k in DENSE}),
               "spec_decode": ["mtp", "eagle3", "draft", "eagle3", "eagle3"], "spec_tokens": [1, 3, 3, 3, 2],
               "spec_accept_tokens_per_step": [np.nan, np.nan, 2.0, 2.5, 3.5]})
    assert out["con_spec_decode"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
    reasons = out["infeasible_reason"]
    assert reasons[0].startswith("spec_decode: mtp needs a multi-token-prediction module; llama3.3-70b has none")
    assert reasons[2] == "spec_decode: draft needs spec_draft_params (the draft model's parameters)"
    assert out["spec_accept_tokens_per_step"][3] == 2.5  # a space's own acceptance overrides the catalog's
    assert "3.5 tokens a step accepted from 2 drafts" in reasons[4]
    qwen = run(dict(ROW, model="qwen3-30b-a3b", spec_decode="eagle3", concurrency=[1],
                    **{k: np.nan for k in DENSE}))
    assert "has no published acceptance for qwen3-30b-a3b" in qwen["infeasible_reason"][0]


def test_bad_speculation_input_is_one_line():
    with pytest.raises(InputError, match="spec_accept_tokens_per_step"):
        run({**ROW, "spec_decode": ["mtp"], "spec_accept_tokens_per_step": [0.5]})
    with pytest.raises(InputError, match="spec_decode"):
        run({**ROW, "spec_decode": ["medusa"]})


def test_speculative_runs_are_validation_only():
    """The published speculative-decoding runs are predicted and reported on their own line, never fitted."""
    runs = load_runs()
    spec = runs[runs["validation_only"] == 1]
    assert len(spec) >= 9 and set(spec["source_key"]) == {"trtllm-blog1-dsr1-mtp", "trtllm-dsr1-best-perf-mtp",
                                                          "nvidia-blog-maverick-eagle3"}
    assert not fit_runs(runs)["run_id"].isin(spec["run_id"]).any()
    summary = speculative_summary(predict(spec.reset_index(drop=True)))
    assert isinstance(summary, pd.DataFrame) and summary["rows"].sum() == len(spec)
    # the published MTP gain on 8 B200 (111 -> 253 TPS/user at MTP 3) and the model's, with the same acceptance
    result = predict(spec[spec["source_key"] == "trtllm-blog1-dsr1-mtp"].reset_index(drop=True)).set_index("spec_tokens", drop=False)
    none = result[result["spec_decode"] == "none"]["predicted_output_tokens_per_s_per_gpu"].iloc[0]
    mtp3 = result[(result["spec_decode"] == "mtp") & (result["spec_tokens"] == 3)]["predicted_output_tokens_per_s_per_gpu"].iloc[0]
    assert 1.8 < mtp3 / none < 2.82  # measured 2.28x
