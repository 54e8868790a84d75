"""Peak memory and wall time of `dse evaluate` on a table whose mappings are searched (blank), whole process.

    python benchmarks/evaluate_memory.py [--rows 200000] [--budget N] [--slice-rows R] [--root DIR] [--limit-gb G]

Generates ``--rows`` designs (llama3-70b, llama3-8b and mixtral-8x7b on h100-sxm, b200 and gb200; 64 to
4096 GPUs, a global batch of 512 to 4096 sequences, 1e12 training tokens) whose mapping columns (tp, pp,
cp, ep, vp, micro_batch, recompute, zero_stage) are present and blank, so that `dse evaluate` searches every
row's mapping (about a thousand candidates a row, from under two hundred to a few thousand). Writes them to
Parquet and runs ``dse evaluate IN.parquet -o OUT.parquet`` once as a fresh process, BLAS and numpy on one
thread, every output column. Prints its wall time, its peak resident memory (``ru_maxrss`` of the child)
and the candidates it evaluated (the sum of ``n_mappings_tried``).

``--budget N``: the child runs with ``objectives.mapping.CANDIDATE_BUDGET = N`` (``inf``: a slice's
candidates enumerated at once, as before the budget). ``--slice-rows R``: the child runs with
``dse.commands.evaluate.SLICE_ROWS = R`` (rows evaluated and written at a time). ``--root DIR``: the child
imports ``dse`` and ``objectives`` from DIR (another checkout, such as ``git archive`` of an earlier
commit). ``--limit-gb G``: the child's address space is limited to G GiB (RLIMIT_AS), so that a run that
would take the machine's memory ends in a MemoryError instead. Not a test; prints figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

MODELS = ["llama3-70b", "llama3-8b", "mixtral-8x7b"]
GPUS = ["h100-sxm", "b200", "gb200"]
#: the mapping columns left blank (sequence_parallel, blank, follows tp)
BLANK = ["tp", "pp", "cp", "ep", "vp", "micro_batch", "zero_stage"]


def blank_table(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` designs of MODELS x GPUS, 64..4096 GPUs, every mapping cell blank."""
    rng = np.random.default_rng(seed)
    table = {
        "model": np.array(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)],
        "gpu": np.array(GPUS, dtype=object)[rng.integers(0, len(GPUS), n)],
        "n_gpus": 2.0 ** rng.integers(6, 13, n),
        "global_batch": rng.choice([512.0, 1024.0, 2048.0, 4096.0], n),
        "train_tokens": np.full(n, 1e12),
    }
    table.update({name: np.full(n, np.nan) for name in BLANK})
    table["recompute"] = np.full(n, None, dtype=object)
    return table


def write_input(path: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = blank_table(n)
    arrays = {k: pa.array(v, type=pa.string()) if k == "recompute" else pa.array(v) for k, v in table.items()}
    pq.write_table(pa.table(arrays), path)


def run_child(argv: list[str], root: Path, budget: str | None, slice_rows: int | None, limit_gb: float | None):
    """(wall seconds, peak RSS in bytes, return code, stderr) of one `dse evaluate` process."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1", "ARROW_NUM_THREADS": "1"}
    setup = "" if budget is None else f"import objectives.mapping as m; m.CANDIDATE_BUDGET = float({budget!r}); "
    if slice_rows is not None:
        setup += f"import dse.commands.evaluate as e; e.SLICE_ROWS = {slice_rows:d}; "
    code = f"import sys; {setup}from dse.cli import main; sys.exit(main())"

    def limit():
        if limit_gb is not None:
            size = int(limit_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "evaluate", *argv], env=env, capture_output=True, text=True,
                          preexec_fn=limit, cwd=root)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # kilobytes on Linux
    return wall, peak, proc.returncode, proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--budget", default=None, help="objectives.mapping.CANDIDATE_BUDGET in the child ('inf': none)")
    ap.add_argument("--slice-rows", type=int, default=None, help="dse.commands.evaluate.SLICE_ROWS in the child")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout the child imports (default: this one)")
    ap.add_argument("--limit-gb", type=float, default=None, help="the child's address-space limit, GiB")
    ap.add_argument("--keep", type=Path, default=None, help="write the input and output here (default: a temporary folder)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dse-evaluate-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    src, out = work / "blank.parquet", work / "out.parquet"
    try:
        write_input(src, args.rows)
        print(f"rows: {args.rows:,} designs with blank mappings ({len(MODELS)} models x {len(GPUS)} GPUs); "
              f"code: {args.root}; budget: {args.budget or 'shipped'}; slice rows: {args.slice_rows or 'shipped'}; "
              f"limit: {args.limit_gb or 'none'} GiB", flush=True)
        wall, peak, rc, stderr = run_child([str(src), "-o", str(out)], args.root, args.budget, args.slice_rows,
                                           args.limit_gb)
        if rc != 0:
            last = (stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"FAILED (exit {rc}) after {wall:.1f} s wall, peak RSS {peak / 2**20:,.0f} MiB: {last}")
            return
        import pyarrow.parquet as pq

        candidates = float(np.sum(pq.read_table(out, columns=["n_mappings_tried"]).column(0).to_numpy()))
        print(f"wall {wall:.1f} s, peak RSS {peak / 2**20:,.0f} MiB; {candidates:,.0f} candidates "
              f"({candidates / args.rows:,.0f} a row, {candidates / wall / 1e6:.2f} M/s)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
