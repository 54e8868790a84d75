"""The serving model against published serving measurements.

``catalog/serving_runs.csv`` holds the published measurements the design table can describe (built from
the project's shared inference measurements by ``tools/build_serving_runs.py``; ``serving_runs.md`` has
the sources, how each column was read and every exclusion). Offline rows (every request queued at once)
are evaluated at the largest concurrency that fits, at most the benchmark's requests; online rows at their
request rate (the concurrency follows from Little's law). The error measures: the absolute percentage
error of output tokens/s per GPU on every row, sources weighing the same in the headline mean; of TPOT
(mean inter-token latency) and TTFT on the online rows, where the source measured them.

Runs marked ``validation_only`` (the speculative-decoding group, tools/serving_runs_speculative.csv) are
predicted and reported on their own (:func:`speculative_summary`), never fitted (:func:`fit_runs`): their
acceptance is the publication's, and the fitted factors are not to bend to them.

A source that ran a fixed number of requests (``benchmark_requests``: TensorRT-LLM's online table sent 500)
measured the throughput of a finite run, total output tokens over its duration, which a steady state
overstates when a request lives long against the run: N requests arriving at rate lambda take N / lambda
to arrive and the last finishes one request latency (E2E) later; at an infinite rate, or beyond what the
instance serves (X at concurrency B), the first B start at once and the other N - B follow at X, so

    duration = N / lambda + E2E     (below saturation),     (N - B) / X + E2E     (saturated)

and the run's throughput is N x OSL / duration (:func:`benchmark_tokens_per_s_per_gpu`).

Its mean inter-token latency is not the steady state's either where the requests are in flight together (at
once, or saturated: the published ITL at 32 requests/s equals that at INF, 86 against 85 ms, Llama 3.1 70B on
H100). The prompts are then prefilled first come first served, in chunks, over K = N ISL / chunk steps
(N in flight, per attention group), each with the decodes of the requests already through; the i-th prompt
finishes at step K i / N, uniform over the burst, and its O = OSL - 1 gaps see min(O, K (1 - u)) mixed steps
(u its place in the burst), decode-only steps after. The mean share of a request's gaps that are mixed is

    m = K / (2 O)     (O >= K: the prompts all through before the first request finishes),
        1 - O / (2 K) (O < K)

against the steady state's K / (O + n_p) (every decoding request sees every chunk, objectives/serving/batching.py:
r ISL / chunk a step with r = B / (O + n_p)), so the burst's mean ITL is t_dec + m (t_mixed - t_dec): half the
prefill's share of the steady state where the decodes outlast the prefill, about a whole mixed step where
they do not (467/16 at once: 548 ms measured, one 8,192-token step) (:func:`benchmark_tpot_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from objectives.serving.engines import ServingCalibration
from objectives.serving.evaluate import evaluate_serving

__all__ = ["RUNS_PATH", "DESIGN_COLUMNS", "load_runs", "fit_runs", "validation_only", "predict", "ServingSummary",
           "summarize", "speculative_summary"]

RUNS_PATH = Path(__file__).resolve().parent.parent / "catalog" / "serving_runs.csv"
DESIGN_COLUMNS = ("model", "gpu", "n_gpus", "tp", "pp", "ep", "attn_dp", "precision", "kv_precision", "engine",
                  "input_len", "output_len", "concurrency", "request_rate_per_s", "replicas", "max_batch_size", "max_num_tokens",
                  "kv_mem_frac", "attn_dp_balance", "latency_tuned", "spec_decode", "spec_tokens", "spec_accept_tokens_per_step")
#: what a prediction keeps beside the runs' own columns
PREDICTED = ("output_tokens_per_s_per_gpu", "ttft_s", "tpot_s", "concurrency", "max_concurrency", "kv_cache_gb",
             "weights_gb", "token_budget", "step_time_decode_s", "step_time_mixed_s", "mixed_step_frac", "saturated",
             "feasible", "output_tokens_per_s_per_gpu_lo", "output_tokens_per_s_per_gpu_hi", "tpot_s_lo", "tpot_s_hi",
             "ttft_s_lo", "ttft_s_hi", "validated_distance_oct", "interval_extrapolated", "tokens_per_s_per_user",
             "spec_accept_tokens_per_step")


def load_runs(path: str | Path = RUNS_PATH, included_only: bool = True) -> pd.DataFrame:
    runs = pd.read_csv(path)
    if included_only and "include" in runs:
        runs = runs[runs["include"] == 1].reset_index(drop=True)
    return runs


def validation_only(runs: pd.DataFrame) -> np.ndarray:
    """True for the runs kept out of the fit (``validation_only`` 1): the speculative-decoding group, whose
    acceptance the model reads from its publication and whose error is reported on its own line."""
    if "validation_only" not in runs:
        return np.zeros(len(runs), dtype=bool)
    return pd.to_numeric(runs["validation_only"], errors="coerce").fillna(0).to_numpy() > 0


def fit_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the serving fit and its held-out refits use: every included run but the validation-only ones."""
    return runs[~validation_only(runs)].reset_index(drop=True)


