"""Front audit of the shipped serving spaces: each front design checked as a practitioner would check it
before believing its number (the serving counterpart of tests/test_front_audit.py).

- Against the published runs (objectives/catalog/serving_runs.csv, TensorRT-LLM's offline tables): a design
  held to a TPOT target cannot serve more output tokens/s per GPU than the same model, GPU, precision and
  request shape served offline with no latency limit (trtllm-bench queues every request at once: the
  throughput ceiling), within 5% (the table's run-to-run spread between TensorRT-LLM releases on H200,
  0.17 against 1.0, is 3%).
- The HBM roofline (inference-measurements.md 2.2): a dense model's decode step reads its weight shard and
  every in-flight request's KV at least once, so TPOT >= (weights + concurrency x mean context x KV bytes per
  token per GPU) / peak HBM bandwidth, and tokens/s per user <= its inverse.
- GB200 against B200, the same design: the published Llama 3.3 70B fp4 runs put GB200 at 1.04-1.18x B200 per
  GPU over the table's ten shapes (one die at 1,200 W against 1,000 W); a front design on GB200 may not claim
  more than 1.2x the B200's, nor a lower precision less than the higher one's.
- Off validated ground the interval says so: no published run is disaggregated or has MLA (DeepSeek-R1), so
  every such front design is ``interval_extrapolated`` with an 80% interval at least +-30% wide, a
  disaggregated one at least twice a validated dense design's.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.spec import load_spec
from dse.store import RunStore
from dse.sweep import run
from objectives.serving.evaluate import evaluate_serving
from objectives.serving.validation import load_runs

ROOT = Path(__file__).resolve().parent.parent
SPACES = {"llama": ROOT / "spaces" / "serving-llama3.3-70b.yaml", "deepseek": ROOT / "spaces" / "serving-deepseek-r1.yaml"}
SHOWN = ["gpu", "serving", "n_gpus", "precision", "tp", "pp", "ep", "attn_dp", "concurrency", "tpot_s",
         "output_tokens_per_s_per_gpu"]


@pytest.fixture(scope="module")
def fronts(tmp_path_factory):
    out = {}
    for key, path in SPACES.items():
        result = run(load_spec(path), run_dir=tmp_path_factory.mktemp(key) / "run", use_ray=False)
        assert result.status == "complete"
        out[key] = pd.read_parquet(RunStore(result.run_dir).pareto)
    return out


def _fail(front, broken, what):
    return f"{what}:\n" + front.loc[broken, [c for c in SHOWN if c in front]].to_string(index=False)


def test_no_front_design_beats_the_published_offline_ceiling(fronts):
    runs = load_runs()
    offline = runs[runs["scenario"] == "offline"]
    ceiling = offline.groupby(["model", "gpu", "precision", "input_len", "output_len"])[
        "measured_output_tokens_per_s_per_gpu"].max()
    compared = 0
    for front in fronts.values():
        keys = list(zip(front["model"], front["gpu"], front["precision"], front["input_len"], front["output_len"]))
        published = np.array([ceiling.get(k, np.nan) for k in keys])
        has = np.isfinite(published)
        compared += int(has.sum())
        broken = has & (front["output_tokens_per_s_per_gpu"].to_numpy() > 1.05 * np.where(has, published, 0.0))
        assert not broken.any(), _fail(front, broken, "more tokens/s per GPU than the published offline ceiling")
    # Llama 3.3 70B fp4 on B200 and GB200 at 1,000/1,000 is published (7,007 and 7,326 tokens/s per GPU)
    assert compared >= 3


def test_dense_decode_is_above_the_hbm_roofline(fronts):
    front = fronts["llama"]
    f = {c: front[c].to_numpy(dtype=float) for c in ("weights_gb", "kv_bytes_per_token", "tp", "pp", "concurrency",
                                                      "input_len", "output_len", "gpu_hbm_tbyte_s", "tpot_s")}
    # per GPU of a stage: its weight shard (weights_gb) and its requests' KV (GQA split over tp, layers over pp)
    kv = f["concurrency"] * (f["input_len"] + 0.5 * f["output_len"]) * f["kv_bytes_per_token"] / (f["tp"] * f["pp"])
    floor = (f["weights_gb"] * 1e9 + kv) / (f["gpu_hbm_tbyte_s"] * 1e12) * f["pp"]
    assert np.all(floor > 0.0)
    broken = f["tpot_s"] < floor
    assert not broken.any(), _fail(front, broken, "TPOT below the weights + KV read at peak HBM bandwidth")
    # hand-derived: 70B in fp4 on one B200 (42.7 GB incl. bf16 embeddings): at least 5.3 ms a token
    one = (front["gpu"] == "b200") & (front["n_gpus"] == 1) & (front["precision"] == "fp4")
    assert one.any() and (front.loc[one, "tpot_s"] >= 42.0e9 / 8.0e12).all()


def _same_design(front, **changes):
    """The front's designs re-evaluated with ``changes`` (gpu, precision), mapping and concurrency held."""
    cols = ["model", "gpu", "n_gpus", "tp", "pp", "ep", "attn_dp", "precision", "kv_precision", "engine", "input_len",
            "output_len", "concurrency"]
    cols += [c for c in ("serving", "prefill_n_gpus", "prefill_tp", "prefill_pp", "prefill_ep", "prefill_attn_dp")
             if c in front]
    table = {c: front[c].to_numpy() for c in cols}
    for k, v in changes.items():
        table[k] = np.full(len(front), v, dtype=object)
    return evaluate_serving(table)


