"""Rows per second of the serving model on one core, fixed mapping, reported in CPU time.

    python benchmarks/serving_throughput.py [--rows 1000000] [--repeat 3]

Builds a serving design table of N rows (random GPUs, models, precisions, engines, request shapes and
valid fixed mappings), then times, best of ``--repeat``, in CPU time (user + system, ``os.times``, so that
other work on the machine does not count; the user share is printed beside it: the system share is the
kernel zeroing fresh pages for the outputs and for the temporaries the allocator gave back, which varies
from call to call with the C allocator's state, docs/performance.md):

- ``objectives.evaluate_serving`` end to end: input checks, categorical encoding, catalog expansion, every
  serving module (the 80% intervals included), the reasons;
- the serving modules alone on prepared columns (``run_serving``), with the concurrency given (one
  operating point per row), blank (the largest that fits: one operating point), and blank under a TPOT
  target (the knee found by bisection: BISECTIONS operating points per row);
- and the performance modules without the economics;
- then, in a child process, ``evaluate_serving`` as ``dse evaluate`` runs it: in slices of its SLICE_ROWS
  (65,536) rows, the C allocator keeping freed memory (``dse.cluster.memory.keep_freed_memory``, which
  ``dse evaluate`` calls first; the library itself leaves the process's allocator as it is).

Pins BLAS and numpy to one thread so the figure is per core (target: 1,000,000 rows per second per core with
a fixed mapping, issue 15).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from objectives.serving import SERVING_PERFORMANCE_MODELS, evaluate_serving
from objectives.serving.evaluate import run_serving
from objectives.serving.prepare import prepare_serving

MODELS = ["llama3-8b", "llama3-70b", "llama3.3-70b", "llama3.1-405b", "mixtral-8x7b", "qwen3-30b-a3b"]
GPUS = ["h100-sxm", "h200-sxm", "b200", "gb200"]


def design_table(n: int, seed: int = 0, concurrency: bool = True, slo: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n).astype(float)
    table = {
        "model": np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)],
        "gpu": np.array(GPUS, dtype=object)[rng.integers(0, len(GPUS), n)],
        "n_gpus": tp, "tp": tp,
        "precision": np.array(["bf16", "fp8"], dtype=object)[rng.integers(0, 2, n)],
        "kv_precision": np.array(["bf16", "fp8"], dtype=object)[rng.integers(0, 2, n)],
        "engine": np.array(["trtllm", "vllm", "sglang"], dtype=object)[rng.integers(0, 3, n)],
        "input_len": rng.choice([128, 1000, 2048, 8192], n).astype(float),
        "output_len": rng.choice([128, 1000, 2048], n).astype(float),
    }
    if concurrency:
        table["concurrency"] = rng.choice([1, 8, 32, 128], n).astype(float)
    if slo:
        table["tpot_slo_s"] = rng.choice([0.02, 0.05, 0.1], n)
    return table


def best_of(repeat: int, fn) -> tuple[float, float]:
    """(CPU seconds, user + system, of the fastest of ``repeat`` calls; its user seconds)."""
    times = []
    for _ in range(repeat):
        t0 = os.times()
        fn()
        t1 = os.times()
        times.append((t1.user - t0.user + t1.system - t0.system, t1.user - t0.user))
    return min(times)


def as_dse_evaluate(n: int, repeat: int) -> None:
    """One line: ``evaluate_serving`` of the same table in dse evaluate's slices, its allocator setting."""
    from dse.cluster.memory import keep_freed_memory
    from dse.commands.evaluate import SLICE_ROWS

    keep_freed_memory()
    table = design_table(n)
    evaluate_serving({k: v[:1000] for k, v in table.items()})

    def slices():
        for lo in range(0, n, SLICE_ROWS):
            evaluate_serving({k: v[lo:lo + SLICE_ROWS] for k, v in table.items()})

    seconds, user = best_of(repeat, slices)
    name = f"as dse evaluate: slices of {SLICE_ROWS:,}, freed memory kept"
    print(f"  {name:<50} {seconds:7.3f} s  {n / seconds:>12,.0f} rows/s  ({n / user:>10,.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--as-dse-evaluate", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    n = args.rows
    if args.as_dse_evaluate:
        as_dse_evaluate(n, args.repeat)
        return
    table = design_table(n)
    evaluate_serving({k: v[:1000] for k, v in table.items()})  # warm the catalog caches
    figures = {"evaluate_serving end to end (concurrency given)": best_of(args.repeat, lambda: evaluate_serving(table))}
    _, given = prepare_serving(table)
    _, largest = prepare_serving(design_table(n, concurrency=False))
    _, knee = prepare_serving(design_table(n // 10, concurrency=False, slo=True))
    figures["prepare_serving (checks, catalog)"] = best_of(args.repeat, lambda: prepare_serving(table))
    figures["serving modules, concurrency given"] = best_of(args.repeat, lambda: run_serving(given))
    figures["performance modules, concurrency given"] = best_of(
        args.repeat, lambda: run_serving(given, models=SERVING_PERFORMANCE_MODELS))
    figures["serving modules, largest that fits"] = best_of(args.repeat, lambda: run_serving(largest))
    knee_s = best_of(args.repeat, lambda: run_serving(knee))
    print(f"{n:,} serving rows, one core, CPU time user + system (best of {args.repeat}); user alone in brackets")
    for name, (seconds, user) in figures.items():
        print(f"  {name:<50} {seconds:7.3f} s  {n / seconds:>12,.0f} rows/s  ({n / user:>10,.0f})")
    print(f"  {'serving modules, TPOT target (knee by bisection)':<50} {knee_s[0]:7.3f} s  {n // 10 / knee_s[0]:>12,.0f} "
          f"rows/s  ({n // 10 / knee_s[1]:>10,.0f})  ({n // 10:,} rows)", flush=True)
    # a child process: the allocator setting is the process's, and this one's figures are the default's
    subprocess.run([sys.executable, __file__, "--as-dse-evaluate", "--rows", str(n), "--repeat", str(args.repeat)],
                   check=True)


if __name__ == "__main__":
    main()
