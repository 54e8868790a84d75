"""Data-parallel (ZeRO / FSDP) communication by hand: volumes, groups, what hides and what does not."""

import numpy as np
import pytest

from objectives.calibration import Calibration
from objectives.pipeline import TRAINING_MODELS, prepare, run_models
from objectives.training.communication import OVERLAP_SLOWDOWN, Communication

# no latency anywhere: the bandwidth terms alone (latency is tested on its own below)
CAL = Calibration().replace(scaleup_latency_s=0.0, scaleout_latency_s=0.0)
B_UP, B_OUT = 450e9 * CAL.scaleup_eff, 50e9 * CAL.scaleout_eff  # H100 NVLink 450 GB/s, 400G NIC 50 GB/s


def _columns(**row):
    """A row's model inputs as Communication sees them (every module before it run), on H100 with 400G NICs."""
    _, floats = prepare(dict(dict(gpu="h100-sxm", nic_gbyte_s=50.0, pp=1, micro_batch=1, recompute="selective",
                                  seq_len=4096, precision="bf16"), **row))
    return run_models(floats, CAL, TRAINING_MODELS)


def _dp(c, **override):
    cols = dict(c, net_hop_latency_s=np.zeros(1), **{k: np.atleast_1d(np.float64(v)) for k, v in override.items()})
    out = Communication().compute(cols, CAL)
    return out["time_dp_comm_s"][0], out["time_dp_comm_exposed_s"][0]


def test_zero3_exposes_the_edges_and_what_exceeds_each_window():
    """ZeRO-3 on one 8-GPU node (dp 8, g_in 8): a layer's 16-bit all-gather of P/L parameters takes
    a = 7/8 * 2P/L / B_up, its bf16 reduce-scatter r = a (Megatron-Bridge reduces gradients in bf16:
    grad_reduce_in_fp32 False). With a forward window f = 1.5a and a backward window b = 1.5a per layer,
    L = 4, m = 2:

        forward:  a (layer 0's gather, nothing before it) + 3 * sigma * a (the other three hidden, their
                  compute slowed by the overlap slowdown sigma)
        backward: r (layer 0's reduce-scatter, nothing after it) + 3 * ((a + r - b) + sigma * b) (the gather
                  of layer i-1 and the reduce-scatter of layer i+1 exceed layer i's backward by a/2)
                = a + 1.5a + 4.5 sigma a
        per step: m (3.5a + 7.5 sigma a); all of it: m (2 * 4a + 4a) = 24a
    """
    c = _columns(model="llama3-8b", n_gpus=8, global_batch=16, tp=1, zero_stage=3, stack="megatron-core")
    layers, params = 4.0, 8e9
    a = 7 / 8 * 2 * params / layers / B_UP
    total, exposed = _dp(c, layers_per_stage=layers, params_per_gpu=params, n_microbatches=2,
                         time_layer_fwd_s=1.5 * a, time_layer_bwd_s=1.5 * a)
    assert total == pytest.approx(24 * a, rel=1e-12)
    assert exposed == pytest.approx(2 * (3.5 * a + 7.5 * OVERLAP_SLOWDOWN * a), rel=1e-12)
    assert OVERLAP_SLOWDOWN == pytest.approx(0.189)  # Lee et al. 2025, the mean measured slowdown


def test_zero1_reduces_once_per_step_and_zero3_every_micro_batch():
    """Gradient accumulation over m = 8 micro-batches: the distributed optimizer (ZeRO-1) reduce-scatters
    the accumulated bf16 gradients (Megatron-Bridge: grad_reduce_in_fp32 False) and gathers the bf16 weights
    once per step, 2 + 2 bytes per parameter on the wire; ZeRO-3 gathers twice and reduce-scatters once per
    micro-batch, m (2 + 2 + 2) = 48 bytes. In fp8 (MXFP8 on a B200) the weights are gathered as kept, 1 B
    and a 1-byte scale per 32: ZeRO-1 2 + 1.03125."""
    c = _columns(model="llama3-8b", n_gpus=8, global_batch=64, tp=1, stack="megatron-core")
    one_byte = 7 / 8 * 1e9 / B_UP  # one byte per parameter of 1e9 parameters over the node
    z1, _ = _dp(c, zero_stage=1, params_per_gpu=1e9, n_microbatches=8)
    z3, _ = _dp(c, zero_stage=3, params_per_gpu=1e9, n_microbatches=8)
    assert z1 == pytest.approx(4 * one_byte, rel=1e-12)
    assert z3 == pytest.approx(48 * one_byte, rel=1e-12)
    fp8, _ = _dp(c, zero_stage=1, params_per_gpu=1e9, n_microbatches=8, precision=1.0, fp8_recipe=3.0,
                 gpu_fp4_tflop_s=9000.0)
    assert fp8 == pytest.approx((2 + 1 + 1 / 32) * one_byte, rel=1e-12)


