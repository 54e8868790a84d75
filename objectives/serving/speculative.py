"""Speculative decoding as design columns: draft length, acceptance, the draft's weights and feasibility.

A row's ``spec_decode`` names how draft tokens are proposed (``none``; ``mtp``, the model's own
multi-token-prediction module, DeepSeek-V3 Sec. 2.2 and 5.4.3; ``eagle3``, a one-layer draft head on the
target's hidden states, Li et al. 2025, arXiv 2503.01840; ``draft``, a separate small model, Leviathan et al.
2023, arXiv 2211.17192), ``spec_tokens`` the draft length k (blank: 3, TensorRT-LLM's best MTP depth on
B200, tech blog 1, and its Llama 4 Maverick EAGLE-3 guide's ``max_draft_len``), and
``spec_accept_tokens_per_step`` the mean tokens one verify step emits, accepted drafts plus the target's own
(blank: the published measurement, objectives/catalog/speculative.yaml). Every step the target verifies
1 + k tokens a decoding request (objectives/serving/step.py prices them) and emits tau of them, so

    TPOT = pp x step / tau,     decode steps a request = (OSL - 1) / tau     (objectives/serving/batching.py)

and with an i.i.d. per-token acceptance a, tau = (1 - a^(k+1)) / (1 - a) (Leviathan et al. Eq. 1), the form
the catalog uses between and beyond its measured draft lengths (:func:`accept_len`).

The draft's cost per draft token, in layers of the target (``spec_draft_layers``; step.py charges k of
them a step, each with the output layer): ``mtp`` one (the MTP module is one transformer block of the
model's own kind, its embedding and output head shared: DeepSeek-V3 Sec. 2.2; TensorRT-LLM tech blog 1, "1x
MTP layer (MoE-architecture equivalent)", run k times: tech blog 2, "MTP Eagle"); ``eagle3`` one (EAGLE-3's
draft model is a single decoder layer, arXiv 2503.01840 Sec. 3); ``draft`` its parameters over the target's
active parameters per layer (``spec_draft_params``, a dense forward of that many weights). Their weights
per GPU (``spec_weights_gb``, beside the target's, objectives/serving/memory.py): an MTP module is one MoE
layer sharded as the target's plus its 2h x h projection; an EAGLE-3 head one dense layer of the target's
shape plus its 3h x h fusion layer, in bf16 (NVIDIA's Maverick head is BF16); a draft model its parameters
at the row's precision over tp.

Infeasible (``con_spec_decode`` 1, a reason, never an exception): ``mtp`` on a model whose checkpoint has no
MTP module (speculative.yaml ``mtp_modules``); a method with no published acceptance for the model and
none given; ``draft`` without ``spec_draft_params``; an acceptance above 1 + k (more than the step verifies).

Not modelled: the draft's pass over the prompt (one layer in n_layers for mtp and eagle3), its own KV cache,
draft trees (EAGLE-2/3's dynamic trees verify more tokens than k), acceptance falling with temperature or
context, and relaxed acceptance (TensorRT-LLM's thinking-phase top-N, which changes the output).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import yaml

from objectives.base import Model, as_codes, lookup
from objectives.serving.memory import BYTES_PER_VALUE
from objectives.table import CATEGORIES, factorize, is_constant

__all__ = ["SPEC_METHODS", "SPEC_PATH", "K_MAX", "DEFAULT_SPEC_TOKENS", "ServingSpeculative", "accept_len",
           "accept_table", "model_codes", "spec_models", "mtp_models"]

SPEC_METHODS = CATEGORIES["spec_decode"]
SPEC_PATH = Path(__file__).resolve().parent.parent / "catalog" / "speculative.yaml"
#: the longest draft a row may ask for (spec_tokens); the catalog's table runs to it
K_MAX = 16
#: draft length where a speculative row leaves spec_tokens blank (TensorRT-LLM tech blog 1: MTP 3 fastest on
#: 8 B200, 253 TPS/user; the Llama 4 Maverick EAGLE-3 guide, tech blog 6: max_draft_len 3)
DEFAULT_SPEC_TOKENS = 3.0
_MTP, _EAGLE3, _DRAFT = (SPEC_METHODS.index(m) for m in ("mtp", "eagle3", "draft"))


def accept_len(measured: dict[int, float], k: int) -> float:
    """Mean tokens a verify step emits at draft length ``k`` from the measured {k: tokens} of one task: the
    measurement at k; linear between measured lengths; outside them, (1 - a^(k+1)) / (1 - a) (Leviathan et
    al. 2023, Eq. 1) with a solved (bisection) from the nearest measured length. 1 at k = 0."""
    if k <= 0:
        return 1.0
    ks = sorted(measured)
    if k in measured:
        return float(measured[k])
    if ks[0] < k < ks[-1]:
        return float(np.interp(k, ks, [measured[j] for j in ks]))
    k0 = ks[0] if k < ks[0] else ks[-1]
    target = float(measured[k0])

    def tau(a, n):
        return (1.0 - a ** (n + 1)) / (1.0 - a)

    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(100):  # tau rises with a: from 1 at a = 0 to k0 + 1 at a -> 1
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tau(mid, k0) < target else (lo, mid)
    return float(tau(0.5 * (lo + hi), k))


@functools.cache
def _catalog() -> dict:
    return yaml.load(SPEC_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def spec_models() -> tuple[str, ...]:
    """Catalog model ids, by code (``spec_model_code``)."""
    from objectives import catalog

    return tuple(catalog.model_ids())


def mtp_models() -> tuple[str, ...]:
    """The catalog models whose checkpoint carries a multi-token-prediction module."""
    return tuple(m for m, v in _catalog()["mtp_modules"].items() if v["value"] > 0)


@functools.cache
def accept_table() -> np.ndarray:
    """[model code (one more: no catalog model), method code, k] -> the default task's tokens per verify step
    (module doc; NaN: nothing published), k = 0 .. K_MAX."""
    models = spec_models()
    table = np.full((len(models) + 1, len(SPEC_METHODS), K_MAX + 1), np.nan)
    table[:, SPEC_METHODS.index("none"), :] = 1.0
    for model, methods in _catalog()["acceptance"].items():
        for method, entry in methods.items():
            measured = {int(k): float(v) for k, v in entry["tasks"][entry["default"]].items()}
            table[models.index(model), SPEC_METHODS.index(method)] = [accept_len(measured, k) for k in range(K_MAX + 1)]
    return table


@functools.cache
def _has_mtp() -> np.ndarray:
    models = spec_models()
    return np.array([float(m in mtp_models()) for m in models] + [0.0])


def model_codes(model: np.ndarray) -> np.ndarray:
    """Each row's catalog model code (:func:`spec_models`), NaN where a cell names none (a row spelling its
    architecture out); by distinct label, a constant column staying one value."""
    if is_constant(model):
        return np.broadcast_to(model_codes(np.asarray(model[:1]))[0], model.shape)
    from objectives.catalog.model_names import canonical

    codes, distinct = factorize(np.asarray(model))
    index = {m: float(i) for i, m in enumerate(spec_models())}
    # an alias names its catalog model's acceptance (catalog/model_aliases.yaml: deepseek-ai/DeepSeek-R1)
    lut = np.array([index.get(canonical(str(m)) or str(m), np.nan) for m in distinct] + [np.nan])
    return lut.take(codes)  # code -1 (a blank cell) takes the last entry


class ServingSpeculative(Model):
    requires = ("spec_decode", "spec_tokens", "spec_accept_tokens_per_step", "spec_draft_params", "spec_model_code",
                "n_layers", "d_model", "tp", "attn_dp", "precision", "n_params_active", "params_attn_layer",
                "params_attn_replicated_layer", "params_ffn_layer", "params_expert_layer", "params_ffn_dense_layer",
                "moe_experts")
    provides = {
        "spec_draft_tokens": "tokens; draft tokens proposed per decoding request and step, k (0 without speculation)",
        "spec_accept_tokens_per_step": "tokens; mean tokens a verify step emits per request, accepted drafts plus "
                                       "the target's own (1 without speculation; blank: objectives/catalog/speculative.yaml)",
        "spec_draft_layers": "layers; one draft token's forward in layers of the target (mtp, eagle3 1; draft model: "
                             "its parameters over the target's active parameters per layer)",
        "spec_weights_gb": "GB; the draft module's, head's or model's weights per GPU",
        "con_spec_decode": "flag; 1 where the speculation cannot run: mtp on a model without an MTP module, no "
                           "published acceptance and none given, a draft model without spec_draft_params, or "
                           "more accepted tokens than the step verifies",
    }

    def compute(self, c, cal):
        method = as_codes(c["spec_decode"])
        on = method > 0
        given_k = c["spec_tokens"]
        k = np.where(on, np.where(np.isnan(given_k), DEFAULT_SPEC_TOKENS, given_k), 0.0)
        model = c["spec_model_code"]
        at = np.where(np.isnan(model), accept_table().shape[0] - 1, model).astype(np.intp)
        published = accept_table()[at, method, np.minimum(k, K_MAX).astype(np.intp)]
        given = c["spec_accept_tokens_per_step"]
        tau = np.where(on, np.where(np.isnan(given), published, given), 1.0)
        no_mtp = (method == _MTP) & (_has_mtp()[at] <= 0)
        no_draft = (method == _DRAFT) & np.isnan(c["spec_draft_params"])
        con = no_mtp | np.isnan(tau) | no_draft | (tau > k + 1.0 + 1e-9) | (k > K_MAX)
        # the draft's weights per GPU (module doc): an MTP module one MoE layer sharded as the target's plus the
        # 2h x h projection of its two normalized inputs (DeepSeek-V3 Sec. 2.2, Eq. 21); an EAGLE-3 head one
        # dense layer plus its 3h x h fusion of three layers' features (arXiv 2503.01840 Sec. 3.2), in bf16
        t, g, h = c["tp"], c["tp"] * c["attn_dp"], c["d_model"]
        bpw = lookup(BYTES_PER_VALUE, as_codes(c["precision"]))
        repl = c["params_attn_replicated_layer"]
        attn = (c["params_attn_layer"] - repl) / t + repl
        moe = c["moe_experts"] > 0
        mtp_w = bpw * (attn + np.where(moe, (c["params_ffn_layer"] - c["params_expert_layer"]) / t
                                       + c["params_expert_layer"] / g, c["params_ffn_layer"] / t) + 2.0 * h * h / t)
        dense_ffn = np.where(c["params_ffn_dense_layer"] > 0, c["params_ffn_dense_layer"], c["params_ffn_layer"])
        eagle_w = 2.0 * (attn + dense_ffn / t + 3.0 * h * h / t)
        draft_params = np.where(np.isnan(c["spec_draft_params"]), 0.0, c["spec_draft_params"])
        weights = np.select([method == _MTP, method == _EAGLE3, method == _DRAFT],
                            [mtp_w, eagle_w, bpw * draft_params / t], 0.0)
        per_layer = c["n_params_active"] / c["n_layers"]
        layers = np.select([method == _MTP, method == _EAGLE3, method == _DRAFT], [1.0, 1.0, draft_params / per_layer],
                           0.0)
        return {"spec_draft_tokens": k, "spec_accept_tokens_per_step": np.where(np.isnan(tau), 1.0, tau),
                "spec_draft_layers": layers, "spec_weights_gb": weights / 1e9, "con_spec_decode": con.astype(np.float64)}
