"""Held-out residuals of the serving model: each published measurement predicted by factors fitted without it.

    python -m objectives.serving.fit --cross-validate   # the refits (about a minute); writes
                                                        # catalog/serving_loso_residuals.csv and the intervals

There are three serving sources, two of them from one engine generation (TensorRT-LLM 0.14 and 0.17 share
the C++ executor), so leaving one *source* out gives three folds, one of which (TensorRT-LLM 1.0) holds
every Blackwell, FP4 and attention-data-parallel row: too few held-out units to learn how the error grows,
and a fold that removes four kinds of row at once. The held-out unit is the **model architecture** instead
(:func:`architecture_groups`: models sharing every architecture field count as one, Llama 3.1 70B and 3.3
70B alike): nine folds, each refitting the factors on every other architecture, on every source, GPU,
precision and engine, so that each held-out row is predicted as a model the fit never saw, which is what a
design of a new model (DeepSeek-R1, say) is. Its residuals carry the levels and the distances the interval
reads (objectives/serving/intervals.py).

A second scheme holds out each **engine** (``trtllm``, the 1.0 source; ``trtllm-2024``, the 0.14 and 0.17
sources): its factors no other engine informs (host time per step and per request; FP4's GEMM rate on
Blackwell for ``trtllm``) stay at their documented priors, as they are for vLLM and SGLang, which no
published run measures. Those residuals (``log_ratio_engine_out``) size the widening for an unvalidated
engine.

The residuals are log(predicted / measured) of output tokens/s per GPU (as the validation reads it: a
finite run where the source ran one), and of TPOT and TTFT where measured.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from objectives.serving.engines import ServingCalibration
from objectives.serving.evaluate import evaluate_serving
from objectives.serving.validation import DESIGN_COLUMNS, predict
from objectives.training.intervals import GENERATIONS, generation

__all__ = ["RESIDUALS_PATH", "ARCHITECTURE", "architecture_groups", "engine_groups", "held_out", "residual_table",
           "write_residuals", "read_residuals"]

RESIDUALS_PATH = Path(__file__).resolve().parent.parent / "catalog" / "serving_loso_residuals.csv"
#: the fields that make a model's architecture (the catalog's; seq_len is a training default, not architecture)
ARCHITECTURE = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab_size", "moe_experts", "moe_topk",
                "kv_lora_rank", "moe_shared_experts", "dense_d_ff", "attn_window")
#: the columns the interval reads, from the evaluated design (in-sample operating point)
FEATURE_COLUMNS = ("n_gpus", "tp", "pp", "ep", "attn_dp", "n_params", "n_params_active", "input_len", "output_len",
                   "concurrency", "gpu_bf16_tflop_s", "gpu_hbm_tbyte_s", "gpu_hbm_gb", "scaleup_size")


def _features(runs: pd.DataFrame) -> dict[str, np.ndarray]:
    out = evaluate_serving({c: runs[c].to_numpy() for c in DESIGN_COLUMNS if c in runs})
    return {k: np.asarray(v) for k, v in out.items()}


def architecture_groups(runs: pd.DataFrame, features: dict[str, np.ndarray] | None = None) -> pd.Series:
    """Each run's architecture group, named by its models ('llama3-70b+llama3.3-70b')."""
    f = features if features is not None else _features(runs)
    key = pd.DataFrame({c: np.nan_to_num(np.asarray(f[c], dtype=float), nan=-1.0) for c in ARCHITECTURE})
    code = key.groupby(list(ARCHITECTURE), sort=True).ngroup().to_numpy()
    names = {g: "+".join(sorted(set(runs["model"][code == g]))) for g in np.unique(code)}
    return pd.Series([names[g] for g in code], index=runs.index, name="group")


def engine_groups(runs: pd.DataFrame) -> pd.Series:
    return runs["engine"].astype(str).rename("engine_group")