def test_gb200_within_the_published_gb200_to_b200_ratio(fronts):
    front = fronts["llama"]
    on = front[front["gpu"] == "gb200"].reset_index(drop=True)
    assert len(on)
    b200 = np.asarray(_same_design(on, gpu="b200")["output_tokens_per_s_per_gpu"], dtype=float)
    ratio = on["output_tokens_per_s_per_gpu"].to_numpy() / b200
    broken = ratio > 1.2
    assert not broken.any(), _fail(on, broken, "GB200 above 1.2x the same design on B200")


def test_fp4_never_behind_fp8_on_the_front(fronts):
    for front in fronts.values():
        fp8 = front[front["precision"] == "fp8"].reset_index(drop=True)
        if not len(fp8):
            continue
        fp4 = np.asarray(_same_design(fp8, precision="fp4")["output_tokens_per_s_per_gpu"], dtype=float)
        broken = fp4 < fp8["output_tokens_per_s_per_gpu"].to_numpy() * (1 - 1e-9)
        assert not broken.any(), _fail(fp8, broken, "fp4 slower than fp8 at the same design")


def test_intervals_are_wide_off_validated_ground(fronts):
    front = fronts["deepseek"]
    assert (front["kv_lora_rank"] > 0).all()  # MLA: no published run has it
    assert front["interval_extrapolated"].astype(bool).all(), _fail(front, ~front["interval_extrapolated"].astype(bool),
                                                                    "not marked extrapolated")
    lo, mid, hi = (front[f"output_tokens_per_s_per_gpu{s}"].to_numpy() for s in ("_lo", "", "_hi"))
    broken = (hi - lo) / (2.0 * mid) < 0.3
    assert not broken.any(), _fail(front, broken, "an 80% interval narrower than +-30% off validated ground")
    disaggregated = front["serving"].astype(str).isin(["disaggregated", "1", "1.0"]).to_numpy()
    # an unmeasured schedule (u = 2, docs/serving.md): at least twice as wide as a validated dense design's
    validated = fronts["llama"]
    validated = validated.loc[~validated["interval_extrapolated"].astype(bool), "interval_half_width_frac"]
    assert len(validated)
    if disaggregated.any():
        assert ((hi - lo) / (2.0 * mid))[disaggregated].min() >= 2.0 * validated.median()
