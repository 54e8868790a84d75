"""What bounds a design: its step time split into compute, exposed communication and bubble, plus the
goodput losses (checkpoint stalls, rework and restarts after failures, spot preemptions, planned maintenance) as seconds per
step: ``step_time_s * lost_frac / goodput`` (goodput = 1 - the lost fractions)."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: (column, label, colour): the step time's parts, summing to step_time_s
STEP_PARTS = (
    ("time_compute_s", "compute", "#4C72B0"),
    ("time_tp_comm_s", "TP comm", "#DD8452"),
    ("time_cp_comm_s", "CP comm", "#937860"),
    ("time_ep_comm_s", "EP all-to-all", "#DA8BC3"),
    ("time_pp_comm_s", "PP p2p", "#8C8C8C"),
    ("time_dp_comm_exposed_s", "DP comm (exposed)", "#CCB974"),
    ("time_pp_bubble_s", "PP bubble", "#C44E52"),
    ("time_optimizer_s", "optimizer", "#64B5CD"),
)
#: goodput losses, as seconds per step
LOSS_PARTS = (
    ("lost_ckpt_frac", "checkpoint stalls", "#55A868"),
    ("lost_rework_frac", "failure rework", "#8172B3"),
    ("lost_restart_frac", "failure restarts", "#B0B0B0"),
    ("lost_planned_frac", "planned maintenance", "#E5D8BD"),
    ("lost_preempt_frac", "spot preemptions", "#8B0000"),
)


def breakdown(front: pd.DataFrame) -> pd.DataFrame:
    """Seconds per step of every part (columns = labels) for each front design; absent parts are dropped."""
    out = {}
    for col, label, _ in STEP_PARTS:
        if col in front.columns:
            out[label] = front[col].to_numpy(dtype=np.float64)
    if "step_time_s" in front.columns and "goodput" in front.columns:
        step = front["step_time_s"].to_numpy(dtype=np.float64)
        good = np.maximum(front["goodput"].to_numpy(dtype=np.float64), 1e-9)
        for col, label, _ in LOSS_PARTS:
            if col in front.columns:
                out[label] = step * front[col].to_numpy(dtype=np.float64) / good
    frame = pd.DataFrame(out, index=front.index).fillna(0.0)
    return frame.loc[:, (frame > 0).any(axis=0)] if len(frame) else frame


def colours() -> dict[str, str]:
    return {label: c for _, label, c in STEP_PARTS + LOSS_PARTS}


def is_loss(label: str) -> bool:
    return label in {lab for _, lab, _ in LOSS_PARTS}
