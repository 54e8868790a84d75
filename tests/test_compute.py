"""Compute time and utilisation against hand derivations and the GPU's GEMM ceiling."""

import itertools

import numpy as np
import pytest

import objectives
from objectives.calibration import Calibration

CAL = Calibration.load()


def _eval(**row):
    return objectives.evaluate(dict(dict(gpu="h100-sxm", ep=1, cp=1, vp=1, zero_stage=1, micro_batch=1), **row))


def test_selective_recompute_reruns_the_unfused_attention_core():
    """Korthikanti et al. Sec. 4.2.2: selective recompute re-runs QK^T, softmax, dropout and AV in the
    backward. Unfused (megatron-2021) that is one more forward of the core per layer: the micro-batch's
    compute grows by layers_per_stage x time_attn_fwd_s (12 x t_attn here). Flash attention's backward
    recomputes the scores anyway and keeps no s x s activations, so there it costs nothing."""
    row = dict(model="gpt3-175b", n_gpus=64, global_batch=64, seq_len=2048, tp=8, pp=8)
    none = _eval(**row, stack="megatron-2021", recompute="none")
    sel = _eval(**row, stack="megatron-2021", recompute="selective")
    assert sel["time_compute_mb_s"][0] - none["time_compute_mb_s"][0] == pytest.approx(12 * none["time_attn_fwd_s"][0], rel=1e-9)
    assert none["time_attn_fwd_s"][0] > 0
    fused = [_eval(**row, stack="megatron-core", recompute=r)["time_compute_mb_s"][0] for r in ("none", "selective")]
    assert fused[0] == fused[1]


def test_output_layer_runs_in_bf16_in_fp8_recipes():
    """Megatron-Core's output layer is a plain ColumnParallelLinear outside TE's fp8 autocast. Llama-3-8B,
    tp 1, 8,192 tokens on an H100: 3 passes of 2 x 8,192 x 4,096 x 128,256 = 8.607e12 FLOP each at the bf16
    GEMM rate 989e12 x 0.802 x 4,096 / (4,096 + gemm_n_half) (the narrower weight width, h) x 8,192 / (8,192 +
    gemm_n_half) (its rows, the micro-batch's tokens), plus 3 passes of 8 bytes per fp32 logit,
    24 x 8,192 x 128,256 / 3.35e12 s: the same in an fp8 and a bf16 run (it used the fp8 rate)."""
    rate = 989e12 * 0.802 * 4096 / (4096 + CAL.gemm_n_half) * 8192 / (8192 + CAL.gemm_n_half)
    expected = 3 * 2 * 8192 * 4096 * 128256 / rate + 24 * 8192 * 128256 / 3.35e12
    row = dict(model="llama3-8b", n_gpus=8, global_batch=8, seq_len=8192, tp=1, pp=1, recompute="selective")
    for precision in ("bf16", "fp8"):
        assert _eval(**row, precision=precision)["time_logits_s"][0] == pytest.approx(expected, rel=1e-9)


def test_llama3_70b_at_128k_mfu_under_the_gemm_ceiling():
    """Llama-3-70B at 128K tokens on 512 H100 (searched mapping) reported MFU 0.87 with the full s x s
    counted while the model computed the causal half. On the causal count it stays under the H100's bf16
    GEMM efficiency 0.802; with the full s x s (mfu_full_attn) the attention core counts double: at s =
    131,072 the core is 4 s x 8,192 = 4.29e9 FLOP per token per layer against 2 x 855.6e6 for the matmuls,
    so the full count is (2 x 0.856e9 + 4.29e9) / (2 x 0.856e9 + 2.15e9) = 1.55x the causal one (layers
    only; the logits dilute it slightly)."""
    out = objectives.search_mapping(dict(model=["llama3-70b"], gpu="h100-sxm", n_gpus=512, global_batch=256,
                                         seq_len=131072, precision="bf16"))
    assert out["feasible"][0]
    assert out["mfu"][0] <= 0.802
    ratio = out["mfu_full_attn"][0] / out["mfu"][0]
    assert ratio == pytest.approx((2 * 855_638_016 + 4 * 131072 * 8192) / (2 * 855_638_016 + 2 * 131072 * 8192), rel=0.01)


