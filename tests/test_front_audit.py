"""A front audit: every shipped space's Pareto front holds the physical invariants a practitioner checks.

The sweep is an optimizer and finds exactly where the model is too optimistic, so the designs that matter
are those on the fronts, not the published runs. Each shipped space is swept (seeded, a few thousand
designs at most, in-process) and every front design must hold:

- a schedule Megatron would run: an interleaved pipeline (vp > 1) has a multiple of pp micro-batches per
  step (Megatron-Core schedules.py, forward_backward_pipelining_with_interleaving), and its bubble is at
  least what the schedule leaves idle, t_mb * (max(p - m, 0) + (min(m, p) - 1) / v) (Narayanan et al.
  SC'21 Sec. 2.2.2; the m < p case derived in objectives/training/steptime.py);
- a whole job: tp*pp*cp*dp = n_gpus, dp*micro_batch*m = global_batch, tp groups tiling the NVLink domain
  (no tp group straddling two servers or racks);
- MFU under the GPU's GEMM ceiling: the FLOPs a GPU really runs per second (model FLOPs, plus the
  recomputed forward under full recompute: 4/3 of them, Korthikanti et al. MLSys'23 Sec. 6) cannot exceed
  the measured GEMM rate (peak x MAMF efficiency) times the share of the step in which the GPU computes at
  all (the step less its pipeline bubble, exposed communication and optimizer step);
- NVLink domains only on platforms that have them, and NICs no faster than the system's
  (tests/invariants.py);
- checkpoint intervals of at least three write times (tests/invariants.py).

A design that breaks one fails the test with its mapping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from invariants import broken_rows

from dse.spec import load_spec
from dse.store import RunStore
from dse.sweep import run

ROOT = Path(__file__).resolve().parent.parent
#: the training spaces (the serving spaces' fronts, roadmap-2027-serving's too, are audited by
#: tests/test_serving_spaces.py)
SPACES = sorted(p for p in (ROOT / "spaces").glob("*.yaml")
                if not p.stem.startswith("serving-") and not p.stem.endswith("-serving"))
#: designs swept per space: the space's own count up to this, in batches of at most 256
MAX_TRIALS = 2048
_REL = 1e-9  # float round-off

MAPPING = ["gpu", "n_gpus", "precision", "tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "n_microbatches",
           "recompute", "zero_stage", "mfu", "step_time_s"]


def _front(path: Path, tmp_path: Path):
    spec = load_spec(path)
    trials = min(spec.search.trials, MAX_TRIALS)
    spec = spec.with_search(trials=trials, batch_size=min(spec.search.batch_size, 256))
    result = run(spec, run_dir=tmp_path / "run", use_ray=False)
    front = pd.read_parquet(RunStore(result.run_dir).pareto)
    assert len(front) >= 1, f"{path.name}: empty front"
    return spec, front


def _schedule(f: pd.DataFrame) -> np.ndarray:
    """Rows whose schedule Megatron refuses or whose bubble is charged below what the schedule leaves."""
    p, v, m = f["pp"].to_numpy(float), f["vp"].to_numpy(float), f["n_microbatches"].to_numpy(float)
    refused = (v > 1) & (np.mod(m, p) != 0)
    t_mb = (f["time_compute_s"] + f["time_tp_comm_s"] + f["time_cp_comm_s"] + f["time_ep_comm_s"]).to_numpy() / m
    idle = t_mb * (np.maximum(p - m, 0.0) + (np.minimum(m, p) - 1.0) / v)
    return refused | (f["time_pp_bubble_s"].to_numpy() < idle * (1 - 1e-6))


def _whole_job(f: pd.DataFrame) -> np.ndarray:
    """Rows whose degrees do not make the job: n_gpus, the global batch, tp groups that do not tile the
    NVLink domain."""
    n = f["tp"] * f["pp"] * f["cp"] * f["dp"]
    batch = f["dp"] * f["micro_batch"] * f["n_microbatches"]
    return ((n != f["n_gpus"]) | (np.abs(batch - f["global_batch"]) > 1e-6) | (np.mod(f["scaleup_size"], f["tp"]) != 0)).to_numpy()


def _above_gemm_ceiling(f: pd.DataFrame) -> np.ndarray:
    """Rows whose MFU exceeds the GEMM ceiling times the share of the step the GPU computes."""
    eff = np.choose(f["precision"].map({"bf16": 0, "fp8": 1, "fp4": 2}).to_numpy(),
                    [f["gpu_gemm_eff_bf16"], f["gpu_gemm_eff_fp8"], f["gpu_gemm_eff_fp4"]])
    idle = f["time_pp_bubble_s"] + f["time_tp_comm_s"] + f["time_cp_comm_s"] + f["time_ep_comm_s"] \
        + f["time_pp_comm_s"] + f["time_dp_comm_exposed_s"] + f["time_optimizer_s"]
    busy = 1.0 - idle / f["step_time_s"]
    hfu = f["mfu"] * np.where(f["recompute"] == "full", 4.0 / 3.0, 1.0)
    return (hfu > eff * busy * (1 + _REL)).to_numpy() | (f["mfu"] >= eff).to_numpy()


@pytest.mark.parametrize("path", SPACES, ids=[p.stem for p in SPACES])
def test_front_holds_physical_invariants(path, tmp_path):
    spec, front = _front(path, tmp_path)
    whatif = {d.name for d in spec.dimensions} & {"scaleup_size", "nic_gbyte_s"}
    broken = {
        "schedule Megatron refuses, or bubble below the schedule's idle time": _schedule(front),
        "degrees that do not make the job": _whole_job(front),
        "MFU above the GEMM ceiling for the share of the step that computes": _above_gemm_ceiling(front),
        "infeasible design on the front": ~front["feasible"].to_numpy(bool),
    }
    for name, rows in broken_rows(front, whatif=whatif).items():
        mask = np.zeros(len(front), dtype=bool)
        mask[rows] = True
        broken[name] = mask
    shown = [c for c in MAPPING if c in front]
    failures = {name: front.loc[mask, shown].to_string(index=False) for name, mask in broken.items() if mask.any()}
    assert not failures, f"{path.name}: front designs break invariants:\n" + "\n".join(
        f"-- {name}:\n{table}" for name, table in failures.items())
