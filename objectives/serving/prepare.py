"""The serving design table at the boundary: columns, defaults, catalog expansion and input checks.

A serving table is a design table with ``input_len`` and ``output_len`` (tokens in and out per request).
It names a model and a GPU as a training table does (catalog ids, any field overridable), and how one
model instance runs: ``n_gpus`` GPUs per instance as ``tp`` x ``attn_dp`` x ``pp`` (tensor parallel ranks of
each attention data-parallel group, attention data-parallel groups, pipeline stages), ``ep`` expert
parallel ranks over the tp x attn_dp GPUs of a stage (the rest of their product splits each expert), the
weights' ``precision`` and the ``kv_precision`` of the KV cache, the ``engine``, and the load:
``concurrency`` (requests in flight per instance; blank: the largest that fits and meets the targets) or
``request_rate_per_s`` (requests per second over the deployment's ``replicas`` instances: the concurrency
then follows from Little's law), ``ttft_slo_s`` and ``tpot_slo_s`` (blank: no target). ``max_batch_size``
and ``max_num_tokens`` override the engine's defaults (blank: objectives.serving.engines). ``prefix_hit_frac``
(0 <= h < 1, default 0) is the share of each prompt served from a prefix cache (objectives.serving.step). ``serving``
``disaggregated`` adds a prefill instance (``prefill_n_gpus``, ``prefill_tp``, ... : objectives.serving.disaggregated).

What the training model needs and serving does not describe (global batch, micro-batch, recompute, ZeRO)
is not read. ``seq_len`` is set to ``input_len + output_len`` (the longest context a request reaches).
Bad input raises :class:`objectives.InputError` naming the row and column, as the training table does.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from objectives import catalog
from objectives.columns import all_at_least, all_whole, bad_row, distinct_cells, fill_blanks, number_cells
from objectives.pipeline import DEFAULTS as TRAINING_DEFAULTS
from objectives.pipeline import check_architecture, fill_defaults, open_table
from objectives.serving.engines import vendor_codes
from objectives.serving.prefill_pool import PREFILL_GPU_COLUMNS, check_prefill_overrides, prefill_gpu_columns
from objectives.serving.speculative import model_codes
from objectives.table import CATEGORIES, Columns, InputError, is_constant

__all__ = ["SERVING_DEFAULTS", "SERVING_REQUIRED", "SERVING_INPUTS", "SERVING_CATEGORIES", "is_serving_table",
           "prepare_serving"]

#: the categorical columns a serving row may set
SERVING_CATEGORIES = ("precision", "kv_precision", "engine", "serving", "ffn_kind", "attn_window_kind", "cost_mode",
                      "instance", "pricing", "spec_decode")
#: what an absent or blank optional column means (NaN: derived by the model)
SERVING_DEFAULTS: dict[str, float] = {
    **{k: v for k, v in TRAINING_DEFAULTS.items() if k not in ("cp", "vp", "zero_stage", "recompute", "stack", "dropout",
                                                               "train_tokens", "pp_first_layers", "pp_last_layers",
                                                               "ckpt_mode", "ckpt_every_s", "storage_units_min",
                                                               "dataset_tb")},
    "pp": 1.0, "ep": 1.0, "attn_dp": 1.0, "kv_precision": 0.0, "engine": 0.0, "serving": 0.0, "replicas": np.nan,
    "concurrency": np.nan, "request_rate_per_s": np.nan, "ttft_slo_s": np.nan, "tpot_slo_s": np.nan,
    "max_batch_size": np.nan, "max_num_tokens": np.nan, "kv_mem_frac": np.nan,
    # expert tensor parallelism: each routed expert split over etp GPUs, ep x etp = tp x attn_dp (blank: tp x
    # attn_dp / ep, TensorRT-LLM's default; objectives/serving/experts.py)
    "etp": np.nan,
    # an expert load balancer (1: the experts placed, and ``redundant_experts`` copies of the hottest added, from
    # their measured loads; 0: the engines' default placement; objectives/serving/balance.py)
    "eplb": 0.0, "redundant_experts": 0.0,
    # MoE under attention data parallelism: 0 all-gather and reduce-scatter (the engines' default), 1 all-to-all
    "moe_all_to_all": 0.0,
    # attention data parallelism: 1 where the groups take their prompts in the same steps (TensorRT-LLM
    # attention_dp_config enable_balance, off by default; objectives/serving/batching.py)
    "attn_dp_balance": 0.0,
    # 1: the engine deployed as its min-latency guides configure it (CUDA graphs up to batch 8, PDL, fused
    # one-shot all-reduce; objectives/serving/latency.py), its decode steps at small batch latency-tuned
    "latency_tuned": 0.0,
    # prefix caching: the share of each request's prompt tokens served from a prefix cache (0 <= h < 1; the
    # prefill computes the rest, objectives/serving/step.py); 0, none: no published run in the validation has one
    "prefix_hit_frac": 0.0,
    # speculative decoding (objectives/serving/speculative.py): the method (0 none), the draft length k (blank: 3
    # where speculating), the mean tokens a verify step emits (blank: objectives/catalog/speculative.yaml), a
    # draft model's parameters
    "spec_decode": 0.0, "spec_tokens": np.nan, "spec_accept_tokens_per_step": np.nan, "spec_draft_params": np.nan,
    # disaggregated serving: the prefill instance's mapping (blank: the decode instance's; objectives/serving/disaggregated.py)
    "prefill_n_gpus": np.nan, "prefill_tp": np.nan, "prefill_pp": np.nan, "prefill_ep": np.nan, "prefill_attn_dp": np.nan,
}
#: columns every serving row needs after catalog expansion, with the smallest valid value
SERVING_REQUIRED: dict[str, float] = {
    "n_gpus": 1, "input_len": 1, "output_len": 1, "tp": 1,
    "n_layers": 1, "d_model": 1, "n_heads": 1, "d_ff": 1, "vocab_size": 1,
    "gpu_bf16_tflop_s": 0, "gpu_gemm_eff_bf16": 0, "gpu_hbm_gb": 0, "gpu_hbm_tbyte_s": 0,
    "scaleup_size": 1, "scaleup_gbyte_s": 0, "nic_gbyte_s": 0,
}
_INTEGERS = ("n_gpus", "input_len", "output_len", "tp", "pp", "ep", "attn_dp", "etp", "redundant_experts", "replicas",
             "max_batch_size",
             "prefill_n_gpus", "prefill_tp", "prefill_pp", "prefill_ep", "prefill_attn_dp",
             "max_num_tokens", "n_layers", "n_heads", "n_kv_heads", "moe_experts", "moe_topk", "attn_window", "spec_tokens")
#: optional numeric columns that must be > 0 where given
_POSITIVE = ("concurrency", "request_rate_per_s", "ttft_slo_s", "tpot_slo_s", "max_batch_size", "max_num_tokens",
             "kv_mem_frac", "spec_draft_params")
#: every column a serving table may set
SERVING_INPUTS: frozenset[str] = frozenset(
    set(SERVING_REQUIRED) | set(SERVING_DEFAULTS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS)
    | set(catalog.NETWORK_FIELDS) | set(SERVING_CATEGORIES) | {"model", "gpu", "network", "d_head"}
    | {"prefill_gpu"} | set(PREFILL_GPU_COLUMNS.values())  # a disaggregated row's prefill GPU (prefill_pool.py)
)


def is_serving_table(table: Mapping[str, object]) -> bool:
    """A table is a serving table where it has both ``input_len`` and ``output_len`` columns."""
    return "input_len" in table and "output_len" in table


def _check_numbers(user: Columns) -> None:
    """InputError for a numeric serving column holding text that is not a number; blank text -> NaN."""
    for name in (set(SERVING_REQUIRED) | set(SERVING_DEFAULTS) | set(_INTEGERS)) - set(CATEGORIES):
        value = user.get(name)
        if value is None or value.dtype.kind in "iufb":
            continue
        _, _, as_num = number_cells(value, name)
        cells = as_num.to_numpy(dtype=np.float64)
        user[name] = np.broadcast_to(cells, value.shape) if is_constant(value) else cells


def prepare_serving(table: Mapping[str, object]) -> tuple[Columns, Columns]:
    """(user columns broadcast, model inputs as float arrays) of a serving table; InputError on bad input."""
    user, cols, distinct, n = open_table(table, SERVING_CATEGORIES, _check_numbers)
    floats: Columns = {}
    for name, value in cols.items():
        if value.dtype.kind in "iufb":
            floats[name] = value.astype(np.float64, copy=False)
        elif value.dtype == object and name not in ("model", "gpu", "network", "storage", "prefill_gpu"):
            try:
                floats[name] = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                pass  # a label column carried through (notes, a source)
    for name in SERVING_REQUIRED:
        if name not in floats:
            where = " and the catalog" if name.startswith(("gpu_", "scale", "nic")) else ""
            raise InputError(f"is required in a serving table (missing from the table{where})", column=name)
    fill_defaults(floats, SERVING_DEFAULTS, n)
    _check_share(floats, "prefix_hit_frac")  # a blank cell is no prefix cache (0), as every defaulted column's
    # the GPU's vendor, which decides the engines that run on it (objectives/serving/engines.py; NaN: no catalog GPU)
    floats["gpu_vendor"] = vendor_codes(user["gpu"]) if "gpu" in user else np.broadcast_to(np.nan, (n,))
    # the prefill pool's GPU (``prefill_gpu``; blank: the row's own): its columns (objectives/serving/prefill_pool.py)
    check_prefill_overrides(floats)
    floats.update(prefill_gpu_columns(user, floats, n, SERVING_DEFAULTS))
    # the catalog model, whose published acceptance a speculative row reads (objectives/serving/speculative.py)
    floats["spec_model_code"] = model_codes(user["model"]) if "model" in user else np.broadcast_to(np.nan, (n,))
    heads = floats["n_heads"]
    floats["n_kv_heads"] = fill_blanks(floats["n_kv_heads"], heads) if "n_kv_heads" in floats else heads
    if "d_head" not in floats or np.isnan(distinct_cells(floats["d_head"])).any():
        per_head = floats["d_model"] / np.maximum(floats["n_heads"], 1.0)
        floats["d_head"] = fill_blanks(floats["d_head"], per_head) if "d_head" in floats else per_head
    floats["seq_len"] = floats["input_len"] + floats["output_len"]
    _check_values(floats, distinct)
    check_architecture(floats)
    _check_mapping(floats)
    return user, floats


def _check_values(floats: Columns, distinct: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Required columns finite and at least their minimum; integer columns whole; optional ones > 0.
    ``distinct``: the catalog's columns, each with the few values its rows take (checking those checks
    every row; the rows are read only to name the first bad one)."""

    def cells(name: str) -> np.ndarray:
        column, values = distinct.get(name, (None, None))
        return values if column is floats[name] else distinct_cells(floats[name])

    for name, low in SERVING_REQUIRED.items():
        if all_at_least(cells(name), low):
            continue
        v = distinct_cells(floats[name])
        row = bad_row(~((v > 0) if low == 0 else (v >= low)) | (v == np.inf))
        if row is not None:
            what = "missing" if np.isnan(v[row]) else f"{v[row]:g}"
            raise InputError(f"{what} is not valid; needs a finite number >= {low}" + (" (> 0)" if low == 0 else ""),
                             column=name, row=row)
    for name in _INTEGERS:
        v = cells(name)
        if all_whole(v[np.isfinite(v)]):
            continue
        v = distinct_cells(floats[name])
        row = bad_row(np.isfinite(v) & ((v != np.floor(v)) | (v < 0)))
        raise InputError(f"{v[row]:g} is not a non-negative whole number", column=name, row=row)
    for name in _POSITIVE:
        v = distinct_cells(floats[name])
        row = bad_row(~np.isnan(v) & ~((v > 0) & (v < np.inf)))
        if row is not None:
            raise InputError(f"{v[row]:g} is not valid; needs a number > 0 (or blank)", column=name, row=row)
    for name in ("pp", "ep", "attn_dp", "replicas"):
        v = distinct_cells(floats[name])
        row = bad_row(~(v >= 1) & ~((name == "replicas") & np.isnan(v)))
        if row is not None:
            raise InputError(f"{v[row]:g} is not valid; needs a whole number >= 1", column=name, row=row)
    for name in ("moe_all_to_all", "attn_dp_balance", "latency_tuned", "eplb"):
        v = distinct_cells(floats[name])
        row = bad_row((v != 0) & (v != 1))
        if row is not None:
            raise InputError(f"{v[row]:g} is not valid; needs 0 or 1", column=name, row=row)
    eplb, experts = np.broadcast_arrays(*(distinct_cells(floats[k]) for k in ("eplb", "moe_experts")))
    redundant = distinct_cells(floats["redundant_experts"])
    row = bad_row(~np.isfinite(redundant))
    if row is not None:
        raise InputError(f"{redundant[row]:g} is not valid; needs a whole number >= 0 (copies of the hottest experts)",
                         column="redundant_experts", row=row)
    row = bad_row((eplb > 0) & ~(experts > 0))
    if row is not None:
        raise InputError("1 needs an MoE model (a load balancer places routed experts; this model has none)",
                         column="eplb", row=row)
    accept = distinct_cells(floats["spec_accept_tokens_per_step"])
    row = bad_row(~np.isnan(accept) & ~((accept >= 1) & (accept < np.inf)))
    if row is not None:
        raise InputError(f"{accept[row]:g} is not valid; needs the mean tokens a verify step emits, >= 1 (or blank)",
                         column="spec_accept_tokens_per_step", row=row)
    frac = distinct_cells(floats["kv_mem_frac"])
    row = bad_row(frac > 1)
    if row is not None:
        raise InputError(f"{frac[row]:g} is not a share of memory (0 to 1)", column="kv_mem_frac", row=row)


