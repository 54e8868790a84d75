"""80% prediction intervals of the serving model's throughput, latencies and cost per token.

The form is training's (objectives/training/intervals.py: split-conformal with a fitted spread, Lei et al. 2018
Sec. 5.2; leave-one-group-out calibration residuals as in the jackknife+, Barber et al. 2021), its
residuals the serving model's on published measurements it was not fitted to
(``python -m objectives.serving.fit --cross-validate``: each measurement predicted by factors fitted without
its model architecture, objectives/serving/heldout.py; ``catalog/serving_loso_residuals.csv``), its
parameters derived from them by objectives/serving/interval_fit.py (``catalog/serving_intervals.json``):

    log sigma = b0 + b_engine + b_moe + b_attn_dp + b_mla + kappa * min(d, d_cap)
                + kappa_beyond * clip(d - d_cap, 0, d_far - d_cap) + 1/2 log(1 + u (exp(2 b_unvalidated) - 1))
    log(predicted / measured output tokens/s per GPU) in [sigma * z_10, sigma * z_90]

- ``b_engine`` (TensorRT-LLM 1.0's ``trtllm``, 0.14-0.18's ``trtllm-2024``), ``b_moe`` (an MoE model),
  ``b_attn_dp`` (attention data parallelism) and ``b_mla`` (multi-head latent attention, ``kv_lora_rank`` > 0:
  absorbed decode attention, replicated latent KV, DeepSeek's routing): what the model is less sure of, one
  level each, fitted with a ridge toward the pool (objectives/serving/interval_fit.py).
- ``d`` (``validated_distance_oct``): the norm over :data:`FEATURES` of each axis' distance, in octaves, from
  the range the published measurements of the same engine span on it (every engine's where the engine has
  none): GPU count and each parallelism degree, the model's total and active parameters, input and output
  lengths, the concurrency at the operating point, the weights' and KV cache's precision, the GPU
  generation (one unit each, from its tensor-core formats, as in training), its bf16 peak, HBM bandwidth and
  NVLink domain. A value between two validated ones counts as validated (the same physics interpolates; the
  concurrency's validated values are some 400 operating points that fill their range anyway); only
  extrapolation counts, which also makes the distance a clip per axis, not a search (training's nearest
  validated value, objectives/training/intervals.py, costs a sorted lookup per axis and row).
  NVLink domain. ``kappa`` per octave is learnt from the held-out models' real distances up to ``d_cap``
  (the farthest a held-out measurement was; mostly model size, which dense models extrapolate cleanly, so
  it comes out near 0). Past d_cap the residuals say nothing: the interval widens at ``kappa_beyond``, the
  training model's measured rate where it is the larger (objectives/catalog/intervals.json), up to
  ``d_far`` (the training residuals' farthest), and the design is marked ``interval_extrapolated``.
- ``u`` = 1 where nothing published measures what the row runs: an engine without published runs (vLLM,
  SGLang: their host factors are priors) or ``serving: disaggregated``. ``b_unvalidated`` is measured: the
  spread of each published engine's runs predicted with that engine's own factors at their priors (held
  out by engine, ``log_ratio_engine_out``) over the spread the scale above gives them. Such rows are marked
  ``interval_extrapolated`` (the nested check, each engine's runs against the widening learnt from the other
  engine alone, holds fewer than 80%: objectives/serving/interval_fit.py). A disaggregated row
  counts as unvalidated twice over (u = 2: its engine's steps run in a schedule no measurement has, and
  the rate matching and KV transfer are unmeasured) and is marked ``interval_extrapolated``: its interval
  is a lower bound on the model's uncertainty (u = 2 is an assumption, stated; no published disaggregated
  measurement is in the validation). Speculative decoding (``spec_decode`` not none) and a latency-tuned
  step (``latency_tuned`` 1) add one each: their published measurements are batch-1 runs kept out of the fit
  (objectives/catalog/serving_runs.md, 39% off), so a speculative or latency-tuned design is unvalidated
  ground, marked ``interval_extrapolated`` too; so is an expert load balancer (``eplb`` 1, one more: no
  published run in the validation runs one, objectives/serving/balance.py). The u aspects are independent
  sources of error, so their variances add (sigma^2 (1 + u (exp(2 b_unvalidated) - 1)), the measured widening exp(b_unvalidated) at
  u = 1): a disaggregated, speculative, latency-tuned design (u = 4) is x3.9 wider at b_unvalidated 0.76, not
  the x30 that multiplying the widenings gave (intervals of 5 decades on DeepSeek-R1's MTP designs).
- ``z_10``, ``z_90``: quantiles of the held-out log ratios over their sigma, each source weighing the same.

What follows from the throughput: ``output_tokens_per_s`` (deployment), ``usd_per_mtok_out`` and
``energy_j_per_tok_out`` (per output token: the inverse, the cost per hour and power fixed). The latencies
have their own residuals (the online rows, where the sources measured the mean ITL and TTFT at a fixed
request rate): ``tpot_s`` and ``ttft_s`` lie in pred * exp(-sigma [q, -q]) with the same sigma and q the 80%
quantile of |log(predicted / measured TPOT)| (TTFT) over it (symmetric: objectives/serving/interval_fit.py);
``tokens_per_s_per_user`` = 1 / TPOT.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from objectives.base import as_codes, lookup
from objectives.columns import per_value
from objectives.serving.designs import PerDesign
from objectives.table import is_constant
from objectives.training.intervals import generation

__all__ = ["ServingIntervals", "FEATURES", "INTERVAL_PATH", "LEVEL", "feature_octaves", "range_distance", "log_sigma",
           "load_params", "THROUGHPUT", "PER_TOKEN"]

INTERVAL_PATH = Path(__file__).resolve().parent.parent / "catalog" / "serving_intervals.json"
LEVEL = 0.8
#: the axes of the validated ground, each in octaves (log2); the precisions as log2 of their bits (bf16 4,
#: fp8 3, fp4 2); the GPU generation as its code (Ampere 0, Hopper 1, Blackwell 2)
FEATURES = ("n_gpus", "tp", "pp", "ep", "attn_dp", "n_params", "n_params_active", "input_len", "output_len",
            "concurrency", "precision", "kv_precision", "generation", "gpu_bf16_tflop_s", "gpu_hbm_tbyte_s",
            "scaleup_size")
_BITS = ("precision", "kv_precision")
_LINEAR = ("generation",)
#: the axes a row's request and load set (the others: its design, objectives/serving/designs.py)
_REQUEST = ("input_len", "output_len", "concurrency")
#: outputs that scale with the throughput, and those that scale with its inverse
THROUGHPUT = ("output_tokens_per_s_per_gpu", "output_tokens_per_s")
PER_TOKEN = ("usd_per_mtok_out", "energy_j_per_tok_out")
_UNITS = {"output_tokens_per_s_per_gpu": "tokens/s", "output_tokens_per_s": "tokens/s", "usd_per_mtok_out": "USD",
          "energy_j_per_tok_out": "J", "tpot_s": "s", "ttft_s": "s", "tokens_per_s_per_user": "tokens/s"}


def feature_octaves(c, names=FEATURES) -> dict[str, np.ndarray]:
    """Each axis of :data:`FEATURES` (module doc), or of ``names``; a constant column stays constant."""
    out = {name: per_value(np.log2, c[name]) for name in names if name not in (*_BITS, *_LINEAR)}
    out.update((name, per_value(lambda p: 4.0 - p, c[name])) for name in names if name in _BITS)
    out.update((name, np.asarray(c[name], dtype=np.float64)) for name in names if name in _LINEAR)
    return out


def _present(codes: np.ndarray, ground: dict[str, list[list[float]]]):
    """The engines of these rows (every engine where a code is out of the table's range)."""
    return np.flatnonzero(np.bincount(codes)) if codes.min() >= 0 and codes.max() < len(next(iter(ground.values()))) \
        else slice(None)


def _gap2(v: np.ndarray, per_engine, codes: np.ndarray, present) -> np.ndarray | None:
    """The squared distance (octaves) of each value outside its engine's [lo, hi]; None where every value
    lies inside every present engine's range (a gap of 0: NaN fails both tests)."""
    bounds = np.asarray(per_engine, dtype=np.float64)
    if v.min() >= bounds[present, 0].max() and v.max() <= bounds[present, 1].min():
        return None
    lo, hi = bounds[:, 0].take(codes), bounds[:, 1].take(codes)
    gap = v - np.minimum(np.maximum(v, lo), hi)
    return gap * gap


def range_distance(octaves: dict[str, np.ndarray], engine: np.ndarray, ground: dict[str, list[list[float]]]) -> np.ndarray:
    """Norm over the axes of each axis' distance (octaves) outside [lo, hi] of the row's engine (module doc);
    ``ground``: per axis, per engine code, [lo, hi]."""
    codes = as_codes(engine[:1] if is_constant(engine) else engine)
    present = _present(codes, ground)
    total = 0.0
    for name, per_engine in ground.items():
        gap2 = _gap2(octaves[name], per_engine, codes, present)
        if gap2 is not None:  # an axis every row lies inside adds exactly 0, left out
            total = total + gap2
    shape = np.broadcast_shapes(np.shape(engine), *(np.shape(v) for v in octaves.values()))
    return np.sqrt(np.broadcast_to(total, shape))


def log_sigma(engine, moe, attn_dp, mla, dist, unvalidated, params: dict) -> np.ndarray:
    """log sigma of each row (module doc); ``moe``, ``attn_dp`` and ``mla`` 0/1, ``unvalidated`` 0, 1 or 2."""
    return _log_sigma_rest(_log_sigma_design(engine, moe, attn_dp, mla, params), dist, unvalidated, params)


def _log_sigma_design(engine, moe, attn_dp, mla, params: dict) -> np.ndarray:
    """The terms of log sigma that the design sets (the sum's first five, in its order)."""
    s = params["scale"]
    return (s["intercept"] + lookup(s["engine"], as_codes(engine)) + s["moe"] * moe + s["attn_dp"] * attn_dp
            + s.get("mla", 0.0) * mla)  # parameters derived before the MLA level: none


def _log_sigma_rest(design, dist, unvalidated, params: dict) -> np.ndarray:
    """log sigma from its design terms: the distance's, then the unvalidated count's (module doc: the u
    unvalidated aspects' errors add in quadrature, sigma^2 (1 + u (exp(2 b) - 1)); u = 1 is exp(b) exactly)."""
    s = params["scale"]
    widen = 0.5 * np.log1p(unvalidated * np.expm1(2.0 * s["unvalidated"]))
    return (design + s["kappa"] * np.minimum(dist, s["d_cap"])
            + s["kappa_beyond"] * np.clip(dist - s["d_cap"], 0.0, s["d_far"] - s["d_cap"]) + widen)


_CACHE: dict[str, dict] = {}


def load_params(path: Path = INTERVAL_PATH) -> dict:
    """The interval parameters, read once."""
    key = str(path)
    if key not in _CACHE:
        _CACHE[key] = json.loads(Path(path).read_text())
    return _CACHE[key]


class ServingIntervals(PerDesign):
    """80% intervals of the serving throughput, latencies and cost per token (module doc)."""

    requires = ("engine", "serving", "moe_experts", "kv_lora_rank", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s",
                *(f for f in FEATURES if f != "generation"), *THROUGHPUT, *PER_TOKEN, "tpot_s", "ttft_s",
                "tokens_per_s_per_user", "prefix_hit_frac", "spec_decode", "latency_tuned", "eplb")
    provides = {
        "validated_distance_oct": "octaves; distance of the design from the published serving measurements of its "
                                  "engine, per axis (objectives/serving/intervals.py)",
        "interval_extrapolated": "bool; the design lies farther from the measurements than any held-out one did, or "
                                 "runs what none measures (an engine without published runs, disaggregated, a prefix "
                                 "cache, speculative decoding, a latency-tuned step, an expert load balancer): its "
                                 "interval is a lower bound",
        "interval_half_width_frac": "fraction; half the 80% interval of output_tokens_per_s_per_gpu over the prediction",
        **{f"{name}_{end}": f"{_UNITS[name]}; {'lower' if end == 'lo' else 'upper'} end of the 80% interval of {name}"
           for name in (*THROUGHPUT, *PER_TOKEN, "tpot_s", "ttft_s", "tokens_per_s_per_user") for end in ("lo", "hi")},
    }

    #: what the design part reads: the design's axes and what sets sigma beside the distance
    design_requires = ("engine", "moe_experts", "kv_lora_rank", "attn_dp", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s",
                       *(f for f in FEATURES if f not in ("generation", *_REQUEST)))

    def __init__(self, path: Path = INTERVAL_PATH):
        self.path = path

    def design_compute(self, c, cal):
        """The design's axes' squared gaps, the first (before any request axis) summed, and its terms of
        log sigma and of the unvalidated count (objectives/serving/designs.py)."""
        if not Path(self.path).exists():
            return {}
        params = load_params(self.path)
        gen = generation(c["gpu_fp8_tflop_s"], c["gpu_fp4_tflop_s"])
        octaves = feature_octaves({**c, "generation": gen}, [f for f in FEATURES if f not in _REQUEST])
        codes = as_codes(c["engine"][:1] if is_constant(c["engine"]) else c["engine"])
        present, lead, out, before = _present(codes, params["ground"]), 0.0, {}, True
        for name, per_engine in params["ground"].items():
            if name in _REQUEST:
                before = False
                continue
            gap2 = _gap2(octaves[name], per_engine, codes, present)
            if gap2 is not None and before:
                lead = lead + gap2
            elif gap2 is not None:
                out[f"gap2_{name}"] = gap2
        out["lead"] = np.asarray(lead)
        engine = as_codes(c["engine"])
        out["log_sigma"] = _log_sigma_design(engine, (c["moe_experts"] > 0) * 1.0, (c["attn_dp"] > 1) * 1.0,
                                             (c["kv_lora_rank"] > 0) * 1.0, params)
        out["unvalidated"] = lookup(np.asarray(params["unvalidated_engines"], dtype=np.float64), engine)
        return out

    def row_compute(self, c, d, cal):
        shape = np.shape(c["output_tokens_per_s_per_gpu"])
        if not d:  # before the first derivation: no interval
            nan = np.full(shape, np.nan)
            return {name: (nan > 0) if name == "interval_extrapolated" else nan for name in self.provides}
        params = load_params(self.path)
        # the distance: the axes summed in the ground's order, as range_distance sums them
        total = d["lead"] if d["lead"].ndim else 0.0
        request = feature_octaves(c, _REQUEST)
        codes = as_codes(c["engine"][:1] if is_constant(c["engine"]) else c["engine"])
        present = _present(codes, params["ground"])
        for name, per_engine in params["ground"].items():
            gap2 = _gap2(request[name], per_engine, codes, present) if name in _REQUEST else d.get(f"gap2_{name}")
            if gap2 is not None:
                total = total + gap2
        octave_shapes = [np.shape(v) for v in request.values()] + [np.shape(v) for v in d.values()]
        dist = np.sqrt(np.broadcast_to(total, np.broadcast_shapes(np.shape(c["engine"]), *octave_shapes)))
        disaggregated = c["serving"] == 1
        d_cap = params["scale"]["d_cap"]
        # speculation and the latency-tuned step: measured at batch 1 only, outside the fit; an expert load
        # balancer: no published run has one (module doc)
        unvalidated = d["unvalidated"] + 2.0 * disaggregated + (c["spec_decode"] > 0) + (c["latency_tuned"] > 0) \
            + (c["eplb"] > 0)
        sigma = np.exp(_log_sigma_rest(d["log_sigma"], dist, unvalidated, params))
        q = params["quantile"]
        out = {"validated_distance_oct": np.broadcast_to(dist, shape),
               # no published serving run had a prefix cache (prefix_hit_frac > 0): unmeasured ground too
               "interval_extrapolated": np.broadcast_to((dist > d_cap) | (unvalidated > 0) | (c["prefix_hit_frac"] > 0),
                                                        shape)}
        # measured = predicted * exp(-log ratio): the low end of the ratio gives the high measurement
        fast, slow = np.exp(-sigma * q["lo"]), np.exp(-sigma * q["hi"])
        out["interval_half_width_frac"] = np.broadcast_to((fast - slow) / 2.0, shape)
        for name in THROUGHPUT:
            out[f"{name}_lo"], out[f"{name}_hi"] = c[name] * slow, c[name] * fast
        for name in PER_TOKEN:
            out[f"{name}_lo"], out[f"{name}_hi"] = c[name] / fast, c[name] / slow
        for name, key in (("tpot_s", "tpot"), ("ttft_s", "ttft")):
            out[f"{name}_lo"] = c[name] * np.exp(-sigma * q[f"{key}_hi"])
            out[f"{name}_hi"] = c[name] * np.exp(-sigma * q[f"{key}_lo"])
        out["tokens_per_s_per_user_lo"] = 1.0 / out["tpot_s_hi"]
        out["tokens_per_s_per_user_hi"] = 1.0 / out["tpot_s_lo"]
        return out