def benchmark_tokens_per_s_per_gpu(out, runs: pd.DataFrame) -> np.ndarray:
    """Output tokens/s per GPU of a finite run of ``benchmark_requests`` requests (module doc); the model's
    steady state where the source ran no fixed number."""
    steady = np.asarray(out["output_tokens_per_s_per_gpu"], dtype=float)
    if "benchmark_requests" not in runs:
        return steady
    n_req = pd.to_numeric(runs["benchmark_requests"], errors="coerce").to_numpy(dtype=float)
    rate = pd.to_numeric(runs["request_rate_per_s"], errors="coerce").to_numpy(dtype=float)
    served, e2e = np.asarray(out["requests_per_s"], dtype=float), np.asarray(out["e2e_latency_s"], dtype=float)
    in_flight = np.asarray(out["concurrency"], dtype=float)
    arriving = np.isfinite(rate) & (np.asarray(out["saturated"]) <= 0)
    duration = np.where(arriving, n_req / np.where(arriving, rate, 1.0),
                        np.maximum(n_req - in_flight, 0.0) / served) + e2e
    finite = n_req / duration * runs["output_len"].to_numpy(dtype=float) / runs["n_gpus"].to_numpy(dtype=float)
    return np.where(np.isfinite(n_req), finite, steady)


def burst_mixed_share(prefill_steps, gaps):
    """Mean share of a request's ``gaps`` (OSL - 1) inter-token gaps that fall in mixed steps when N prompts
    are prefilled over ``prefill_steps`` K steps, first come first served (module doc): K / 2O where O >= K,
    1 - O / 2K where O < K."""
    k, o = np.asarray(prefill_steps, dtype=float), np.asarray(gaps, dtype=float)
    return np.where(o >= k, k / (2.0 * np.maximum(o, 1e-12)), 1.0 - o / (2.0 * np.maximum(k, 1e-12)))


def benchmark_tpot_s(out, runs: pd.DataFrame) -> np.ndarray:
    """Mean inter-token latency of a finite run of ``benchmark_requests`` requests whose requests are all in
    flight together (rate INF, or saturated), from the steady state's step times (module doc); the model's
    steady state elsewhere."""
    steady = np.asarray(out["tpot_s"], dtype=float)
    if "benchmark_requests" not in runs:
        return steady
    n_req = pd.to_numeric(runs["benchmark_requests"], errors="coerce").to_numpy(dtype=float)
    rate = pd.to_numeric(runs["request_rate_per_s"], errors="coerce").to_numpy(dtype=float)
    together = np.isfinite(n_req) & (~np.isfinite(rate) | (np.asarray(out["saturated"]) > 0))
    t_dec, t_mix = np.asarray(out["step_time_decode_s"], dtype=float), np.asarray(out["step_time_mixed_s"], dtype=float)
    f = np.asarray(out["mixed_step_frac"], dtype=float)
    in_flight = np.minimum(np.asarray(out["concurrency"], dtype=float), np.where(np.isfinite(n_req), n_req, np.inf))
    prompt = runs["input_len"].to_numpy(dtype=float) * (1.0 - (pd.to_numeric(runs["prefix_hit_frac"], errors="coerce")
                                                               .fillna(0.0).to_numpy() if "prefix_hit_frac" in runs else 0.0))
    groups = runs["attn_dp"].to_numpy(dtype=float) if "attn_dp" in runs else 1.0
    steps = in_flight / groups * prompt / np.maximum(np.asarray(out["prefill_chunk_tokens"], dtype=float), 1.0)
    m = burst_mixed_share(steps, runs["output_len"].to_numpy(dtype=float) - 1.0)
    burst = steady * (t_dec + m * (t_mix - t_dec)) / (f * t_mix + (1.0 - f) * t_dec)
    return np.where(together, burst, steady)


