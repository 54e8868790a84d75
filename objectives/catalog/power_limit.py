"""The GEMM rate a board power limit sustains, for a GPU whose matmul rate nobody has measured.

A dense GEMM runs Blackwell at its power cap, not its spec clock: GB200 at 1,200 W reaches 72% of its fp8
peak where B200 at 1,000 W reaches 76% (X27). At the cap the clock is what the power buys: CMOS switching
power is P = a C V^2 f (Weste & Harris, *CMOS VLSI Design*, 4th ed., Sec. 5.1) and along the DVFS curve the
voltage rises with the clock (V ~ f), so P ~ f^3 and the sustained clock, hence the GEMM rate, goes as the
cube root of the power limit. Checked on the measured pairs (X27): B200 1,000 W -> GB200 1,200 W predicts
1.063x, measured 1.053x (fp8) and 1.044x (bf16); B200 -> B300 1,100 W predicts 1.032x, measured 0.977x and
1.014x. Used for GB300 (1,400 W), whose GEMMs are B300's Blackwell Ultra die at a higher cap (gpus.yaml).
"""

from __future__ import annotations

__all__ = ["power_limited_tflop_s"]


def power_limited_tflop_s(measured_tflop_s: float, measured_tdp_w: float, tdp_w: float) -> float:
    """The GEMM rate (TFLOP/s) of the same die at ``tdp_w``, from one measured at ``measured_tdp_w``: x (P/P0)^(1/3)."""
    if measured_tflop_s <= 0 or measured_tdp_w <= 0 or tdp_w <= 0:
        raise ValueError(f"power_limited_tflop_s needs positive figures, got {measured_tflop_s}, "
                         f"{measured_tdp_w} W, {tdp_w} W")
    return measured_tflop_s * (tdp_w / measured_tdp_w) ** (1.0 / 3.0)