MODELS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b")
GPUS = ("h100-sxm", "a100-sxm-80gb", "b200", "gb200")
SEQS = (2048, 8192, 32768, 131072)


@pytest.mark.parametrize("cal", [CAL, CAL.replace(attn_kernel_scale=(3.0, 3.0, 3.0, 3.0), attn_seq_half=16.0)],
                         ids=["fitted", "attention-factor-past-its-box"])
def test_mfu_never_exceeds_the_gemm_ceiling(cal):
    """Over a grid of designs (4 models x 4 GPUs x 4 sequence lengths x bf16/fp8 x 4 stacks, best mapping of
    each), MFU is at most the GPU's measured GEMM efficiency at the run's precision (the fastest any of its
    kernels runs), also with the attention kernels' fitted factor at 3x, twice the top of its box (without
    the cap on the attention rate some designs then exceed the ceiling by up to 0.27); the
    full-attention count is never below it."""
    grid = list(itertools.product(MODELS, GPUS, SEQS, ("bf16", "fp8"), objectives.calibration.STACKS))
    table = {k: np.array([g[i] for g in grid]) for i, k in enumerate(("model", "gpu", "seq_len", "precision", "stack"))}
    table.update(seq_len=table["seq_len"].astype(float), n_gpus=256, global_batch=256)
    out = objectives.search_mapping(table, cal=cal)
    ok = out["feasible"]
    assert ok.sum() > 200
    ceiling = np.where(out["precision"] == "fp8", out["gpu_gemm_eff_fp8"], out["gpu_gemm_eff_bf16"])
    assert np.all(out["mfu"][ok] <= ceiling[ok] + 1e-12), np.max(out["mfu"][ok] - ceiling[ok])
    assert np.all(out["mfu_full_attn"][ok] >= out["mfu"][ok])


def test_dropout_adds_its_masks_and_slows_the_flash_kernel():
    """Megatron-Core fuses bias, dropout and the residual add (bias_dropout_add): dropout adds no pass of its
    own, only the two 1-byte masks it writes per h-wide element: Llama-3-8B, tp 1, 8,192 tokens on an H100,
    2 B x 8,192 x 4,096 / 3.35e12 B/s = 20.03 us more per layer forward, twice that backward. Attention
    dropout inside the flash kernel draws a Philox number per score forward and again backward: the kernel
    at 80% of its no-dropout rate forward and 65% backward (flash-attention PR #2597, the midpoints of
    75-85% and 60-70%), so the core's forward t grows to t / 0.80 and its 2.5 t backward to 2.5 t / 0.65."""
    row = dict(model="llama3-8b", n_gpus=8, global_batch=8, seq_len=8192, tp=1, pp=1, recompute="selective")
    off, on = _eval(**row, dropout=0.0), _eval(**row, dropout=0.1)
    per_layer = 2 * 8192 * 4096 / 3.35e12
    t = off["time_attn_fwd_s"][0]
    assert on["time_attn_fwd_s"][0] == pytest.approx(t / 0.80, rel=1e-9)
    assert on["time_layer_fwd_s"][0] - off["time_layer_fwd_s"][0] == pytest.approx(per_layer + t * (1 / 0.80 - 1), rel=1e-6)
    core = t * (1 / 0.80 + 2.5 / 0.65 - 3.5)
    assert on["time_compute_mb_s"][0] - off["time_compute_mb_s"][0] == pytest.approx(32 * (3 * per_layer + core), rel=1e-6)
    # unfused attention (megatron-2021) already streams its dropout through HBM with the scores
    # (UNFUSED_SCORE_BYTES): its core is the same with or without the flag
    old = dict(row, stack="megatron-2021")
    assert _eval(**old, dropout=0.1)["time_attn_fwd_s"][0] == _eval(**old, dropout=0.0)["time_attn_fwd_s"][0]


