"""Step times from training logs: Megatron-LM's and NeMo's per-iteration lines.

Megatron-LM (megatron/training/training.py, ``training_log``; Megatron-Bridge prints the same line), one
line every ``--log-interval`` iterations, the time averaged over them::

     [2025-08-01 07:19:50] iteration      100/    5000 | consumed samples:        12800 | elapsed time per
     iteration (ms): 12936.1 | throughput per GPU (TFLOP/s/GPU): 118.7 | learning rate: 1.395349E-07 |
     global batch size:   128 | lm loss: 1.044022E+01 | ...

NeMo 2 (its PyTorch Lightning progress logger), one line per step::

    Training epoch 0, iteration 49/99 | lr: 7.496e-06 | global_batch_size: 128 | global_step: 49 |
    reduced_train_loss: 11.96 | train_step_timing in s: 12.39 | consumed_samples: 6400

(each line may carry a launcher's prefix: ``[default0]:``, ``0:``, a timestamp). The step time is the
median over the steady iterations: the first :data:`WARMUP_LINES` iteration lines are dropped (CUDA graph
capture, NCCL set-up and the allocator's first growth make them slow), and where a line gives its global
batch, only lines of the run's global batch count (a batch-size ramp-up's lines are another design).
Megatron's ``throughput per GPU (TFLOP/s/GPU)`` (its own FLOP count) is read too, as a cross-check.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import NamedTuple

from dse.errors import UserError

__all__ = ["WARMUP_LINES", "LogTiming", "read_log", "parse_log"]

#: iteration lines skipped at the start of a log
WARMUP_LINES = 3
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
_ITERATION = re.compile(r"iteration\s+(\d+)\s*/\s*\d+")
_MEGATRON_MS = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUMBER)
_NEMO_S = re.compile(r"train_step_timing in s:\s*" + _NUMBER)
_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*" + _NUMBER)
_BATCH = re.compile(r"global[ _]batch[ _]size:\s*(\d+)")


class LogTiming(NamedTuple):
    step_time_s: float  # median over the steady lines
    lines: int  # iteration lines used
    first_iteration: int  # the first iteration used
    tflop_s_per_gpu: float | None  # Megatron's own figure, median over the same lines (None where absent)
    kind: str  # "megatron" or "nemo"


def parse_log(text: str, global_batch: float | None = None, where: str = "log") -> LogTiming:
    """The steady step time of a log's text (module doc); a log without usable lines is a UserError."""
    rows = []  # (iteration, step s, tflop/s or None, batch or None, kind)
    for line in text.splitlines():
        it = _ITERATION.search(line)
        ms, s = _MEGATRON_MS.search(line), _NEMO_S.search(line)
        if not it or not (ms or s):
            continue
        step = float(ms.group(1)) / 1000.0 if ms else float(s.group(1))
        tf, batch = _TFLOPS.search(line), _BATCH.search(line)
        rows.append((int(it.group(1)), step, float(tf.group(1)) if tf else None, int(batch.group(1)) if batch else None,
                     "megatron" if ms else "nemo"))
    if not rows:
        raise UserError("no iteration lines with 'elapsed time per iteration (ms)' (Megatron-LM) or "
                        "'train_step_timing in s' (NeMo)", where=where)
    if global_batch is not None and any(r[3] is not None for r in rows):
        batches = sorted({r[3] for r in rows if r[3] is not None})
        rows = [r for r in rows if r[3] is None or r[3] == int(global_batch)]
        if not rows:
            raise UserError(f"logs global batch size {', '.join(map(str, batches))}, not the run's "
                            f"{int(global_batch)}", where=where)
    steady = rows[WARMUP_LINES:]
    if not steady:
        raise UserError(f"has {len(rows)} iteration line(s); the first {WARMUP_LINES} are warm-up, so at least "
                        f"{WARMUP_LINES + 1} are needed", where=where)
    bad = [r for r in steady if not r[1] > 0]
    if bad:
        raise UserError(f"iteration {bad[0][0]}: step time {bad[0][1]:g} s is not positive", where=where)
    tflops = [r[2] for r in steady if r[2] is not None]
    return LogTiming(statistics.median(r[1] for r in steady), len(steady), steady[0][0],
                     statistics.median(tflops) if tflops else None, steady[0][4])


def read_log(path: str | Path, global_batch: float | None = None, where: str | None = None) -> LogTiming:
    """:func:`parse_log` of a file; an unreadable file is a UserError naming it (and ``where``)."""
    label = f"{path}" + (f" ({where})" if where else "")
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read the log: {exc.strerror or exc}", where=label) from None
    return parse_log(text, global_batch, where=label)