def test_fsdp_shard_grad_op_gathers_every_micro_batch():
    """ZeRO-2 over m = 8 micro-batches and bf16 weights (2 bytes): Megatron keeps the gathered 16-bit weights
    and gathers once per step, its bf16 gradients reduce-scattered each micro-batch, 8 x 2 + 2 = 18 bytes per
    parameter on the wire; PyTorch FSDP SHARD_GRAD_OP reduces fp32 gradients (4 bytes), reshards after every
    backward and gathers each micro-batch, 8 x (4 + 2) = 48."""
    one_byte = 7 / 8 * 1e9 / B_UP
    for stack, bytes_on_wire in (("megatron-core", 18), ("pytorch-fsdp", 48)):
        c = _columns(model="llama3-8b", n_gpus=8, global_batch=64, tp=1, stack=stack)
        total, _ = _dp(c, zero_stage=2, params_per_gpu=1e9, n_microbatches=8)
        assert total == pytest.approx(bytes_on_wire * one_byte, rel=1e-12), stack


def test_expert_gradients_go_over_the_expert_data_parallel_group():
    """16 GPUs on two nodes, tp 1, ep 8: the dense group is dp x cp = 16 ranks at stride 1 (8 per node, two
    nodes), the expert data-parallel group dp x cp x tp / (ep x etp) = 2 ranks at stride ep x etp = 8: one
    rank per node, so every expert byte crosses the NIC. ZeRO-1 on a stack without overlap (16-bit
    gradients, Megatron-LM 2021), D dense and E expert parameters, 2 bytes each, reduce-scattered and
    gathered:

        dense:  2 * (7/8 * 2D / B_up + 1/2 * 2D/8 / B_out)
        expert: 2 * (1/2 * 2E / B_out)          (over the dense group it would be 8x less on the NIC)
    """
    c = _columns(model="mixtral-8x7b", n_gpus=16, global_batch=32, tp=1, ep=8, zero_stage=1, stack="megatron-2021")
    assert c["etp"][0] == 1 and c["dp"][0] == 16
    dense, expert = 1e9, 5e9
    total, exposed = _dp(c, params_per_gpu=dense + expert, params_expert_per_gpu=expert)
    want = 2 * (7 / 8 * 2 * dense / B_UP + 1 / 2 * 2 * dense / 8 / B_OUT) + 2 * (1 / 2 * 2 * expert / B_OUT)
    assert total == pytest.approx(want, rel=1e-12)
    assert exposed == pytest.approx(total, rel=1e-12)  # nothing overlaps in Megatron-LM 2021


def test_zero3_pays_a_ring_latency_per_layer_and_collective():
    """With latency and no bandwidth (zero parameters but for a negligible count), ZeRO-3 over 16 ranks at
    stride 1 on two 8-GPU nodes has a ring latency of 7 alpha_up + 1 alpha_out per collective, three
    collectives (gather, gather, reduce-scatter) per layer per micro-batch: m * 3 L (7 alpha_up + alpha_out)."""
    cal = Calibration()
    c = _columns(model="llama3-8b", n_gpus=16, global_batch=32, tp=1, zero_stage=3, stack="megatron-core")
    cols = dict(c, net_hop_latency_s=np.zeros(1), params_per_gpu=np.array([1e-30]), layers_per_stage=np.array([32.0]),
                n_microbatches=np.array([2.0]))
    total = Communication().compute(cols, cal)["time_dp_comm_s"][0]
    ring = 7 * cal.scaleup_latency_s + 1 * cal.scaleout_latency_s
    assert total == pytest.approx(2 * 3 * 32 * ring, rel=1e-9)