def test_unfused_attention_streams_13_bytes_per_score_and_takes_its_stack_factor():
    """Unfused attention (megatron-2021), GPT-3 175B at s = 2,048, tp 8, on an A100 80 GB (2.039 TB/s): per
    layer forward the scores stream 13 B each (QK^T writes 2, softmax r+w 4, dropout r+w+mask 5, AV reads 2;
    the AV read was missing), 13 x 2,048 x 2,048 x 96 / 8 = 654.3 MB, 0.3209 ms; the batched GEMMs take
    the rest, and the stack's fitted attn_kernel_scale scales their rate (it entered no term before, so
    the fit could not move it for this stack)."""
    row = dict(model="gpt3-175b", gpu="a100-sxm-80gb", n_gpus=64, global_batch=64, seq_len=2048, tp=8, pp=8,
               recompute="full", stack="megatron-2021")
    scores_s = 13 * 2048 * 2048 * 96 / 8 / 2.039e12
    assert scores_s == pytest.approx(0.3209e-3, rel=1e-3)
    row.update(ep=1, cp=1, vp=1, zero_stage=1, micro_batch=1)
    times = []
    for factor in (1.0, 2.0):
        scale = CAL.attn_kernel_scale[:2] + (factor,) + CAL.attn_kernel_scale[3:]
        times.append(objectives.evaluate(row, cal=CAL.replace(attn_kernel_scale=scale))["time_attn_fwd_s"][0])
    assert times[1] - scores_s == pytest.approx((times[0] - scores_s) / 2, rel=1e-9)


def test_ring_attention_pays_its_kernel_calls_and_merges():
    """Llama-3-70B at 131,072 tokens, tp 4, cp 8 on H100 (bf16, megatron-core: cuDNN / FA3 class). A rank
    holds 16,384 tokens and runs 8 kernel calls a pass of 131,072 / 16 = 8,192 keys per query (TE
    AttnFuncWithCPAndKVP2P, causal load balancing), each rolling off with the kernel's 200 keys: the
    rate is 989e12 x 0.53 (gpu_attn_eff_fa3) x attn_kernel_scale x s / (s + attn_seq_half + 2 x 200 x 7).
    The core's forward is 2 x 16,384 x 64 heads x 256 / 4 x 65,536 keys = 8.796e12 FLOP; the merge of the
    8 partial outputs adds (8 x 7 + 4) B x 16,384 tokens x 8,192 / 4 wide through 3.35e12 B/s = 0.601 ms.
    The backward accumulates dQ (8,192 / 4 wide) and the K/V chunk (8 x 256 / 4) 7 times at 8 B: it adds
    that traffic, 1.204 ms, to the layer's backward beyond 2.5x the forward attention."""
    row = dict(model="llama3-70b", n_gpus=256, global_batch=32, seq_len=131072, tp=4, pp=4, precision="bf16",
               recompute="selective")
    s = 131072
    rate = 989e12 * 0.53 * CAL.attn_kernel_scale[0] * s / (s + CAL.attn_seq_half + 2 * 200 * 7)
    merge_fwd = 60 * 16384 * 2048 / 3.35e12
    out = _eval(**row, cp=8)
    assert out["time_attn_fwd_s"][0] == pytest.approx(2 * 16384 * 64 * 256 / 4 * 65536 / rate + merge_fwd, rel=1e-9)
    assert merge_fwd == pytest.approx(0.601e-3, rel=1e-3)
    merge_bwd = 8 * 7 * 16384 * (2048 + 512) / 3.35e12
    core = out["time_attn_fwd_s"][0] - merge_fwd
    ffn_bwd = out["time_layer_bwd_s"][0] - 2.5 * core - merge_bwd
    ffn_fwd = out["time_layer_fwd_s"][0] - out["time_attn_fwd_s"][0]
    assert ffn_bwd == pytest.approx(2 * ffn_fwd, rel=0.02)  # the rest of the layer's backward: 2x its forward



