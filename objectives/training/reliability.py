"""Failures and goodput: interruptions that grow with GPU count, checkpoint interval, time lost, real time to train.

Interruption rate (Llama 3 report, 2024, via hardware-catalog 5.1, S95/S96): 419 unexpected and 47
planned interruptions in 54 days on 16,384 H100s, i.e. one unexpected interruption per ``gpu_mtbi_h`` =
50,677 GPU-hours and one planned per ``gpu_planned_mtbi_h`` = 451,780. Failures are independent per GPU, so
a job of n GPUs is interrupted n times as often: a 16,384-GPU job every 50,677/16,384 = 3.09 h unexpectedly
and every 2.78 h counting planned stops (the report's 466 in 54 days). Epoch's H100 MTBF of 50,000 hours
(S61) agrees.

Checkpoint interval: ``ckpt_interval_s`` from objectives.training.checkpoint (Young 1974 / Daly 2006, S100, or a
fixed ``ckpt_every_s``; never under three checkpoint writes nor one training step).

Spot preemption (objectives.training.preemption): a preemptible row's job is also preempted, at lp =
nodes / ``spot_preempt_mtbi_h_per_node`` (per hour), each preemption costing a failure's restart and rework
plus ``spot_reacquire_s`` (D), the wait for the lost capacity. Its M is 1 / (lf + lp) with lf = n_gpus /
``gpu_mtbi_h``, and its restart R + D lp / (lf + lp); lp = 0 on every other row.

Goodput, the fraction of wall-clock time that advances training: Daly's (2006) expected wall time per
segment of T seconds of work, with exponential interruptions and a restart R (``restart_fixed_s`` plus reading
the checkpoint back) that can itself be interrupted:  E = M e^(R/M) (e^((T+delta)/M) - 1). An asynchronous
checkpoint becomes durable only ``ckpt_lag_s`` after it is taken, which adds that lag to the work each
interruption loses (folded into R). Planned interruptions cost a checkpoint and a restart each, every M_p. So

    goodput = T / E  x  M_p / (M_p + R + delta)        time_to_train_days = ideal days / goodput

The lost time, 1 - goodput, is split in proportion to the first-order terms of hardware-catalog 5.3
(checkpoint stalls delta/(T+delta), failure rework ((T+delta)/2 + lag) lf, failure restarts R lf,
preemptions ((T+delta)/2 + lag + R + D) lp, planned stops (R+delta)/M_p), so goodput + lost_*_frac = 1.
These losses are apart from the step-time breakdown.

The preemption figures are measured on fleets of 1 to 32 nodes; a job of hundreds or thousands lies far
outside them, so ``goodput_preempt_min`` / ``_max`` are the goodput at the range's ends (the most frequent
preemptions, ``_lo`` MTBI, with the slowest re-acquisition, ``spot_reacquire_s_hi``; and the reverse), the
checkpoint interval held at the central figure's; objectives.training.intervals widens the time and cost intervals by
them. Where lp D >> 1 (a fleet whose nodes are preempted faster than it gets them back) the job is almost
never whole and the goodput falls as e^(-lp D): the traces' own fleets were whole 21% of the time (32 nodes,
X22).

A spot job that is preempted faster than it recovers is infeasible (``con_preempt``). In Daly's E the factor
e^(R/M) is the expected number of tries a restart of R seconds takes under exponential interruptions of mean
M (each try finishes with probability e^(-R/M)); its preemption share, x = lp (R + lag + D), is the number of
preemptions expected during one recovery (restart, the lag's rework, re-acquisition). At x >= 1 the job's
mean time between preemptions, 1 / lp, is no longer than one recovery: a recovery is more often cut short
than finished (it finishes untouched with probability e^(-x) <= 1/e), each costs e^x tries, and the goodput,
below e^(-x), falls to 1e-290 at a few thousand nodes. ``con_preempt`` = x - 1 (-1 on a row that is not
preemptible); such a row's time_to_train_days (and n_interruptions) is NaN, not ideal / goodput: the model
gives no run that does not progress a time, and its costs follow (NaN), as an unpriced rental's do.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model
from objectives.training.preemption import PREEMPT_COLUMNS, job_preempt_rate_per_s

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
        "ckpt_lag_s", "ckpt_read_s", "time_to_train_ideal_days", *PREEMPT_COLUMNS, "spot_preempt_mtbi_h_per_node",
        "spot_preempt_mtbi_h_per_node_lo", "spot_preempt_mtbi_h_per_node_hi", "spot_reacquire_s", "spot_reacquire_s_lo",
        "spot_reacquire_s_hi", "feasible",
    )
    provides = {
        "job_mtbf_h": "h; mean time between unexpected interruptions of the whole job",
        "job_mtti_h": "h; mean time between interruptions of the job, planned ones and preemptions included",
        "job_mtbp_h": "h; mean time between spot preemptions of the job (inf where it is not preemptible)",
        "restart_s": "s; from an interruption back to training: fixed restart plus checkpoint read",
        "goodput": "fraction; wall-clock time that advances training (Daly 2006)",
        "lost_ckpt_frac": "fraction; wall-clock time in checkpoint stalls",
        "lost_rework_frac": "fraction; wall-clock time redoing work lost since the last durable checkpoint",
        "lost_restart_frac": "fraction; wall-clock time restarting after unexpected interruptions",
        "lost_planned_frac": "fraction; wall-clock time in planned stops (checkpoint and restart)",
        "lost_preempt_frac": "fraction; wall-clock time lost to spot preemptions: rework, restart and re-acquiring "
                             "the capacity (0 where not preemptible)",
        "goodput_preempt_min": "fraction; goodput at the preemption figures' worst end (most frequent, slowest "
                               "back; = goodput where not preemptible)",
        "goodput_preempt_max": "fraction; goodput at the preemption figures' best end (= goodput where not preemptible)",
        "time_to_train_days": "days; train_tokens including failures, restarts and checkpoints (ideal / goodput)",
        "n_interruptions": "count; interruptions expected over the run, planned ones and preemptions included",
        "con_preempt": "preemptions; those expected during one recovery (restart, rework of the lag, re-acquiring the "
                       "capacity) minus 1: > 0 where a spot job is preempted faster than it recovers (<= 0 feasible)",
        "feasible": "bool; the mapping and the rental are feasible and a spot job recovers faster than it is preempted",
    }

    def compute(self, c, cal):
        n = c["n_gpus"]
        fail = n / (c["gpu_mtbi_h"] * SECONDS_PER_HOUR)  # lf, per second
        preempt = job_preempt_rate_per_s(c, c["spot_preempt_mtbi_h_per_node"])  # lp
        mp = c["gpu_planned_mtbi_h"] * SECONDS_PER_HOUR / n
        delta, lag = c["ckpt_stall_s"], c["ckpt_lag_s"]
        restart = c["restart_fixed_s"] + c["ckpt_read_s"]
        interval = c["ckpt_interval_s"]
        stop = restart + delta  # a planned interruption: a checkpoint and a restart
        planned = 1.0 / (1.0 + stop / mp)  # = M_p / (M_p + R + delta); 1 with no planned stops

        def goodput_at(lp, reacquire):
            """Daly's goodput with failures and preemptions at rate lp (module doc)."""
            rate = fail + lp
            return daly_goodput(interval, delta, restart + lag + reacquire * lp / np.where(rate > 0, rate, 1.0),
                                1.0 / rate) * planned

        goodput = goodput_at(preempt, c["spot_reacquire_s"])
        segment = interval + delta
        rework = segment / 2.0 + lag
        terms = (
            delta / segment,
            rework * fail,
            restart * fail,
            (rework + restart + c["spot_reacquire_s"]) * preempt,
            stop / mp,
        )
        total = terms[0] + terms[1] + terms[2] + terms[3] + terms[4]
        share = (1.0 - goodput) / np.where(total > 0, total, 1.0)
        mtti_h = 1.0 / (n / c["gpu_mtbi_h"] + n / c["gpu_planned_mtbi_h"] + preempt * SECONDS_PER_HOUR)
        # preemptions expected during one recovery, minus 1 (module doc): > 0, the run does not progress
        con_preempt = preempt * (restart + lag + c["spot_reacquire_s"]) - 1.0
        stuck = con_preempt > 0
        with np.errstate(divide="ignore", over="ignore"):
            days = np.where(stuck, np.nan, c["time_to_train_ideal_days"] / goodput)
            mtbp_h = 1.0 / (preempt * SECONDS_PER_HOUR)
            interruptions = days * 24.0 / mtti_h
        return {
            "job_mtbf_h": 1.0 / (fail * SECONDS_PER_HOUR),
            "job_mtti_h": mtti_h,
            "job_mtbp_h": mtbp_h,
            "restart_s": restart,
            "goodput": goodput,
            "lost_ckpt_frac": terms[0] * share,
            "lost_rework_frac": terms[1] * share,
            "lost_restart_frac": terms[2] * share,
            "lost_preempt_frac": terms[3] * share,
            "lost_planned_frac": terms[4] * share,
            "goodput_preempt_min": goodput_at(job_preempt_rate_per_s(c, c["spot_preempt_mtbi_h_per_node_lo"]),
                                              c["spot_reacquire_s_hi"]),
            "goodput_preempt_max": goodput_at(job_preempt_rate_per_s(c, c["spot_preempt_mtbi_h_per_node_hi"]),
                                              c["spot_reacquire_s_lo"]),
            "time_to_train_days": days,
            "n_interruptions": interruptions,
            "con_preempt": con_preempt,
            "feasible": c["feasible"] & ~stuck,
        }
