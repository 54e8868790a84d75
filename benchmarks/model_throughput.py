"""Rows per second of the training model on one core, fixed mapping.

    python benchmarks/model_throughput.py [--rows 1000000] [--repeat 3]

Builds a design table of N rows (random GPUs, models, sizes and valid fixed mappings), then times, best
of ``--repeat``:

- ``objectives.evaluate`` end to end: input checks, categorical encoding, catalog expansion, every module;
- the training model end to end, ``objectives.evaluate(table, models=TRAINING_MODELS)``: the same
  boundary, then the training performance modules (transformer arithmetic .. step time) without the
  cluster economics;
- and its parts: the input checks and catalog alone (``prepare``), every module on prepared columns, and
  the training performance modules on prepared columns (what the mapping search runs per candidate).

Pins BLAS and numpy to one thread so the figure is per core. Calculon, for comparison, evaluates about
250 designs per second per core as shipped.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time

import numpy as np

import objectives
from objectives.pipeline import TRAINING_MODELS, prepare, run_models

MODELS = ["gpt3-175b", "llama3-70b", "llama3.1-405b", "llama3-8b", "gpt3-13b"]
GPUS = ["a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "gb300"]


def design_table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8], n)
    dp = rng.choice([8, 16, 32, 64, 128], n)
    mb = rng.choice([1, 2], n)
    return {
        "model": np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)],
        "gpu": np.array(GPUS, dtype=object)[rng.integers(0, len(GPUS), n)],
        "n_gpus": (tp * pp * dp).astype(float),
        "global_batch": (dp * mb * rng.choice([4, 8, 16], n)).astype(float),
        "tp": tp.astype(float), "pp": pp.astype(float), "vp": np.where(pp > 1, rng.choice([1, 2], n), 1).astype(float),
        "micro_batch": mb.astype(float),
        "recompute": np.array(["none", "selective", "full"], dtype=object)[rng.integers(0, 3, n)],
        "zero_stage": rng.choice([0, 1, 3], n).astype(float),
        "precision": np.array(["bf16", "fp8"], dtype=object)[rng.integers(0, 2, n)],
        "train_tokens": np.full(n, 1e12),
    }


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table = design_table(args.rows)
    objectives.evaluate({k: v[:1000] for k, v in table.items()})  # warm the catalog caches
    end_to_end = best_of(args.repeat, lambda: objectives.evaluate(table))
    training = best_of(args.repeat, lambda: objectives.evaluate(table, models=TRAINING_MODELS))
    prep = best_of(args.repeat, lambda: prepare(table))
    _, prepared = prepare(table)
    models_only = best_of(args.repeat, lambda: run_models(prepared))
    training_only = best_of(args.repeat, lambda: run_models(prepared, None, TRAINING_MODELS))
    out = objectives.evaluate(table)
    n = args.rows
    print(f"rows: {n:,} (random models, GPUs and fixed mappings; {int(out['feasible'].sum()):,} feasible)")
    print(f"objectives.evaluate end to end:   {n / end_to_end:>12,.0f} rows/s  ({end_to_end:.3f} s)  (every module)")
    print(f"training model end to end:        {n / training:>12,.0f} rows/s  ({training:.3f} s)"
          "  (prepare + transformer .. step time)")
    print(f"  input checks and catalog:       {n / prep:>12,.0f} rows/s  ({prep:.3f} s)  (prepare)")
    print(f"  every model module:             {n / models_only:>12,.0f} rows/s  ({models_only:.3f} s)"
          "  (on prepared columns)")
    print(f"  training performance modules:   {n / training_only:>12,.0f} rows/s  ({training_only:.3f} s)"
          "  (on prepared columns; no economics)")


if __name__ == "__main__":
    main()