def test_blackwell_ultra_exponentials_shorten_only_the_attention_forward():
    """The flash-attention forward waits on the exponentials for EXP_WAIT_SHARE = (1 - 1/1.35) / (1 - 5/10.7)
    = 0.4866 of its Blackwell time (NVIDIA: GB300's 10.7 TeraExponentials/s against GB200's 5 made the fp8
    attention forward 1.35x faster). A GB300 forward at 10.7 takes 1 - 0.4866 + 0.4866 x 5 / 10.7 = 0.7408 of
    the same GPU's with the rate set to 5 (a catalog override), its backward the same time; a GPU without a
    published rate (H100) gets no term."""
    from objectives.training.compute import EXP_WAIT_SHARE

    assert EXP_WAIT_SHARE == pytest.approx(0.4866, abs=1e-4)
    row = dict(model="llama3-8b", n_gpus=8, global_batch=128, seq_len=8192, tp=1, pp=1, micro_batch=2,
               recompute="none", precision="fp8")
    fast = objectives.evaluate(dict(row, gpu="gb300"))
    slow = objectives.evaluate(dict(row, gpu="gb300", gpu_exp_tera_s=5.0))
    assert fast["time_attn_fwd_s"][0] / slow["time_attn_fwd_s"][0] == pytest.approx(0.7408, abs=1e-4)
    # the backward: what the layer's fwd + bwd loses with the forward's gain is the same
    gain = slow["time_attn_fwd_s"][0] - fast["time_attn_fwd_s"][0]
    assert slow["time_layer_fwd_s"][0] - fast["time_layer_fwd_s"][0] == pytest.approx(gain, rel=1e-9)
    assert slow["time_layer_bwd_s"][0] == pytest.approx(fast["time_layer_bwd_s"][0], rel=1e-12)
    h100 = objectives.evaluate(dict(row, gpu="h100-sxm"))
    h100_5 = objectives.evaluate(dict(row, gpu="h100-sxm", gpu_exp_tera_s=5.0))
    assert np.isnan(h100["gpu_exp_tera_s"][0]) and h100_5["time_attn_fwd_s"][0] == h100["time_attn_fwd_s"][0]


def test_fsdp_gradient_path_streams_18_bytes_per_weight_per_micro_batch(monkeypatch):
    """PyTorch FSDP's post-backward hook, bf16 parameters and fp32 reduction (objectives/training/fsdp_grads.py):
    the views' gradients concatenated into the flat gradient (read 2 + write 2 B), cast to fp32 (2 + 4 B),
    pre-divided in place (4 + 4 B): 18 B per weight per micro-batch; a bf16-reduced one 8 B (no cast, 2 + 2 B
    division); Megatron-Core none (its weight-gradient GEMM accumulates in place). Llama-3-8B on the
    pytorch-fsdp stack, one H100 micro-batch of 4,096 tokens: every parameter's gradient takes that path,
    8,030,261,248 weights (32 layers of 218,112,000 and the untied embedding and output layer, 2 x 4,096 x
    128,256) x 18 B / 3.35e12 B/s = 43.15 ms more compute than without it (norm weights, 266K, aside)."""
    from objectives.training import compute
    from objectives.training.fsdp_grads import grad_path_bytes

    assert grad_path_bytes([1.0, 1.0, 0.0], [4.0, 2.0, 2.0]).tolist() == [18.0, 8.0, 0.0]
    assert compute._GRAD_PATH.tolist() == [0.0, 0.0, 0.0, 18.0]  # the stacks' traits (calibration.TRAITS)
    row = dict(model="llama3-8b", n_gpus=8, global_batch=8, seq_len=4096, tp=1, pp=1, zero_stage=3,
               stack="pytorch-fsdp", recompute="none", precision="bf16")
    with_path = _eval(**row)["time_compute_mb_s"][0]
    monkeypatch.setattr(compute, "_GRAD_PATH", np.zeros(4))
    without = _eval(**row)["time_compute_mb_s"][0]
    weights = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336) + 2 * 4096 * 128256
    assert weights == 8_030_261_248 - 266_240
    assert with_path - without == pytest.approx(18.0 * weights / 3.35e12, rel=1e-4)
