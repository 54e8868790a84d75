"""The model against published measured training runs.

``catalog/training_runs.csv`` holds the published runs the design table can describe (built from the
project's shared measurements by ``tools/build_training_runs.py``; ``training_runs.md`` has the sources,
FLOP conventions and exclusions). Each included row is evaluated with its published mapping; the cells a
source does not publish (often the micro-batch) are searched like any blank mapping cell. The error
measure is the absolute percentage error of tokens per second per GPU; sources weigh the same in the
headline mean, so 78 rows of one benchmark table do not drown 10 rows of a paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from objectives.calibration import Calibration
from objectives.inputs import TRAINING_INPUT_COLUMNS
from objectives.mapping import search_mapping

__all__ = ["RUNS_PATH", "load_runs", "predict", "Summary", "summarize"]

RUNS_PATH = Path(__file__).resolve().parent.parent / "catalog" / "training_runs.csv"
DESIGN_COLUMNS = (
    "model", "n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "ffn_kind", "vocab_size",
    "seq_len", "global_batch", "moe_experts", "moe_topk", "precision", "gpu", "n_gpus", "tp", "pp", "cp",
    "ep", "vp", "micro_batch", "recompute", "sequence_parallel", "zero_stage", "tied_embeddings", "stack", "dropout",
    "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim", "v_head_dim", "moe_shared_experts", "moe_dense_layers",
    "dense_d_ff", "moe_layer_freq", "attn_window", "attn_window_frac", "attn_window_kind", "fp8_recipe",
)
PAPER_SOURCE = "narayanan21-table1"
#: the model's columns a run's prediction interval reads beyond the design table's (its mapping, its model's
#: size, its GPU): kept as model_<name>
MODEL_FEATURES = ("tp", "pp", "ep", "seq_len", "precision", "stack", "moe_experts",
                  "n_params", "n_params_active", "gpu_bf16_tflop_s", "gpu_hbm_tbyte_s",
                  "scaleup_gbyte_s", "scaleup_size", "scaleup_mesh", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s")


def source_of(source_key: str) -> str:
    """The source a row counts under: its publication table.

    Megatron-Bridge's performance summary and its archive form one source: the rows kept are the newest
    container's measurement of each configuration (older ones are marked superseded in the catalog).
    The Megatron-Core README's strong-scaling rows belong to the same README as its weak-scaling table.
    """
    if source_key.startswith("mbridge-"):
        return "megatron-bridge"
    if source_key.startswith("mcore-readme-2024"):
        return "mcore-readme-2024"
    return source_key




def load_runs(path: str | Path = RUNS_PATH, included_only: bool = True) -> pd.DataFrame:
    runs = pd.read_csv(path)
    if included_only and "include" in runs:
        runs = runs[runs["include"] == 1].reset_index(drop=True)
    return runs


def predict(runs: pd.DataFrame, cal: Calibration | None = None) -> pd.DataFrame:
    """The runs with the model's prediction, its mapping choices and the absolute percentage error."""
    table = {c: runs[c].to_numpy() for c in runs.columns if c in TRAINING_INPUT_COLUMNS}  # the published runs': DESIGN_COLUMNS
    out = search_mapping(table, cal=cal)
    result = runs.copy()
    for col in ("micro_batch", "recompute", "vp", "cp", "zero_stage", "sequence_parallel"):
        result[f"model_{col}"] = out[col]
    for col in MODEL_FEATURES:  # what the prediction intervals read (objectives.training.intervals)
        result[f"model_{col}"] = out[col]
    for col in ("step_time_s", "tokens_per_s_per_gpu", "model_tflop_s_per_gpu", "mfu", "hbm_used_gb", "feasible",
                "time_compute_s", "time_tp_comm_s", "time_cp_comm_s", "time_ep_comm_s", "time_pp_bubble_s",
                "time_pp_comm_s", "time_dp_comm_exposed_s", "time_optimizer_s",
                "tokens_per_s_per_gpu_lo", "tokens_per_s_per_gpu_hi", "validated_distance_oct"):
        result[col if col.startswith("time_") else f"predicted_{col}"] = out[col]
    measured = result["measured_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    predicted = result["predicted_tokens_per_s_per_gpu"].to_numpy(dtype=float)
    result["ape"] = np.abs(predicted - measured) / measured
    result["signed_error"] = (predicted - measured) / measured
    return result


@dataclass(frozen=True)
class Summary:
    per_source: pd.DataFrame  # index source (see source_of): rows, mape, max_ape, bias
    mape_source_weighted: float
    mape_row_weighted: float
    mape_paper: float  # Narayanan et al. SC'21 Table 1
    worst_source: str
    worst_source_mape: float


def summarize(result: pd.DataFrame) -> Summary:
    g = result.groupby(result["source_key"].map(source_of).rename("source"))
    per = pd.DataFrame({
        "rows": g.size(),
        "mape": g["ape"].mean(),
        "max_ape": g["ape"].max(),
        "bias": g["signed_error"].mean(),
    })
    paper = per.loc[PAPER_SOURCE, "mape"] if PAPER_SOURCE in per.index else float("nan")
    return Summary(
        per_source=per,
        mape_source_weighted=float(per["mape"].mean()),
        mape_row_weighted=float(result["ape"].mean()),
        mape_paper=float(paper),
        worst_source=str(per["mape"].idxmax()),
        worst_source_mape=float(per["mape"].max()),
    )
