"""Prepare a design table and run the model modules over it in order.

``prepare`` is the boundary: it rejects renamed columns (objectives.renamed), broadcasts columns, encodes
categoricals, expands catalog ids, fills defaults and checks user input once (raising :class:`InputError`
naming the row and column). The modules then only see float arrays. ``evaluate`` runs them in chunks that
stay in cache.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from objectives import catalog
from objectives.base import Model
from objectives.calibration import Calibration
from objectives.columns import (
    all_at_least,
    all_whole,
    bad_row,
    distinct_cells,
    fill_blanks,
    has_nan,
    number_cells,
    with_outputs,
)
from objectives.economics.breakeven import Breakeven
from objectives.economics.cost import Cost
from objectives.economics.facility import FACILITY_DEFAULTS, Facility
from objectives.economics.power import Power
from objectives.economics.rental import Rental
from objectives.ranges import check_ranges
from objectives.reasons import infeasible_reason
from objectives.renamed import check_renamed
from objectives.table import CATEGORIES, Columns, InputError, as_columns, encode, is_constant
from objectives.training.checkpoint import Checkpoint
from objectives.training.communication import Communication
from objectives.training.compute import ComputeTime
from objectives.training.divisibility import Job, input_errors
from objectives.training.intervals import Intervals
from objectives.training.layout import Layout
from objectives.training.memory import Memory
from objectives.training.quantization import default_fp8_recipe
from objectives.training.reliability import Reliability
from objectives.training.steptime import StepTime
from objectives.training.topology import Topology
from objectives.training.transformer import TransformerMath

__all__ = ["MODELS", "TRAINING_MODELS", "DESIGN_MODELS", "MAPPING_MODELS", "ECONOMICS_MODELS", "MAPPING_COLUMNS", "run_models",
           "DEFAULTS", "REQUIRED", "open_table", "fill_defaults", "prepare", "evaluate", "check_layout", "check_architecture",
           "metrics", "rental_labels"]

#: the model modules, in data-flow order: the design-only ones (the fabric's bandwidth and latency feed the
#: collectives), the mapping-dependent ones up to the step time, then the cluster economics.
#: what depends on the design alone (model arithmetic, the fabric for n GPUs): run once per design
DESIGN_MODELS: tuple[Model, ...] = (TransformerMath(), Topology())
#: what depends on the mapping too: run for every candidate mapping
MAPPING_MODELS: tuple[Model, ...] = (Layout(), Memory(), ComputeTime(), Communication(), StepTime())
#: the economics of a design run on its chosen mapping (the mapping search ranks on step time and runs
#: these only on each design's winner), then the 80% intervals of the throughput and of every time, cost
#: and energy figure that follows from it
ECONOMICS_MODELS: tuple[Model, ...] = (Rental(), Checkpoint(), Reliability(), Power(), Facility(), Cost(), Breakeven(),
                                       Intervals())
#: the training performance model alone: transformer arithmetic .. step time, no economics
TRAINING_MODELS: tuple[Model, ...] = DESIGN_MODELS + MAPPING_MODELS
MODELS: tuple[Model, ...] = TRAINING_MODELS + ECONOMICS_MODELS

MAPPING_COLUMNS = ("tp", "pp", "cp", "ep", "vp", "micro_batch", "recompute", "sequence_parallel", "zero_stage")

#: what an absent or blank optional column means
DEFAULTS: dict[str, float] = {
    "cp": 1.0, "ep": 1.0, "vp": 1.0, "zero_stage": 1.0, "recompute": 0.0, "precision": 0.0,
    "moe_experts": 0.0, "moe_topk": 0.0, "scaleup_mesh": 0.0, "host_grace": 0.0,
    "tied_embeddings": 0.0, "ffn_kind": 1.0, "oversubscription": 1.0,
    "train_tokens": np.nan, "stack": 0.0, "dropout": 0.0,
    # blank: by the GPU (objectives.training.quantization.default_fp8_recipe, filled in prepare)
    "fp8_recipe": np.nan,
    # nodes (scale-up domains) a token's experts may span, 0: unlimited (objectives/training/collectives.py
    # routed_all_to_all_s; DeepSeek-V3 trains with 4)
    "moe_max_nodes": 0.0,
    # MLA, MoE extras and windowed attention: 0 = not used (objectives/training/transformer.py)
    **catalog.MODEL_FIELD_DEFAULTS,
    # decoder layers on the first / last pipeline stage (Megatron's --decoder-first/last-pipeline-num-layers);
    # blank: the model picks the most balanced split the stack accepts (objectives/training/divisibility.py)
    "pp_first_layers": np.nan, "pp_last_layers": np.nan,
    # cluster economics (issue 4): checkpoints synchronous, the cluster owned; NaN = derived by the model
    "ckpt_mode": 0.0, "cost_mode": 0.0, "ckpt_every_s": np.nan, "storage_units_min": np.nan, "dataset_tb": np.nan,
    # GPU columns a table without a `gpu` id may lack (costs and power come out NaN, or from gpu_tdp_w)
    "gpu_tdp_w": np.nan, "gpu_exp_tera_s": np.nan, "server_usd_per_gpu": np.nan, "server_w_per_gpu": np.nan, "server_gpus": np.nan,
    "cloud_usd_per_gpu_hr": np.nan, **catalog.RANGE_DEFAULTS,  # no catalog range, not announced (catalog/estimates.py)
    # renting (objectives/catalog/instances.py): none (owned), on demand; what an instance sets, where none
    "instance": 0.0, "pricing": 0.0, "net_transport_latency_s": 0.0, "instance_gpus": np.nan,
    "storage_object_usd_per_tb_month": np.nan, "rental_max_gpus": np.inf,
    **FACILITY_DEFAULTS,  # no facility budget, no rack limit (objectives/economics/facility.py)
    # the rental an owned design is weighed against (objectives/catalog/offers.py), where the table has no GPU id
    "rental_usd_per_gpu_hr": np.nan, "rental_instance": 0.0,
    # spot preemption (objectives/training/preemption.py): none; a preemptible row's figures are its provider's
    "preemptible": 0.0, **{f: (np.inf if f.startswith("spot_preempt") else 0.0) for f in catalog.SPOT_FIELDS},
    # prices and operating assumptions, each with its source in catalog/prices.yaml
    **catalog.operating_defaults(),
}
#: columns every row needs, after catalog expansion, with the smallest valid value
REQUIRED: dict[str, float] = {
    "n_gpus": 1, "global_batch": 1, "tp": 1, "pp": 1, "micro_batch": 1,
    "n_layers": 1, "d_model": 1, "n_heads": 1, "d_ff": 1, "vocab_size": 1, "seq_len": 1,
    "gpu_bf16_tflop_s": 0, "gpu_gemm_eff_bf16": 0, "gpu_hbm_gb": 0, "gpu_hbm_tbyte_s": 0,
    "scaleup_size": 1, "scaleup_gbyte_s": 0, "nic_gbyte_s": 0,
}
INTEGER_COLUMNS = ("n_gpus", "global_batch", "tp", "pp", "cp", "ep", "vp", "micro_batch", "zero_stage",
                   "n_layers", "n_heads", "n_kv_heads", "moe_experts", "moe_topk", "seq_len", "scaleup_size",
                   "pp_first_layers", "pp_last_layers", "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim",
                   "v_head_dim", "moe_shared_experts", "moe_dense_layers", "dense_d_ff", "moe_layer_freq", "attn_window",
                   "moe_max_nodes")
CHUNK_ROWS = 1 << 15


def metrics() -> dict[str, str]:
    """Every output column of every module -> 'unit; meaning'."""
    out: dict[str, str] = {}
    for model in MODELS:
        out.update(model.provides)
    out["infeasible_reason"] = "text; why the row is infeasible, 'kind: constraint, by how much' ('' where feasible)"
    out.update(_LABELS)
    return out


#: the text outputs naming what a row rents (objectives/catalog/instances.py)
_LABELS = {
    "instance": "text; the cloud instance the design rents ('owned': it buys the cluster)",
    "provider": "text; the instance's cloud (aws, gcp, azure, oci, coreweave, lambda; 'owned')",
    "breakeven_rental": "text; the rental an owned design is weighed against (objectives.economics.breakeven): an instance id, "
                        "'market' (the GPU's market figure); '' for a rented design",
}


def rental_labels(floats: Columns) -> Columns:
    """``instance`` (its id, ``owned`` for none), ``provider`` and ``breakeven_rental`` of every row, as text, from
    the prepared (encoded) columns."""
    codes = floats["instance"]
    labels = np.asarray(CATEGORIES["instance"], dtype=object)
    ids = np.where(np.isnan(codes), 0, codes).astype(np.intp)
    offer = floats["rental_instance"]
    offers = np.asarray(CATEGORIES["rental_instance"], dtype=object).take(np.where(np.isnan(offer), 0, offer).astype(np.intp))
    rented = floats["cost_mode"] == 1
    return {"instance": labels.take(ids), "provider": catalog.provider_labels(codes),
            "breakeven_rental": np.where(rented, "", offers) if rented.any() else offers}


def _as_float(value: np.ndarray) -> np.ndarray | None:
    """A column as float64, or None for a label column carried through (gpu, model, notes)."""
    if value.dtype.kind in "iufb":
        return value.astype(np.float64, copy=False)
    if value.dtype.kind in "US":
        return None
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


#: numeric columns that are yes/no flags, where a boolean cell means 1 or 0
FLAG_COLUMNS = frozenset({"sequence_parallel", "tied_embeddings", "dropout", "preemptible", "host_grace", "scaleup_mesh"})


def _numeric_columns() -> frozenset[str]:
    """Columns whose cells must be numbers (blank allowed): model, GPU and operating fields, the mapping."""
    names = set(REQUIRED) | set(DEFAULTS) | set(INTEGER_COLUMNS) | set(catalog.GPU_FIELDS) | set(catalog.MODEL_FIELDS)
    return frozenset(names - set(CATEGORIES))


def _check_numbers(user: Columns) -> None:
    """Raise InputError for a numeric column holding text that is not a number ('abc' where n_gpus goes);
    text that means blank (' ', 'None') becomes NaN in ``user``, so the column converts to float."""
    for name in _numeric_columns() & set(user):
        value = user[name]
        if value.dtype.kind == "b" and name not in FLAG_COLUMNS:  # a CSV's True / False read as booleans
            raise InputError(f"'{bool(value[0])}' is not a number (true/false only for the flags "
                             f"{', '.join(sorted(FLAG_COLUMNS))})", column=name, row=0)
        if value.dtype.kind in "iufb":
            continue
        raw, blank, _ = number_cells(value, name)
        if (blank & raw.notna()).any():  # text meaning blank (' ', 'None', a control character): NaN, as '' reads
            cells = raw.where(~blank, np.nan).to_numpy(dtype=object)
            user[name] = np.broadcast_to(cells, value.shape) if is_constant(value) else cells


def open_table(table: Mapping[str, object], categories: Collection[str], check_numbers) -> tuple[
        Columns, Columns, dict[str, tuple[np.ndarray, np.ndarray]], int]:
    """The boundary every table passes, training's or serving's: renamed columns refused, columns broadcast,
    ``check_numbers(user)`` on the text cells of numeric columns, a renting row's cells set from its
    instance, the ``categories`` encoded and the catalog expanded. Returns (user columns, encoded and
    expanded columns, each catalog column's few distinct values, rows)."""
    check_renamed(table)  # a column renamed for its unit: one line naming the new name
    user = as_columns(table)
    check_numbers(user)
    user = catalog.label_instances(user)  # a renting row's GPU, fabric and cost mode are its instance's
    cols: Columns = dict(user)
    for name in categories:
        if name in cols:
            cols[name] = encode(name, cols[name])
    distinct: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # catalog columns: the few values their rows take
    cols = catalog.expand(cols, distinct)
    n = len(next(iter(cols.values()))) if cols else 0
    return user, cols, distinct, n


def fill_defaults(floats: Columns, defaults: Mapping[str, float], n: int) -> None:
    """Each of ``defaults`` absent from ``floats`` as a zero-copy constant column; one present has its blank
    cells filled with the default (a NaN default leaves blanks blank)."""
    for name, default in defaults.items():
        if name not in floats:
            floats[name] = np.broadcast_to(np.float64(default), (n,))
        elif not np.isnan(default):
            floats[name] = fill_blanks(floats[name], default)


def prepare(table: Mapping[str, object]) -> tuple[Columns, Columns]:
    """(user columns broadcast, model inputs as float arrays). Raises InputError on bad user input."""
    user, cols, distinct, n = open_table(table, CATEGORIES, _check_numbers)
    for name in REQUIRED:
        if name not in cols:
            where = " and the catalog" if name.startswith(("gpu_", "scale", "nic")) else ""
            raise InputError(f"is required (missing from the table{where})", column=name)
    floats: Columns = {}
    for name, value in cols.items():
        if is_constant(value):
            one = _as_float(value[:1])
            if one is not None:
                floats[name] = np.broadcast_to(one, (n,))
        else:
            one = _as_float(value)
            if one is not None:
                floats[name] = one
    fill_defaults(floats, DEFAULTS, n)
    # blank cells derived from other columns (a column without blanks is used as it is)
    heads = floats["n_heads"]
    floats["n_kv_heads"] = fill_blanks(floats["n_kv_heads"], heads) if "n_kv_heads" in floats else heads
    if "d_head" not in floats or has_nan(floats["d_head"]):
        with np.errstate(divide="ignore", invalid="ignore"):  # n_heads 0 is reported below, as an InputError
            per_head = floats["d_model"] / floats["n_heads"]
        floats["d_head"] = fill_blanks(floats["d_head"], per_head) if "d_head" in floats else per_head
    if has_nan(floats["fp8_recipe"]):  # blank: the GPU's (MXFP8 where its tensor cores scale blocks)
        gpu_fp4 = floats.get("gpu_fp4_tflop_s", np.zeros(n))
        floats["fp8_recipe"] = fill_blanks(floats["fp8_recipe"], default_fp8_recipe(gpu_fp4))
    if "sequence_parallel" not in floats or has_nan(floats["sequence_parallel"]):
        tp_splits = (floats["tp"] > 1).astype(np.float64)
        floats["sequence_parallel"] = fill_blanks(floats["sequence_parallel"], tp_splits) \
            if "sequence_parallel" in floats else tp_splits

    def cells(name: str) -> np.ndarray:
        """The values of a column worth checking: a catalog column's few, a constant column's one, else all."""
        column, values = distinct.get(name, (None, None))
        return values if column is floats[name] else distinct_cells(floats[name])

    for name, low in REQUIRED.items():
        if all_at_least(cells(name), low):
            continue
        v = distinct_cells(floats[name])
        bad = ~((v > 0) if low == 0 else (v >= low)) | (v == np.inf)  # NaN compares False: caught too
        row = bad_row(bad)
        if row is not None:
            what = "missing" if np.isnan(v[row]) else f"{v[row]:g}"
            raise InputError(f"{what} is not valid; needs a finite number >= {low}" + (" (> 0)" if low == 0 else ""), column=name, row=row)
    for name in INTEGER_COLUMNS:
        if name in floats:
            if all_whole(cells(name)):
                continue
            v = distinct_cells(floats[name])
            row = bad_row((v != np.floor(v)) & np.isfinite(v) | (v < 0))
            if row is not None:
                raise InputError(f"{v[row]:g} is not a non-negative whole number", column=name, row=row)
    check_ranges(floats, cells)
    check_architecture(floats)
    zero = distinct_cells(floats["zero_stage"])
    row = None if len(zero) and np.max(zero) <= 3 else bad_row(~np.isin(zero, (0, 1, 2, 3)))  # whole, >= 0 by now
    if row is not None:
        raise InputError(f"{floats['zero_stage'][row]:g} is not a ZeRO stage (0, 1, 2 or 3)", column="zero_stage", row=row)
    return user, floats


def check_architecture(floats: Columns) -> None:
    """Raise InputError for an attention or MoE description that is not one (objectives/training/transformer.py): MLA
    (kv_lora_rank > 0) without its head widths, or with n_kv_heads other than n_heads (its up-projected keys
    and values are per head); a share of windowed layers outside [0, 1]; leading dense layers that leave an
    MoE model no MoE layer."""
    mla = distinct_cells(floats["kv_lora_rank"]) > 0
    if mla.any():
        for name in ("qk_nope_dim", "qk_rope_dim", "v_head_dim"):
            row = bad_row(mla & ~(distinct_cells(floats[name]) > 0))
            if row is not None:
                raise InputError("must be > 0 with multi-head latent attention (kv_lora_rank > 0)", column=name, row=row)
        heads, kv = distinct_cells(floats["n_heads"]), distinct_cells(floats["n_kv_heads"])
        row = bad_row(mla & (kv != heads))
        if row is not None:
            raise InputError(f"{floats['n_kv_heads'][row]:g} with multi-head latent attention (kv_lora_rank > 0): "
                             "its keys and values are per head; leave it blank or n_heads", column="n_kv_heads", row=row)
    frac = distinct_cells(floats["attn_window_frac"])
    row = bad_row(~((frac >= 0) & (frac <= 1)))
    if row is not None:
        raise InputError(f"{frac[row]:g} is not a share of layers (0 to 1)", column="attn_window_frac", row=row)
    moe = distinct_cells(floats["moe_experts"]) > 0
    row = bad_row(moe & (distinct_cells(floats["moe_dense_layers"]) >= distinct_cells(floats["n_layers"])))
    if row is not None:
        raise InputError(f"{floats['moe_dense_layers'][row]:g} leading dense layers leave no MoE layer of "
                         f"n_layers {floats['n_layers'][row]:g}", column="moe_dense_layers", row=row)


def check_layout(floats: Columns) -> None:
    """Raise InputError for a fixed mapping that breaks an input-error rule of objectives/training/divisibility.py
    (tp*pp*cp dividing n_gpus, dp*micro_batch dividing global_batch): naming the first such row. Every other
    rule makes an infeasible row with a reason, not an error."""
    found = input_errors(Job(floats))
    if found is None:
        return
    rule, bad = found
    row = bad_row(bad)
    t, p, c = (floats[k][row] for k in ("tp", "pp", "cp"))
    if rule.name == "gpus":
        raise InputError(f"tp*pp*cp = {t:g}*{p:g}*{c:g} = {t * p * c:g} does not divide n_gpus = {floats['n_gpus'][row]:g}",
                         column=rule.column, row=row)
    dp = floats["n_gpus"][row] / (t * p * c)
    raise InputError(f"global_batch {floats['global_batch'][row]:g} is not a multiple of dp*micro_batch = "
                     f"{dp:g}*{floats['micro_batch'][row]:g}", column=rule.column, row=row)


def run_models(floats: Columns, cal: Calibration | None = None, models: tuple[Model, ...] = MODELS,
               keep: Collection[str] | None = None) -> Columns:
    """Run ``models`` (default: all, in order) over prepared float columns; inputs plus outputs (new dict).

    Large tables run in chunks of CHUNK_ROWS rows, which keep every temporary in cache; a constant column
    enters each chunk as its one value. ``keep``: the outputs to return (default: all); the others are
    computed and dropped chunk by chunk, never stored for the whole table."""
    cal = cal or Calibration.load()
    n = max(len(v) for v in floats.values())
    if n <= CHUNK_ROWS:
        work = dict(floats)
        for model in models:
            work.update(model.compute(work, cal))
        return work if keep is None else {k: v for k, v in work.items() if k in floats or k in keep}
    out: Columns = dict(floats)
    columns: Columns = {}
    for lo in range(0, n, CHUNK_ROWS):
        work = {k: v[:1] if is_constant(v) or len(v) == 1 else v[lo:lo + CHUNK_ROWS] for k, v in floats.items()}
        for model in models:
            work.update(model.compute(work, cal))
        if not columns:  # the first chunk shows the outputs and their types (an input keeps its own values)
            columns = _empty_columns({k: v for k, v in work.items() if k not in floats and (keep is None or k in keep)}, n)
            out.update(columns)
        for k, column in columns.items():
            column[lo:lo + CHUNK_ROWS] = work[k]
    return out


def _empty_columns(like: Mapping[str, np.ndarray], n: int) -> Columns:
    """An uninitialised n-row column for each of ``like``'s, of its type. Columns of one type are rows of one
    block of memory: one allocation for all of them, where one each would cost as much in page faults as
    the models take to compute them."""
    names: dict[np.dtype, list[str]] = {}
    for name, value in like.items():
        names.setdefault(value.dtype, []).append(name)
    out: Columns = {}
    for dtype, group in names.items():
        out.update(zip(group, np.empty((len(group), n), dtype=dtype)))
    return {name: out[name] for name in like}


def evaluate(table: Mapping[str, object], cal: Calibration | None = None,
             models: tuple[Model, ...] = MODELS) -> Columns:
    """Evaluate a design table with a fixed mapping: input columns plus every metric (see module doc).

    ``models``: the modules to run, in data-flow order (default: all); ``TRAINING_MODELS`` gives the
    training performance model alone (step time, throughput, memory), without the cluster economics."""
    if models is not MODELS:
        _check_order(models)
    user, floats = prepare(table)
    work = run_models(floats, cal, models)
    outputs = set(metrics()) if models is MODELS else {name for model in models for name in model.provides}
    out = with_outputs(user, work, outputs, CATEGORIES)
    out.update(rental_labels(work))
    if "feasible" in work:
        out["infeasible_reason"] = infeasible_reason(work)
    return out


def _check_order(models: tuple[Model, ...]) -> None:
    """Raise ValueError if a module needs a metric that only a module after it provides."""
    inputs = set(metrics()) - {name for model in models for name in model.provides}  # from the table, if at all
    seen: set[str] = set()
    for model in models:
        missing = sorted(set(model.requires) & set(metrics()) - seen - inputs)
        if missing:
            raise ValueError(f"{type(model).__name__} needs {missing}: run the modules that provide them first")
        seen.update(model.provides)