def held_out(runs: pd.DataFrame, groups: pd.Series, fit_fn, max_nfev: int, log=print) -> pd.DataFrame:
    """``predict`` of every run by factors fitted (``fit_fn(runs, start, max_nfev)``, from the priors) without
    its group, in the runs' order."""
    parts = []
    for name in sorted(groups.unique()):
        rows = (groups == name).to_numpy()
        cal = fit_fn(runs[~rows].reset_index(drop=True), ServingCalibration(), max_nfev)
        part = predict(runs[rows].reset_index(drop=True), cal)
        part.index = runs.index[rows]
        parts.append(part)
        ape = part["tokens_ape"]
        log(f"  {groups.name} {name:<30} {int(rows.sum()):>4} runs  held-out MAPE {ape.mean():6.1%}")
    return pd.concat(parts).loc[runs.index]


def _log_ratio(result: pd.DataFrame, what: str) -> np.ndarray:
    return np.log1p(result[f"{what}_error"].to_numpy(dtype=float))


def residual_table(runs: pd.DataFrame, by_model: pd.DataFrame, by_engine: pd.DataFrame, in_sample: pd.DataFrame,
                   groups: pd.Series, features: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per run: what it is, the interval's columns, and its held-out log ratios (module doc)."""
    f = features
    gen = generation(np.asarray(f["gpu_fp8_tflop_s"], dtype=float), np.asarray(f["gpu_fp4_tflop_s"], dtype=float))
    out = pd.DataFrame({
        "run_id": runs["run_id"].to_numpy(), "source": runs["source_key"].to_numpy(), "group": groups.to_numpy(),
        "scenario": runs["scenario"].to_numpy(), "model": runs["model"].to_numpy(), "gpu": runs["gpu"].to_numpy(),
        "engine": runs["engine"].to_numpy(), "generation": np.asarray(GENERATIONS, dtype=object)[gen.astype(int)],
        "moe": (np.nan_to_num(np.asarray(f["moe_experts"], dtype=float)) > 0).astype(int),
        "mla": (np.nan_to_num(np.asarray(f["kv_lora_rank"], dtype=float)) > 0).astype(int),
        "precision": runs["precision"].to_numpy(), "kv_precision": runs["kv_precision"].to_numpy(),
        **{c: np.asarray(f[c], dtype=float) for c in FEATURE_COLUMNS},
        "measured_output_tokens_per_s_per_gpu": runs["measured_output_tokens_per_s_per_gpu"].to_numpy(dtype=float),
        "predicted_output_tokens_per_s_per_gpu": by_model["predicted_output_tokens_per_s_per_gpu"].to_numpy(dtype=float),
        "log_ratio": _log_ratio(by_model, "tokens"),
        "log_ratio_in_sample": _log_ratio(in_sample, "tokens"),
        "log_ratio_engine_out": _log_ratio(by_engine, "tokens"),
        "measured_tpot_s": pd.to_numeric(runs["measured_tpot_s"], errors="coerce").to_numpy(dtype=float),
        "predicted_tpot_s": by_model["predicted_tpot_s"].to_numpy(dtype=float),
        "log_ratio_tpot": _log_ratio(by_model, "tpot"),
        "measured_ttft_s": pd.to_numeric(runs["measured_ttft_s"], errors="coerce").to_numpy(dtype=float),
        "predicted_ttft_s": by_model["predicted_ttft_s"].to_numpy(dtype=float),
        "log_ratio_ttft": _log_ratio(by_model, "ttft"),
    })
    return out.sort_values("run_id", kind="stable").reset_index(drop=True)


def write_residuals(table: pd.DataFrame, path: str | Path = RESIDUALS_PATH, command: str = "") -> None:
    with open(path, "w") as fh:
        fh.write(f"# written by `{command or 'python -m objectives.serving.fit --cross-validate'}`: each published "
                 "serving measurement predicted by factors fitted without its model architecture (log_ratio, "
                 "log_ratio_tpot, log_ratio_ttft) and without its engine (log_ratio_engine_out); "
                 "log_ratio = log(predicted / measured)\n")
        table.to_csv(fh, index=False, float_format="%.6g", lineterminator="\n")


def read_residuals(path: str | Path = RESIDUALS_PATH) -> pd.DataFrame:
    skip = 0
    with open(path) as fh:
        while fh.readline().startswith("#"):  # the header lines saying how the file was written
            skip += 1
    return pd.read_csv(path, skiprows=skip)
