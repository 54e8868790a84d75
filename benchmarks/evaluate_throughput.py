"""Rows per second of `dse evaluate` on a large fixed table, whole process, Parquet to Parquet.

    python benchmarks/evaluate_throughput.py [--rows 1000000] [--repeat 3] [--keep DIR]

Generates ``--rows`` fully specified designs (every mapping column given, all valid: several catalog models
and GPUs, dense and MoE, bf16 and fp8 where the GPU has it, pipelines with and without interleaving),
writes them to Parquet, then times ``dse evaluate IN.parquet -o OUT.parquet`` as a fresh process on one
core (``taskset -c 0`` where available, BLAS and numpy pinned to one thread), ``--repeat`` times:

- with every output column;
- with ``--columns`` of ten (the design, its step time, MFU, time to train and TCO: every module runs);
- with ``--columns`` of ten training metrics (no economics module is needed, so none runs).

Prints rows/s of each run (wall time, and per CPU second of the process: user + system, the figure
that other load on a shared machine disturbs least), then the best and the median. Interpreter start and imports are inside the
timing: it is the wall time a user waits. Not a test; prints figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from objectives import catalog  # noqa: E402

#: a mix of catalog models (dense and MoE) and GPUs (with and without fp8)
MODELS = ["gpt3-175b", "llama3-70b", "llama3-8b", "llama2-13b", "mixtral-8x7b", "nemotron-4-340b"]
GPUS = ["a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "mi300x"]
#: a Pareto front's columns: the design, its speed and its cost (every module runs)
TEN_COLUMNS = ["model", "gpu", "n_gpus", "tp", "pp", "step_time_s", "mfu", "time_to_train_days", "run_cost_usd",
               "feasible"]
#: training metrics alone: the economics modules are skipped
TEN_TRAINING_COLUMNS = ["model", "gpu", "n_gpus", "tp", "pp", "micro_batch", "step_time_s", "mfu", "hbm_used_gb",
                        "feasible"]


def fixed_table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` designs with every mapping column given and valid: tp divides the heads and fits the scale-up
    domain, pp divides the layers, interleaving only with a pipeline, ep divides the experts and dp*tp,
    sequence parallelism with tp, dp*micro_batch divides the global batch, fp8 only where the GPU has it."""
    rng = np.random.default_rng(seed)
    models, gpus = catalog.models(), catalog.gpus()
    model = rng.integers(0, len(MODELS), n)
    gpu = rng.integers(0, len(GPUS), n)
    layers = np.array([models[m]["n_layers"] for m in MODELS])[model]
    experts = np.array([models[m]["moe_experts"] for m in MODELS])[model]
    tp = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    pp = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    pp = np.where(layers % pp == 0, pp, 1.0)
    vp = np.where((pp > 1) & (layers % (2 * pp) == 0), rng.choice([1.0, 2.0], n), 1.0)
    dp = rng.choice([8.0, 16.0, 32.0, 64.0, 128.0], n)
    ep = np.where(experts > 0, rng.choice([1.0, 2.0, 4.0, 8.0], n), 1.0)
    mb = rng.choice([1.0, 2.0], n)
    has_fp8 = np.isfinite(np.array([gpus[g]["gpu_fp8_tflop_s"] for g in GPUS]))[gpu]
    precision = np.where(has_fp8 & (rng.random(n) < 0.5), "fp8", "bf16").astype(object)
    return {
        "model": np.array(MODELS, dtype=object)[model],
        "gpu": np.array(GPUS, dtype=object)[gpu],
        "n_gpus": tp * pp * dp,
        "global_batch": dp * mb * rng.choice([4.0, 8.0, 16.0], n),
        "tp": tp, "pp": pp, "cp": np.ones(n), "ep": ep, "vp": vp, "micro_batch": mb,
        "recompute": np.array(["none", "selective", "full"], dtype=object)[rng.integers(0, 3, n)],
        "sequence_parallel": (tp > 1).astype(np.float64),
        "zero_stage": rng.choice([0.0, 1.0, 3.0], n),
        "precision": precision,
        "train_tokens": np.full(n, 1e12),
    }


def write_input(path: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(fixed_table(n)), path)


def timed_run(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one `dse evaluate` process on one core."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1", "ARROW_NUM_THREADS": "1"}
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    cmd = [*pin, sys.executable, "-c", "import sys; from dse.cli import main; sys.exit(main())", "evaluate", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"dse evaluate failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the input and outputs here (default: a temporary folder)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dse-evaluate-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "fixed.parquet"
    try:
        write_input(src, args.rows)
        print(f"rows: {args.rows:,} fully specified designs ({len(MODELS)} models x {len(GPUS)} GPUs, fixed mappings)"
              f"; input {src.stat().st_size / 1e6:.1f} MB; pinned: {'taskset -c 0' if shutil.which('taskset') else 'no'}")
        runs = {"every output column": [str(src), "-o", str(work / "all.parquet")],
                "--columns of ten": [str(src), "-o", str(work / "ten.parquet"), "--columns", ",".join(TEN_COLUMNS)],
                "--columns of ten, no economics": [str(src), "-o", str(work / "ten_training.parquet"), "--columns",
                                                   ",".join(TEN_TRAINING_COLUMNS)]}
        for label, argv in runs.items():
            walls, cpus = [], []
            for _ in range(args.repeat):
                wall, cpu = timed_run(argv)
                walls.append(args.rows / wall)
                cpus.append(args.rows / cpu)
                print(f"  {label}: {walls[-1]:>10,.0f} rows/s  ({wall:.2f} s wall, {cpu:.2f} s CPU)", flush=True)
            print(f"{label}: best {max(walls):,.0f} rows/s, median {statistics.median(walls):,.0f} rows/s"
                  f" (wall, {args.repeat} runs); per CPU second: best {max(cpus):,.0f}, median {statistics.median(cpus):,.0f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
