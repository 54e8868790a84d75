"""The quantization recipes' traffic (objectives/training/quantization.py) against hand derivations."""

import numpy as np
import pytest

import objectives
from objectives.training import quantization as q


def _eval(**row):
    base = dict(model="llama3-8b", n_gpus=8, global_batch=8, seq_len=8192, tp=1, pp=1, cp=1, ep=1, vp=1,
                micro_batch=1, zero_stage=1, recompute="none", sequence_parallel=0)
    return objectives.evaluate(dict(base, **row))


def test_nvfp4_quantization_bytes_per_element():
    """NVFP4 (arXiv 2509.25149 Sec. 4; Transformer Engine NVFP4BlockScaling) per activation element: one pass
    reads the tensor (2 B) for its amax and the amax after the weight-gradient copy's Hadamard transform, a
    second reads it again (2 B) and writes two 4-bit copies (0.5 + 0.5 B) with an E4M3 scale per 16 elements
    each (2/16 B): 2 + 2 + 1 + 0.125 = 5.125 B. A weight: amax 2, read 2, one 16x16-block-scaled copy 0.5 + 1/256."""
    blackwell, hopper = np.array([9000.0]), np.array([np.nan])
    assert q.cast_bytes(np.array([2.0]), np.array([3.0]), blackwell)[0] == pytest.approx(5.125)
    assert q.weight_cast_bytes(np.array([2.0]), np.array([0.0]), blackwell)[0] == pytest.approx(4.5 + 1 / 256)
    # fp8 on Blackwell (one per-tensor copy serves both GEMM layouts): delayed 2 + 1 B; current scaling one more
    # read of the 16-bit tensor; blockwise two copies with an fp32 scale per 128; MXFP8 two copies with a 1-byte
    # scale per 32 each; bf16 nothing
    prec, recipe = np.array([1.0, 1.0, 1.0, 1.0, 0.0]), np.array([0.0, 1.0, 2.0, 3.0, 3.0])
    got = q.cast_bytes(prec, recipe, np.full(5, 9000.0))
    assert got == pytest.approx([3.0, 5.0, 4.0625, 4.0625, 0.0])
    # Hopper's fp8 tensor cores read K-major operands only: a per-tensor recipe writes the transpose too (1 B)
    assert q.cast_bytes(prec[:2], recipe[:2], np.full(2, np.nan)) == pytest.approx([4.0, 6.0])
    assert q.cast_bytes(prec[2:4], recipe[2:4], hopper.repeat(2)) == pytest.approx([4.0625, 4.0625])


def test_current_scaling_pays_one_amax_read_per_quantized_element():
    """Llama 3 8B (h 4,096, 32 query and 8 KV heads of 128, SwiGLU d_ff 14,336), tp 1, 8,192 tokens a
    micro-batch, on B200 (HBM 7.7 TB/s as catalogued, read from the row). Per token and layer, the elements a
    recipe quantizes: forward, the QKV input h, the out-projection input ctx 4,096, the FC1 input h and the FC2
    input d_ff: 26,624; backward, the output gradients of QKV (h), of the out-projection (q + k + v = 6,144),
    of FC1 (h) and of FC2 (2 d_ff, gate and up): 43,008; in all 69,632. Current scaling reads each of them
    once more for its amax (2 B): the micro-batch's compute grows by 32 layers x 2 x 69,632 x 8,192 B / HBM
    bandwidth. The weights add nothing: Megatron-Core keeps them in fp8 (fp8_param_gather), quantized in the
    optimizer step, not per micro-batch; a stack that casts them per micro-batch (PyTorch FSDP) reads its
    218,103,808 weights per layer once more too."""
    delayed = _eval(gpu="b200", precision="fp8", fp8_recipe="tensor_delayed")
    current = _eval(gpu="b200", precision="fp8", fp8_recipe="tensor_current")
    hbm = delayed["gpu_hbm_tbyte_s"][0] * 1e12
    expected = 32 * 2 * 69632 * 8192 / hbm
    assert current["time_compute_mb_s"][0] - delayed["time_compute_mb_s"][0] == pytest.approx(expected, rel=1e-9)
    fsdp = [_eval(gpu="b200", precision="fp8", fp8_recipe=r, stack="pytorch-fsdp") for r in ("tensor_delayed",
                                                                                              "tensor_current")]
    expected_fsdp = 32 * (2 * 69632 * 8192 + 2 * 218103808) / hbm
    assert fsdp[1]["time_compute_mb_s"][0] - fsdp[0]["time_compute_mb_s"][0] == pytest.approx(expected_fsdp, rel=1e-9)


