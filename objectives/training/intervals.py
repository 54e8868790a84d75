"""80% prediction intervals on every throughput, time, cost and energy figure.

The interval is one of log(predicted / measured tokens/s per GPU), the residual of the model on published
runs it was not fitted to (leave one source out: ``python -m objectives.fitting.fit --cross-validate`` writes
them to ``catalog/loso_residuals.csv``; ``objectives.fitting.interval_fit`` derives this module's parameters,
``catalog/intervals.json``, from them). Its scale is locally weighted, as in split-conformal regression
with a fitted spread (Lei, G'Sell, Rinaldo, Tibshirani & Wasserman 2018, JASA 113:1094, Sec. 5.2;
Papadopoulos, Gammerman & Vovk 2008, normalized nonconformity), the calibration residuals being
leave-one-group-out ones as in the jackknife+ (Barber, Candes, Ramdas & Tibshirani 2021, Ann. Stat. 49:486):

    log sigma = b0 + b_stack + b_moe + kappa * min(d, d_cap) + g_generation
    log(predicted / measured) in [sigma * z_10, sigma * z_90]

- stack and dense/MoE: what the model is less sure of, one level each (objectives.fitting.interval_fit fits them,
  shrunk toward the pool).
- ``d`` (octaves, ``validated_distance_oct``): how far the design lies from the validated ground, the
  Euclidean norm over :data:`FEATURES` of each axis' distance, in octaves (log2), to the nearest value that
  a validated run of the same stack has on that axis (all stacks' runs where a stack has none): a GPU
  count, a parallelism degree, a model size, a sequence length, a precision, a GPU generation, or a GPU's
  peak, memory bandwidth or scale-up domain no published run of the stack has widens the interval by
  ``exp(kappa)`` per octave. The GPU generation is read from the tensor-core formats a GPU has (no fp8:
  Ampere class; fp8 without fp4: Hopper class; fp4: Blackwell class) and counts one unit per generation;
  it enters through the distance and not as a level of its own because it is confounded with the stack in
  the published runs (every megatron-2021 run is on Ampere, every Blackwell run on megatron-core): a level
  lowered the held-out likelihood and coverage (objectives.fitting.interval_fit). The axes are looked at one by
  one (a sorted lookup, no pass over the runs per design), so a combination of validated values that no
  single run had counts as validated. One axis is a combination, ``domains``: the NVLink domains a job
  spans, log2(n_gpus / scaleup_size), against the runs *on that domain size* (a GB200 job on 57 NVL72 racks
  is as far from the published NVL72 runs of at most 3.6 racks as its octaves say, however many 8-GPU
  servers the H100 runs spanned); a domain size no run of the stack has adds nothing on it, the
  ``scaleup_size`` axis counting that distance already.
- ``g_generation`` (>= 0, one per GPU generation; ``scale.generation`` of the parameters, 0 where absent):
  how much wider a generation's intervals must be than the pooled scale says for them to hold 80% of its
  runs. For a generation whose validated runs come from a single source (Blackwell: Megatron-Bridge alone)
  it is read from the leave-one-generation-out check (objectives.fitting.generation_check): the generation's runs
  predicted by factors fitted without any run of it, i.e. how far off the model is on a generation it has
  barely seen; for a generation of several sources, from its leave-one-source-out residuals (a per-group,
  "Mondrian", calibration: Vovk, Gammerman & Shafer 2005, Sec. 4.5). objectives.fitting.interval_fit has the rule
  and the measured figures.
- the widening stops at ``d_cap`` (the largest distance a held-out run had: beyond it the residuals say
  nothing); ``interval_extrapolated`` marks designs past it, whose interval is then a lower bound on the
  model's uncertainty.
- ``z_10``, ``z_90``: the 10% and 90% quantiles of the held-out residuals divided by their sigma, the
  wider of every source weighing the same and every run weighing the same (objectives.fitting.interval_fit).

Times, costs and energy follow the step time: time_to_train_days, run_cost_usd (and tco_usd, its old
name), energy_mwh, usd_per_mtok and gpu_hours scale with it (objectives.training.reliability, objectives.economics.cost,
objectives.economics.power; the goodput is held at the point prediction's, the checkpoint interval and failure rate
not depending on the step time beyond the one-step floor), so each bound is the figure times the step
time's ratio. On a preemptible spot row they also scale with the goodput's range over the measured
preemption figures (objectives.training.reliability: ``goodput_preempt_max`` for the lower bound, ``_min`` for the
upper), measured on fleets of 1 to 32 nodes and unvalidated beyond; 1 on every other row. A lower bound of
a time or a cost goes with the upper bound of the throughput. The upper bound of the throughput stops where
every model FLOP would run at the GPU's measured large-GEMM rate (``mfu`` at the GEMM efficiency of its
precision, objectives.training.steptime), which no run exceeds.

A design on a system whose figures are announced or estimated (objectives/catalog/estimates.py) carries
their range on top: ``catalog_range_lo_frac`` / ``catalog_range_hi_frac`` (the throughput at the catalog's
low / high figures over the prediction's, a bound) are the least of the low / high fractions
(``<field>_lo_frac`` = low / value) of the figures it runs on: the peak of its precision, HBM capacity and
bandwidth, the scale-up and the NIC bandwidth. Why the least and not a product or a root-sum-square: the
step time is a sum of terms each of which scales as the inverse of at most one of these figures (compute
with the peak, memory-bound kernels with the HBM bandwidth, each collective with its link; objectives.training.compute,
objectives.training.communication), so with every figure at its low end no term grows by more than 1 / the least
fraction, and the throughput falls by at most that factor; likewise it rises by at most the largest high
fraction. How much each figure weighs in a row (its elasticity, 0 to 1) is not known without running the
model again, so the worst field bounds it; HBM capacity enters no time term (too little of it forces another
mapping or recompute), and its fraction is taken as the same kind of bound, a conservative stand-in. The
model's own interval holds for each value inside the range (the range is a set of possible specs, not a
distribution), so the union over the range is the product: low end ``slow * catalog_range_lo_frac``, high
end ``fast * catalog_range_hi_frac``, the GEMM-rate ceiling applied to ``fast`` first at the catalog value.
Example: a GEMM-bound design at 10,000 tokens/s on a part announced at 50 PF but possibly 25 PF dense
(lo_frac 0.5) with a model interval [0.8, 1.15] x gets [0.8 x 0.5, 1.15 x 1.0] x = [4,000, 11,500] tokens/s.
``catalog_estimated`` marks a design on an announced, unshipped system; it is always ``interval_extrapolated``:
no published run validates it, so its interval is a lower bound on the uncertainty.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from objectives.base import Model, as_codes, lookup, select
from objectives.catalog.estimates import RANGE_COLUMNS
from objectives.columns import per_value
from objectives.table import is_constant

__all__ = ["Intervals", "FEATURES", "AXES", "INTERVAL_PATH", "LEVEL", "generation", "feature_octaves", "ground_keys",
           "distance_oct", "log_band", "load_params", "catalog_range"]

INTERVAL_PATH = Path(__file__).resolve().parent.parent / "catalog" / "intervals.json"
#: the share of measurements an interval is meant to hold
LEVEL = 0.8
#: the axes of the validated ground; each in octaves (log2), the precision as log2 of its bits per operand
#: (bf16 4, fp8 3, fp4 2) and the scale-up mesh (0 switched, 1 full mesh) as it is
FEATURES = ("n_gpus", "tp", "pp", "cp", "ep", "n_params", "n_params_active", "seq_len", "precision",
            "generation", "gpu_bf16_tflop_s", "gpu_hbm_tbyte_s", "scaleup_gbyte_s", "scaleup_size", "scaleup_mesh")
#: the derived axes beside FEATURES: the NVLink domains a job spans, grouped by the domain size (module doc)
AXES = (*FEATURES, "domains")
#: ``domains`` values of different domain sizes lie this many units per octave of domain size apart, more
#: than twice any job's span (< 2^20 domains), so a design's nearest key of its own size is within half of it
_DOMAIN_GROUP = 50.0
#: axes counted as they are (one unit per step), not in octaves
_LINEAR = ("generation", "scaleup_mesh")
GENERATIONS = ("ampere", "hopper", "blackwell")
#: keys of different stacks lie this far apart in a sorted lookup table (every axis spans < 100 octaves)
_STACK_OFFSET = 1000.0
#: outputs that scale with the throughput / with the step time
THROUGHPUT = ("tokens_per_s_per_gpu", "tokens_per_s", "mfu")
TIME = ("step_time_s", "time_to_train_days", "gpu_hours", "energy_mwh", "run_cost_usd", "tco_usd", "usd_per_mtok")
_UNITS = {"tokens_per_s_per_gpu": "tokens/s", "tokens_per_s": "tokens/s", "mfu": "fraction", "step_time_s": "s",
          "time_to_train_days": "days", "gpu_hours": "GPU-hours", "energy_mwh": "MWh", "run_cost_usd": "USD",
          "tco_usd": "USD (run_cost_usd's old name)", "usd_per_mtok": "USD"}


def generation(fp8_tflop_s: np.ndarray, fp4_tflop_s: np.ndarray) -> np.ndarray:
    """GPU generation code (0 Ampere, 1 Hopper, 2 Blackwell class) from the tensor-core formats it has."""
    return np.where(np.isnan(fp8_tflop_s), 0.0, np.where(np.isnan(fp4_tflop_s), 1.0, 2.0))


def feature_octaves(c) -> dict[str, np.ndarray]:
    """Each axis of :data:`AXES` in octaves (see the module doc); a constant column stays constant."""
    out = {name: per_value(np.log2, c[name]) for name in FEATURES if name not in ("precision", *_LINEAR)}
    out["domains"] = _DOMAIN_GROUP * out["scaleup_size"] + (out["n_gpus"] - out["scaleup_size"])
    out["precision"] = per_value(lambda p: 4.0 - p, c["precision"])  # log2 of 16, 8, 4 bits
    out.update((name, np.asarray(c[name], dtype=np.float64)) for name in _LINEAR)
    return out


def ground_keys(ground: dict[str, list[list[float]]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per axis, the sorted lookup keys stack_code * offset + value of the validated values of each stack,
    and the midpoints between neighbouring keys (a key's nearest validated key is found by one search)."""
    out = {}
    for name, per_stack in ground.items():
        keys = np.unique(np.concatenate([code * _STACK_OFFSET + np.asarray(v, dtype=np.float64)
                                         for code, v in enumerate(per_stack)]))
        out[name] = (keys, (keys[1:] + keys[:-1]) / 2.0)
    return out