def predict(runs: pd.DataFrame, cal: ServingCalibration | None = None) -> pd.DataFrame:
    """The runs with the model's predictions and the signed and absolute percentage errors."""
    table = {c: runs[c].to_numpy() for c in DESIGN_COLUMNS if c in runs}
    out = evaluate_serving(table, cal=cal)
    result = runs.copy()
    for col in PREDICTED:
        result[f"predicted_{col}"] = np.asarray(out[col])
    result["predicted_steady_tokens_per_s_per_gpu"] = result["predicted_output_tokens_per_s_per_gpu"]
    result["predicted_output_tokens_per_s_per_gpu"] = benchmark_tokens_per_s_per_gpu(out, runs)
    result["predicted_steady_tpot_s"] = result["predicted_tpot_s"]
    result["predicted_tpot_s"] = benchmark_tpot_s(out, runs)
    finite = result["predicted_output_tokens_per_s_per_gpu"] / result["predicted_steady_tokens_per_s_per_gpu"]
    burst = result["predicted_tpot_s"] / result["predicted_steady_tpot_s"]
    for end in ("lo", "hi"):  # the interval of a finite run: the steady state's, scaled as the run's figure
        result[f"predicted_output_tokens_per_s_per_gpu_{end}"] *= finite
        result[f"predicted_tpot_s_{end}"] *= burst
    for what, measured in (("tokens", "measured_output_tokens_per_s_per_gpu"), ("ttft", "measured_ttft_s"),
                           ("tpot", "measured_tpot_s")):
        predicted = {"tokens": "predicted_output_tokens_per_s_per_gpu", "ttft": "predicted_ttft_s",
                     "tpot": "predicted_tpot_s"}[what]
        m = pd.to_numeric(result[measured], errors="coerce").to_numpy(dtype=float) if measured in result else np.nan
        p = result[predicted].to_numpy(dtype=float)
        result[f"{what}_error"] = (p - m) / m
        result[f"{what}_ape"] = np.abs(p - m) / m
    return result


@dataclass(frozen=True)
class ServingSummary:
    per_source: pd.DataFrame  # index source: rows, mape, max_ape, bias (tokens/s per GPU); tpot/ttft MAPE and rows
    per_gpu: pd.DataFrame  # index (source, gpu): rows, mape, bias
    mape_source_weighted: float  # output tokens/s per GPU, each source weighing the same
    mape_row_weighted: float
    tpot_mape_online: float  # mean ITL on the online rows
    ttft_mape_online: float
    online_rows: int


def summarize(result: pd.DataFrame) -> ServingSummary:
    """The headline figures over the fitted group (validation-only runs apart: :func:`speculative_summary`)."""
    result = result[~validation_only(result)]
    g = result.groupby("source_key")
    per = pd.DataFrame({"rows": g.size(), "mape": g["tokens_ape"].mean(), "max_ape": g["tokens_ape"].max(),
                        "bias": g["tokens_error"].mean(), "tpot_rows": g["tpot_ape"].count(),
                        "tpot_mape": g["tpot_ape"].mean(), "ttft_mape": g["ttft_ape"].mean()})
    by_gpu = result.groupby(["source_key", "gpu"])
    per_gpu = pd.DataFrame({"rows": by_gpu.size(), "mape": by_gpu["tokens_ape"].mean(), "bias": by_gpu["tokens_error"].mean()})
    online = result[result["scenario"] == "online"]
    return ServingSummary(
        per_source=per, per_gpu=per_gpu,
        mape_source_weighted=float(per["mape"].mean()),
        mape_row_weighted=float(result["tokens_ape"].mean()),
        tpot_mape_online=float(online["tpot_ape"].mean()) if len(online) else float("nan"),
        ttft_mape_online=float(online["ttft_ape"].mean()) if len(online) else float("nan"),
        online_rows=len(online),
    )


def speculative_summary(result: pd.DataFrame) -> pd.DataFrame | None:
    """Per source and speculation (none, or the method) of the validation-only runs: rows, MAPE and bias of
    output tokens/s per GPU, MAPE of TPOT (None where there are none)."""
    mine = result[validation_only(result)]
    if not len(mine):
        return None
    spec = mine["spec_decode"].fillna("none").astype(str).replace("", "none")
    g = mine.groupby([mine["source_key"], spec.rename("spec")])
    return pd.DataFrame({"rows": g.size(), "measured": g["measured_output_tokens_per_s_per_gpu"].median(),
                         "predicted": g["predicted_output_tokens_per_s_per_gpu"].median(),
                         "mape": g["tokens_ape"].mean(), "bias": g["tokens_error"].mean(),
                         "tpot_mape": g["tpot_ape"].mean()})