def _check_share(floats: Columns, name: str) -> None:
    """Every cell of ``name`` a share 0 <= x < 1 (1 and beyond, negatives and infinities are InputErrors)."""
    if name not in floats:
        return
    v = distinct_cells(floats[name])
    row = bad_row(~((v >= 0) & (v < 1)))
    if row is not None:
        raise InputError(f"{v[row]:g} is not valid; needs a share 0 <= {name} < 1 (0: none)", column=name, row=row)


def _check_mapping(floats: Columns) -> None:
    """The instance's GPUs are tp x attn_dp x pp, and a disaggregated row's prefill instance's likewise."""
    t, d, p, n = (distinct_cells(floats[k]) for k in ("tp", "attn_dp", "pp", "n_gpus"))
    row = bad_row(t * d * p != n)
    if row is not None:
        raise InputError(f"tp*attn_dp*pp = {t[row]:g}*{d[row]:g}*{p[row]:g} = {t[row] * d[row] * p[row]:g} is not "
                         f"n_gpus = {n[row]:g} (n_gpus counts the GPUs of one model instance; replicas adds instances)",
                         column="n_gpus", row=row)
    _check_expert_tp(floats)
    # the prefill instance of a disaggregated row: its blank cells are the decode instance's
    disaggregated = distinct_cells(floats["serving"]) == 1
    if not disaggregated.any():
        return

    def prefill(name, decode):
        v = distinct_cells(floats[name])
        return np.where(np.isnan(v), distinct_cells(floats[decode]), v)

    t, d, p, n = (prefill(f"prefill_{k}", k) for k in ("tp", "attn_dp", "pp", "n_gpus"))
    row = bad_row(disaggregated & (t * d * p != n))
    if row is not None:
        raise InputError(f"prefill_tp*prefill_attn_dp*prefill_pp = {t[row]:g}*{d[row]:g}*{p[row]:g} = "
                         f"{t[row] * d[row] * p[row]:g} is not prefill_n_gpus = {n[row]:g} (a blank prefill cell is the "
                         "decode instance's)", column="prefill_n_gpus", row=row)