def distance_oct(octaves: dict[str, np.ndarray], stack: np.ndarray, keys: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Norm over the axes of each axis' distance (octaves) to the nearest validated value of the design's stack.

    Every stack has values on every axis (``interval_fit`` fills a stack without runs with all runs'), and
    keys of different stacks lie ``_STACK_OFFSET`` apart, so the nearest key is one of the design's stack."""
    total = 0.0
    base = per_value(lambda s: s * _STACK_OFFSET, stack)
    for name, (k, mid) in keys.items():
        v = octaves[name]
        if is_constant(v) and is_constant(base):  # one lookup for the whole column
            v, b = v[:1], base[:1]
        else:
            b = base
        key = b + v
        gap = key - k.take(np.searchsorted(mid, key))
        if name == "domains":  # no run of the stack on this domain size: the scaleup_size axis counts it
            gap = np.where(np.abs(gap) > _DOMAIN_GROUP / 2.0, 0.0, gap)
        total = total + gap * gap
    shape = np.broadcast_shapes(np.shape(stack), *(np.shape(v) for v in octaves.values()))
    return np.sqrt(np.broadcast_to(total, shape))


def log_band(stack: np.ndarray, moe: np.ndarray, dist: np.ndarray, params: dict, gen: np.ndarray | None = None):
    """(lo, hi, sigma): the interval of log(predicted / measured throughput) and its scale; ``gen`` (codes of
    :data:`GENERATIONS`): with the parameters' per-generation term where they have one (module doc)."""
    s = params["scale"]
    log_sigma = s["intercept"] + lookup(s["stack"], as_codes(stack)) + s["moe"] * moe + s["kappa"] * np.minimum(dist, s["d_cap"])
    if gen is not None and "generation" in s:
        log_sigma = log_sigma + lookup(s["generation"], as_codes(gen))
    sigma = np.exp(log_sigma)
    return sigma * params["quantile"]["lo"], sigma * params["quantile"]["hi"], sigma


def catalog_range(c) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): the throughput's bounds over the catalog ranges of the figures a row runs on, as fractions
    of the prediction: the least low fraction and the largest high fraction (module doc); the peak is the
    row's precision's."""
    code = as_codes(c["precision"])
    ends = []
    for end, pick in (("lo", np.minimum), ("hi", np.maximum)):
        peak = select(code, tuple(c[f"gpu_{p}_tflop_s_{end}_frac"] for p in ("bf16", "fp8", "fp4")))
        links = (c[f"{f}_{end}_frac"] for f in ("gpu_hbm_gb", "gpu_hbm_tbyte_s", "scaleup_gbyte_s", "nic_gbyte_s"))
        ends.append(functools.reduce(pick, links, peak))
    return ends[0], ends[1]


_CACHE: dict[str, tuple[dict, dict[str, tuple[np.ndarray, np.ndarray]]]] = {}


def load_params(path: Path = INTERVAL_PATH) -> tuple[dict, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(the interval parameters, the validated ground's lookup keys), read once."""
    key = str(path)
    if key not in _CACHE:
        params = json.loads(Path(path).read_text())
        _CACHE[key] = (params, ground_keys(params["ground"]))
    return _CACHE[key]


class Intervals(Model):
    """80% intervals of the throughput and of what follows from it (module doc)."""

    requires = ("stack", "gpu_fp8_tflop_s", "gpu_fp4_tflop_s", "gpu_gemm_eff_bf16", "gpu_gemm_eff_fp8",
                "gpu_gemm_eff_fp4", "moe_experts", *(f for f in FEATURES if f != "generation"),
                *THROUGHPUT, *TIME, "goodput", "goodput_preempt_min", "goodput_preempt_max", *RANGE_COLUMNS)
    provides = {
        "validated_distance_oct": "octaves; distance of the design from the validated runs of its stack, per axis",
        "interval_extrapolated": "bool; the design lies farther from the validated runs than any held-out run did",
        "interval_half_width_frac": "fraction; half the 80% interval of tokens_per_s_per_gpu over the prediction",
        "catalog_range_lo_frac": "fraction; throughput at the catalog's low figures over the prediction's (a bound: the "
                                 "least low / value of the peak, HBM and link figures the design runs on; 1 without a range)",
        "catalog_range_hi_frac": "fraction; throughput at the catalog's high figures over the prediction's (the largest "
                                 "high / value; 1 without a range)",
        "catalog_estimated": "bool; the GPU system is announced, not shipped: its figures are announced or estimated",
        **{f"{name}_{end}": f"{_UNITS[name]}; {'lower' if end == 'lo' else 'upper'} end of the 80% interval of {name}"
           for name in THROUGHPUT + TIME for end in ("lo", "hi")},
    }

    def __init__(self, path: Path = INTERVAL_PATH):
        self.path = path

    def compute(self, c, cal):
        own = getattr(cal, "interval_params", None)  # a calibration of one's own runs carries its intervals
        if own is None and not Path(self.path).exists():  # before the first derivation: no interval
            nan = np.full(np.shape(c["step_time_s"]), np.nan)
            return {name: (nan > 0) if name == "interval_extrapolated" else nan for name in self.provides}
        params, keys = load_params(self.path) if own is None else (own, ground_keys(own["ground"]))
        gen = generation(c["gpu_fp8_tflop_s"], c["gpu_fp4_tflop_s"])
        dist = distance_oct(feature_octaves({**c, "generation": gen}), c["stack"], keys)
        dist = np.broadcast_to(dist, np.broadcast_shapes(dist.shape, np.shape(c["step_time_s"])))
        lo, hi, _ = log_band(c["stack"], (c["moe_experts"] > 0) * 1.0, dist, params, gen)
        # measured throughput = predicted * exp(-log ratio): the low end of the ratio gives the high throughput
        fast, slow = np.exp(-lo), np.exp(-hi)
        # no faster than every model FLOP at the GPU's measured large-GEMM rate (mfu <= GEMM efficiency)
        eff = select(as_codes(c["precision"]), (c["gpu_gemm_eff_bf16"], c["gpu_gemm_eff_fp8"], c["gpu_gemm_eff_fp4"]))
        with np.errstate(divide="ignore", invalid="ignore"):
            roof = eff / c["mfu"]
        fast = np.where(roof >= 1.0, np.minimum(fast, roof), fast)
        lo_frac, hi_frac = catalog_range(c)  # an announced or estimated figure's range, on top (module doc)
        fast, slow = fast * hi_frac, slow * lo_frac
        announced = c["gpu_announced"] > 0
        out = {"validated_distance_oct": dist, "interval_extrapolated": (dist > params["scale"]["d_cap"]) | announced,
               "interval_half_width_frac": (fast - slow) / 2.0, "catalog_range_lo_frac": lo_frac,
               "catalog_range_hi_frac": hi_frac, "catalog_estimated": announced}
        for name in THROUGHPUT:
            out[f"{name}_lo"] = c[name] * slow
            out[f"{name}_hi"] = c[name] * fast
        # the goodput's range on a preemptible row; a fleet that never stays whole overflows to inf days
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            best, worst = c["goodput"] / c["goodput_preempt_max"], c["goodput"] / c["goodput_preempt_min"]
            for name in TIME:
                spread = (1.0, 1.0) if name == "step_time_s" else (best, worst)
                out[f"{name}_lo"] = c[name] / fast * spread[0]
                out[f"{name}_hi"] = c[name] / slow * spread[1]
        return out
