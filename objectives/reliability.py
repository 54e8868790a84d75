"""Failures and goodput: interruptions that grow with GPU count, checkpoint interval, time lost, real time to train.

Interruption rate (Llama 3 report, 2024, via hardware-catalog 5.1, S95/S96): 419 unexpected and 47
planned interruptions in 54 days on 16,384 H100s, i.e. one unexpected interruption per ``gpu_mtbi_h`` =
50,677 GPU-hours and one planned per ``gpu_planned_mtbi_h`` = 451,780. Failures are independent per GPU, so
a job of n GPUs is interrupted n times as often: a 16,384-GPU job every 50,677/16,384 = 3.09 h unexpectedly
and every 2.78 h counting planned stops (the report's 466 in 54 days). Epoch's H100 MTBF of 50,000 hours
(S61) agrees.

Checkpoint interval: ``ckpt_interval_s`` from objectives.checkpoint (Young 1974 / Daly 2006, S100, or a
fixed ``ckpt_every_s``; never under three checkpoint writes nor one training step).

Goodput, the fraction of wall-clock time that advances training: Daly's (2006) expected wall time per
segment of T seconds of work, with exponential failures and a restart R (``restart_fixed_s`` plus reading
the checkpoint back) that can itself fail:  E = M e^(R/M) (e^((T+delta)/M) - 1). An asynchronous
checkpoint becomes durable only ``ckpt_lag_s`` after it is taken, which adds that lag to the work each
failure loses (folded into R). Planned interruptions cost a checkpoint and a restart each, every M_p. So

    goodput = T / E  x  M_p / (M_p + R + delta)        time_to_train_days = ideal days / goodput

The lost time, 1 - goodput, is split in proportion to the first-order terms of hardware-catalog 5.3
(checkpoint stalls delta/(T+delta), rework ((T+delta)/2 + lag)/M, restarts R/M, planned stops
(R+delta)/M_p), so goodput + lost_*_frac = 1. These losses are apart from the step-time breakdown.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model

__all__ = ["Reliability", "daly_goodput"]

SECONDS_PER_HOUR = 3600.0
_EXP_MAX = 700.0  # exp() stays finite; beyond it the goodput is 0 to double precision anyway


def daly_goodput(interval_s, delta_s, restart_s, mtbf_s):
    """Useful fraction T / E with E = M e^(R/M) (e^((T+d)/M) - 1) (Daly 2006, exponential failures)."""
    m = np.asarray(mtbf_s, dtype=np.float64)
    t = np.asarray(interval_s, dtype=np.float64)
    wall = m * np.exp(np.minimum(restart_s / m, _EXP_MAX)) * np.expm1(np.minimum((t + delta_s) / m, _EXP_MAX))
    return t / wall


class Reliability(Model):
    requires = (
        "n_gpus", "gpu_mtbi_h", "gpu_planned_mtbi_h", "restart_fixed_s", "ckpt_interval_s", "ckpt_stall_s",
        "ckpt_lag_s", "ckpt_read_s", "time_to_train_ideal_days",
    )
    provides = {
        "job_mtbf_h": "h; mean time between unexpected interruptions of the whole job",
        "job_mtti_h": "h; mean time between interruptions of the job, planned ones included",
        "restart_s": "s; from an interruption back to training: fixed restart plus checkpoint read",
        "goodput": "fraction; wall-clock time that advances training (Daly 2006)",
        "lost_ckpt_frac": "fraction; wall-clock time in checkpoint stalls",
        "lost_rework_frac": "fraction; wall-clock time redoing work lost since the last durable checkpoint",
        "lost_restart_frac": "fraction; wall-clock time restarting after unexpected interruptions",
        "lost_planned_frac": "fraction; wall-clock time in planned stops (checkpoint and restart)",
        "time_to_train_days": "days; train_tokens including failures, restarts and checkpoints (ideal / goodput)",
        "n_interruptions": "count; interruptions expected over the run, planned ones included",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        m = c["gpu_mtbi_h"] * SECONDS_PER_HOUR / n
        mp = c["gpu_planned_mtbi_h"] * SECONDS_PER_HOUR / n
        delta, lag = c["ckpt_stall_s"], c["ckpt_lag_s"]
        restart = c["restart_fixed_s"] + c["ckpt_read_s"]
        interval = c["ckpt_interval_s"]
        stop = restart + delta  # a planned interruption: a checkpoint and a restart
        planned = 1.0 / (1.0 + stop / mp)  # = M_p / (M_p + R + delta); 1 with no planned stops
        goodput = daly_goodput(interval, delta, restart + lag, m) * planned
        segment = interval + delta
        terms = (
            delta / segment,
            (segment / 2.0 + lag) / m,
            restart / m,
            stop / mp,
        )
        total = terms[0] + terms[1] + terms[2] + terms[3]
        share = (1.0 - goodput) / np.where(total > 0, total, 1.0)
        days = c["time_to_train_ideal_days"] / goodput
        mtti_h = 1.0 / (n / c["gpu_mtbi_h"] + n / c["gpu_planned_mtbi_h"])
        return {
            "job_mtbf_h": m / SECONDS_PER_HOUR,
            "job_mtti_h": mtti_h,
            "restart_s": restart,
            "goodput": goodput,
            "lost_ckpt_frac": terms[0] * share,
            "lost_rework_frac": terms[1] * share,
            "lost_restart_frac": terms[2] * share,
            "lost_planned_frac": terms[3] * share,
            "time_to_train_days": days,
            "n_interruptions": days * 24.0 / mtti_h,
        }