def test_blank_recipe_is_mxfp8_on_blackwell_and_current_scaling_on_hopper():
    """Megatron-Bridge's recipes: fp8_mx on Blackwell, fp8_cs on Hopper; a blank cell means that."""
    for gpu, recipe in (("b200", "mxfp8"), ("h100-sxm", "tensor_current")):
        blank = _eval(gpu=gpu, precision="fp8")
        named = _eval(gpu=gpu, precision="fp8", fp8_recipe=recipe)
        assert blank["step_time_s"][0] == named["step_time_s"][0]


def test_mxfp8_needs_block_scaled_tensor_cores():
    """Hopper's tensor cores take one scale per operand: an MXFP8 run on an H100 is infeasible, with a reason
    that names the recipes it can run."""
    out = objectives.search_mapping(dict(model="llama3-8b", gpu="h100-sxm", n_gpus=8, global_batch=128, precision="fp8",
                                         fp8_recipe="mxfp8"))
    assert not out["feasible"][0]
    assert out["con_precision"][0] == 2
    assert "MXFP8" in out["infeasible_reason"][0] and "tensor_current" in out["infeasible_reason"][0]


def test_low_precision_weights_halve_the_weights_and_their_gather():
    """Megatron-Bridge keeps fp8 weights and gathers them in fp8 (fp8_param_gather; mixed_precision.py), with
    bf16 gradients (grad_reduce_in_fp32 = False in its benchmarks). Llama 3 8B (8,030,261,248 parameters) on
    64 B200 at tp 1, ZeRO-1: the weights held are 1 B each in MXFP8 with a 1-byte scale per 32 (1.03125 B:
    8.281 GB), 2 B in bf16 (16.06 GB) and in blockwise fp8 (its recipe gathers bf16); the gradients 2 B
    (16.06 GB) in every precision."""
    n = 8_030_261_248
    row = dict(gpu="b200", n_gpus=64, global_batch=128, stack="megatron-core")
    mx = _eval(precision="fp8", fp8_recipe="mxfp8", **row)
    bf = _eval(precision="bf16", **row)
    block = _eval(precision="fp8", fp8_recipe="blockwise", **row)
    gb = 1e9
    assert mx["mem_weights_gb"][0] * gb == pytest.approx(n * (1 + 1 / 32), rel=1e-6)
    assert bf["mem_weights_gb"][0] * gb == pytest.approx(n * 2.0, rel=1e-6)
    assert block["mem_weights_gb"][0] == bf["mem_weights_gb"][0]
    for out in (mx, bf, block):
        assert out["mem_grads_gb"][0] * gb == pytest.approx(n * 2.0, rel=1e-6)
    # Hopper keeps the transposed per-tensor copy beside the weight: 2 B
    h100 = _eval(precision="fp8", fp8_recipe="tensor_current", **dict(row, gpu="h100-sxm"))
    assert h100["mem_weights_gb"][0] * gb == pytest.approx(n * 2.0, rel=1e-6)
    # a stack that keeps 16-bit weights (PyTorch FSDP) holds 2 B in fp8 too
    fsdp = _eval(precision="fp8", fp8_recipe="tensor_delayed", **dict(row, stack="pytorch-fsdp", zero_stage=1))
    assert fsdp["mem_weights_gb"][0] * gb == pytest.approx(n * 2.0, rel=1e-6)


def test_blackwell_gemm_rates_are_their_measured_mamf():
    """A large fp8 GEMM runs at the GPU's measured MAMF (stas00/ml-engineering, X27): B200 at 1,000 W
    3,432.5 TFLOP/s; GB200 at 1,200 W 3,615.6 (0.723 of its 5,000 spec, not B200's 0.763 fraction: the higher
    power limit does not sustain the higher spec clock); GB300 at 1,400 W has no MAMF published: B300's
    3,353.3 at 1,100 W (the same Blackwell Ultra die) at the cube root of the power ratio,
    3,353.3 x (1400/1100)^(1/3) = 3,634.0 (objectives/catalog/power_limit.py). Llama 3.1 405B's layers at
    tp 1 and 8,192 tokens fill the GEMM to (w / (w + n)) (t / (t + n)) with n = gemm_n_half; the rates'
    ratios are the MAMFs' exactly."""
    row = dict(model="llama3.1-405b", n_gpus=64, global_batch=64, precision="fp8", fp8_recipe="mxfp8")
    rates = {g: _eval(gpu=g, **row)["gemm_flops_per_s"][0] for g in ("b200", "gb200", "gb300")}
    assert rates["gb200"] / rates["b200"] == pytest.approx(3615.6 / 3432.5, rel=2e-3)
    assert rates["gb300"] / rates["gb200"] == pytest.approx(0.727 / 0.723, rel=1e-9)  # the catalog's rounded fractions
    assert rates["gb300"] / rates["gb200"] == pytest.approx(3634.0 / 3615.6, rel=2e-3)
    assert 0.9 * 3615.6e12 < rates["gb200"] < 3615.6e12  # the fill factors of 16K-wide weights and 8K rows
