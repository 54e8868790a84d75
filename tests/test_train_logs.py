"""Step times from Megatron-LM and NeMo training logs (dse.train_logs), on lines in their real formats.

Megatron-LM's line is ``training_log`` in megatron/training/training.py (a timestamp, then
``iteration N/ M | consumed samples: ... | elapsed time per iteration (ms): ... | throughput per GPU
(TFLOP/s/GPU): ... | ... | global batch size: ... |``); NeMo 2's is its progress logger's ``Training epoch
E, iteration N/M | ... | global_batch_size: B | ... | train_step_timing in s: T``. Launchers prefix them
(``[default0]:``, ``0:``).
"""

from __future__ import annotations

import pytest

from dse.errors import UserError
from dse.train_logs import WARMUP_LINES, parse_log, read_log


def megatron(iteration: int, ms: float, tflops: float, batch: int = 128) -> str:
    return (f" [2025-08-01 07:{iteration % 60:02d}:50] iteration {iteration:8d}/{5000:8d} | consumed samples: "
            f"{iteration * batch:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): "
            f"{tflops:.1f} | learning rate: 1.395349E-07 | global batch size: {batch:5d} | lm loss: 1.044022E+01 | "
            "loss scale: 1.0 | grad norm: 26.305 | number of skipped iterations:   0 | number of nan iterations:   0 |")


def nemo(iteration: int, s: float, batch: int = 128, prefix: str = "[default0]:") -> str:
    return (f"{prefix}Training epoch 0, iteration {iteration}/99 | lr: 7.496e-06 | global_batch_size: {batch} | "
            f"global_step: {iteration} | reduced_train_loss: 11.96 | train_step_timing in s: {s} | "
            f"consumed_samples: {(iteration + 1) * batch}")


def test_megatron_median_of_the_steady_lines():
    """Iterations 10..70 logged every 10: the first three (19138.8, 13500.0, 12990.5 ms) are warm-up; the
    median of 12936.1, 12950.3, 12941.7 and 13890.2 (a slow one) is (12941.7 + 12950.3) / 2 = 12946.0 ms."""
    times = [19138.8, 13500.0, 12990.5, 12936.1, 12950.3, 12941.7, 13890.2]
    text = "\n".join(["[Rank 0] (after 10 iterations) memory (MB) | allocated: 10770.4 | max allocated: 15754.9"]
                     + [megatron(10 * (i + 1), t, 118.7 + i) for i, t in enumerate(times)]
                     + ["[after training is done] datetime: 2025-08-01 08:10:00"])
    got = parse_log(text, global_batch=128)
    assert WARMUP_LINES == 3
    assert got.step_time_s == pytest.approx(12.946, abs=1e-9)
    assert got.lines == 4 and got.first_iteration == 40 and got.kind == "megatron"
    assert got.tflop_s_per_gpu == pytest.approx((122.7 + 123.7) / 2)  # the median of 121.7 .. 124.7


def test_nemo_lines_with_a_launcher_prefix():
    """One line per step, 0..7; steps 3..7 take 12.39, 12.41, 12.38, 12.4, 12.39 s: median 12.39 s."""
    times = [30.2, 14.1, 12.6, 12.39, 12.41, 12.38, 12.4, 12.39]
    text = "\n".join(nemo(i, t, prefix="0: " if i % 2 else "[default0]:") for i, t in enumerate(times))
    got = parse_log(text, global_batch=128)
    assert got.step_time_s == pytest.approx(12.39) and got.lines == 5 and got.kind == "nemo"
    assert got.tflop_s_per_gpu is None


def test_a_batch_ramp_up_counts_only_the_runs_batch():
    """A ramp-up from 64 to 128: the 64 lines are another design; of the 128 ones the first three are warm-up."""
    lines = [megatron(i, 6000.0 + i, 100.0, batch=64) for i in range(1, 5)]
    lines += [megatron(i, t, 110.0) for i, t in zip(range(5, 11), [13000.0, 12990.0, 12980.0, 12900.0, 12910.0, 12920.0])]
    assert parse_log("\n".join(lines), global_batch=128).step_time_s == pytest.approx(12.91)
    with pytest.raises(UserError, match="logs global batch size 64, 128, not the run's 256"):
        parse_log("\n".join(lines), global_batch=256, where="run.log")


def test_logs_that_measure_nothing_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no iteration lines"):
        parse_log("loading checkpoint\nsaving checkpoint\n", where="x.log")
    with pytest.raises(UserError, match="has 3 iteration line"):
        parse_log("\n".join(megatron(i, 1000.0, 1.0) for i in (1, 2, 3)), global_batch=128, where="x.log")
    with pytest.raises(UserError, match="cannot read the log") as exc:
        read_log(tmp_path / "missing.log", 128, where="row 2")
    assert "missing.log (row 2)" in str(exc.value) and "\n" not in str(exc.value)