def _check_expert_tp(floats: Columns) -> None:
    """A given etp (objectives/serving/experts.py) is >= 1, on an MoE model, and splits the stage's tp x attn_dp
    GPUs and each expert's hidden size d_ff (TensorRT-LLM's fused MoE splits the intermediate size over
    moe_tp_size); ep x etp = tp x attn_dp is the mapping's, checked by the model (con_layout: ep may be searched)."""
    etp = distinct_cells(floats["etp"])
    if np.isnan(etp).all():
        return
    etp, t, d, ff, experts = np.broadcast_arrays(etp, *(distinct_cells(floats[k]) for k in ("tp", "attn_dp", "d_ff",
                                                                                        "moe_experts")))
    given = ~np.isnan(etp)
    row = bad_row(given & ~(etp >= 1))
    if row is not None:
        raise InputError(f"{etp[row]:g} is not valid; needs a whole number >= 1 (or blank: tp*attn_dp/ep)", column="etp",
                         row=row)
    row = bad_row(given & (etp > 1) & ~(experts > 0))
    if row is not None:
        raise InputError(f"{etp[row]:g} needs an MoE model (expert tensor parallelism splits routed experts; this "
                         "model has none)", column="etp", row=row)
    row = bad_row(given & (np.mod(t * d, etp) != 0))
    if row is not None:
        raise InputError(f"{etp[row]:g} does not divide tp*attn_dp = {t[row] * d[row]:g} (each expert's slices lie on "
                         "GPUs of one pipeline stage)", column="etp", row=row)
    row = bad_row(given & (np.mod(ff, etp) != 0))
    if row is not None:
        raise InputError(f"{etp[row]:g} does not divide the experts' hidden size d_ff = {ff[row]:g}", column="etp",
                         row=row)
