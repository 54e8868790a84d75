"""Per-micro-batch communication of tensor, context and expert parallelism against hand derivations.

Fixed constants used below (objectives/calibration.py, not fitted): NVLink at 0.8 x 450 GB/s = 360 GB/s
per direction on an H100 and 3 us per hop; NIC at 0.93 x 50 GB/s = 46.5 GB/s and 10 us.
"""

import numpy as np
import pytest

import objectives
from objectives.calibration import Calibration

CAL = Calibration.load()
UP, LAT_UP = 360e9, 3e-6
OUT, LAT_OUT = 46.5e9, 10e-6


def _eval(**row):
    return objectives.evaluate(dict(dict(gpu="h100-sxm", ep=1, cp=1, vp=1, zero_stage=1, micro_batch=1), **row))


def test_cp_ring_across_nodes_steps_at_the_nic():
    """Llama-3-8B at 64K tokens on 1,024 H100, tp 1, cp 32, global batch 32 (dp 32, one micro-batch): each
    rank holds 65,536 / 32 = 2,048 tokens; its K and V chunk is 2 B x 2 x 2,048 x 8 KV heads x 128 =
    8,388,608 B. The ring of 32 spans 4 nodes, so each of the 31 steps waits for a node-crossing hop:
    8,388,608 / 46.5e9 + 10e-6 = 190.4 us (NVLink would give 26.3 us a hop, the pricing that let the search
    pick this mapping at MFU 0.80). Each send hides behind its own ring step's attention, t_attn / 32
    (Transformer Engine AttnFuncWithCPAndKVP2P waits for a step's chunk before its kernel), so per layer the
    forward exposes 31 x max(hop - t_attn / 32, 0); the backward (2.5x the attention a step) sends K/V
    first, K/V with dK/dV (16.8 MB: 370.8 us) at the 30 middle steps and dK/dV alone last. 32 layers. The
    forward exposes one step's attention more than the whole ring against the whole core would,
    max(31 hop - t_attn, 0): the last step sends nothing to hide."""
    out = _eval(model="llama3-8b", n_gpus=1024, global_batch=32, seq_len=65536, tp=1, pp=1, cp=32,
                recompute="selective")
    hop = 8_388_608 / OUT + LAT_OUT
    hop2 = 2 * 8_388_608 / OUT + LAT_OUT
    assert hop == pytest.approx(190.4e-6, rel=1e-3)
    w = out["time_attn_fwd_s"][0] / 32
    fwd = 31 * max(hop - w, 0.0)
    bwd = 2 * max(hop - 2.5 * w, 0.0) + 30 * max(hop2 - 2.5 * w, 0.0)
    expected = 32 * (fwd + bwd)
    assert out["n_microbatches"][0] == 1
    assert out["time_cp_comm_s"][0] == pytest.approx(expected, rel=1e-9)
    assert fwd == pytest.approx(max(31 * hop - 32 * w, 0.0) + w)  # the last step's attention hides nothing
    # not negligible: 0.043 s against 0.69 s of compute, a sixteenth of the step (the refit after the Qwen3
    # MXFP8 rows of 26.06+ left the table, megatron-core attn_kernel_scale 0.70 -> 0.62: slower attention
    # hides more of each hop; the share moves with the fitted attention rate, the exact value above does not)
    assert expected > 0.05 * out["time_compute_s"][0]


def test_cp_search_no_longer_picks_the_cross_node_ring():
    """The same design with the mapping searched no longer picks the tp 1 cp 32 ring (0.35 s of exposed ring
    per step, above): it shortens the ring and splits the chunk over tp (tp 4 cp 8: a 2 MB chunk, 7 hops of
    45 us, hidden behind the attention core), and its exposed ring time is a small part of the step."""
    out = objectives.search_mapping(dict(model=["llama3-8b"], gpu="h100-sxm", n_gpus=1024, global_batch=32,
                                         seq_len=65536, precision="bf16"))
    assert out["feasible"][0]
    assert out["cp"][0] < 32
    assert out["time_cp_comm_s"][0] <= 0.05 * out["step_time_s"][0]


def _rs_in_node(nbytes):
    """Ring reduce-scatter over 8 GPUs of one node: 7/8 x n / 360 GB/s + 7 hops x 3 us."""
    return 7 / 8 * nbytes / UP + 7 * LAT_UP


def _ar_in_node(nbytes):
    """All-reduce over 8 GPUs of one node: 2 x 7/8 x n / 360 GB/s + 2 x ceil(log2 8) hops x 3 us."""
    return 2 * 7 / 8 * nbytes / UP + 2 * 3 * LAT_UP


GPT3 = dict(model="gpt3-175b", n_gpus=64, global_batch=64, seq_len=2048, tp=8, pp=8)  # 12 layers per stage
ACT = 2 * 2048 * 12288  # b*s*h in 16-bit: 50,331,648 B


def test_tp_without_overlap_counts_every_collective():
    """Megatron-LM 2021 (no overlap, all exposed), 12 layers per stage. Without sequence parallelism: 4
    all-reduces per layer (2 forward after the row-parallel layers, 2 backward for the column-parallel input
    gradients), 6 with full recompute. With it: 2 AG + 2 RS forward; backward 2 AG of the output gradient,
    2 AG re-gathering the QKV and FC1 inputs (not saved; megatron/core/tensor_parallel/layers.py), 2 RS of
    their input gradients: 10 RS-sized collectives, 14 with full recompute (the re-gather was missing)."""
    ar, rs = _ar_in_node(ACT), _rs_in_node(ACT)
    for recompute, n_ar, n_rs in (("selective", 4, 10), ("full", 6, 14)):
        no_sp = _eval(**GPT3, stack="megatron-2021", recompute=recompute, sequence_parallel=0)
        sp = _eval(**GPT3, stack="megatron-2021", recompute=recompute, sequence_parallel=1)
        assert no_sp["time_tp_comm_mb_s"][0] == pytest.approx(12 * n_ar * ar, rel=1e-9)
        assert sp["time_tp_comm_mb_s"][0] == pytest.approx(12 * n_rs * rs, rel=1e-9)


def test_tp_column_parallel_backward_hides_behind_its_gemms():
    """Megatron-Core runs the column-parallel backward asynchronously: the input-gradient RS behind the
    weight-gradient GEMM, the input re-gather behind the input-gradient GEMM. Here the QKV GEMM (2 x 2,048 x
    12,288 x 36,864 / 8 = 2.3e11 FLOP, ~0.3 ms at the H100's narrow-GEMM rate) outlasts one RS (0.143 ms),
    so only the forward's and the output-gradient collectives, 6 RS, are exposed, at the fitted fraction."""
    out = _eval(**GPT3, stack="megatron-core-2024", recompute="selective", sequence_parallel=1)
    rs = _rs_in_node(ACT)
    assert out["time_qkv_gemm_s"][0] > rs and out["time_fc1_gemm_s"][0] > rs
    assert out["time_tp_comm_mb_s"][0] == pytest.approx(12 * CAL.tp_comm_exposed * 6 * rs, rel=1e-9)


def test_expert_all_to_all_repeats_under_full_recompute():
    """Per MoE layer: dispatch + combine forward and backward (4), and again in full recompute's second
    forward (6): the exposed all-to-all of the same mapping grows by exactly 6/4."""
    row = dict(model="mixtral-8x7b", n_gpus=64, global_batch=64, seq_len=4096, tp=1, pp=4, ep=8)
    sel = _eval(**row, recompute="selective")
    full = _eval(**row, recompute="full")
    assert sel["time_ep_comm_mb_s"][0] > 0
    assert full["time_ep_comm_mb_s"][0] == pytest.approx(1.5 * sel["time_ep_comm_mb_s"][0], rel=1e-12)


def test_interleaved_sends_hide_behind_the_next_chunk_where_the_stack_overlaps_them():
    """Llama-3-70B on 64 H100, tp 8, pp 8 (stride 8: every stage boundary leaves the node), vp 5, global
    batch 64 (dp 1, 64 micro-batches of one 8,192-token sequence). A send carries the stage's activations,
    split over tp by sequence parallelism: 2 B x 8,192 x 8,192 / 8 = 16,777,216 B, over the NIC
    16,777,216 / 46.5e9 + 10e-6 = 370.8 us. megatron-2021 (no overlap_p2p_comm) exposes every one: 2 x vp =
    10 sends per micro-batch = 3.708 ms. megatron-core sends behind the next chunk's forward, 80 / 8 / 5 = 2
    layers of a few ms each: nothing exposed. Without interleaving (vp 1) megatron-core turns the overlap
    off (batch_p2p_comm) and exposes its 2 sends."""
    common = dict(model="llama3-70b", n_gpus=64, global_batch=64, seq_len=8192, tp=8, pp=8, recompute="selective",
                  sequence_parallel=1)
    send = 16_777_216 / OUT + LAT_OUT
    assert send == pytest.approx(370.8e-6, rel=1e-3)
    old = _eval(**common, vp=5, stack="megatron-2021")
    assert old["time_pp_comm_mb_s"][0] == pytest.approx(10 * send, rel=1e-9)
    core = _eval(**common, vp=5, stack="megatron-core")
    assert 2 * core["time_layer_fwd_s"][0] > send and core["time_pp_comm_mb_s"][0] == 0.0
    flat = _eval(**common, vp=1, stack="megatron-core")
    assert flat["time_pp_comm_mb_s"][0] == pytest.approx(2 * send, rel=1e-9)


def test_expert_all_to_all_hides_behind_the_paired_micro_batch():
    """Megatron-Core's EP A2A overlap pairs micro-batch i+1's forward with micro-batch i's backward (moe/README:
    "merging FWD-BWD passes of adjacent microbatches"). One all-to-all takes a; a layer's forward f = a, its
    backward b = 3a. Paired: the forward's dispatch and combine (2a) hide behind the partner's backward (3a),
    exposing 0 and slowing it by sigma 2a; the backward's (2a) behind the partner's forward (a), exposing a and
    slowing it by sigma a: a + 3 sigma a. With m = 8 micro-batches on pp = 2 stages, min(pp, m) / m = 1/4 of
    them have no partner and expose all 4a: 1/4 x 4a + 3/4 x (a + 3 sigma a) = 1.75a + 2.25 sigma a. Without
    the overlap (Megatron-LM 2021), 4a. Full recompute's forward (2a more) goes with the backward: behind f = a
    it exposes 3a."""
    from objectives.training.communication import OVERLAP_SLOWDOWN, ep_exposed_s

    a, s = 1e-3, OVERLAP_SLOWDOWN
    one = np.array([1.0])
    got = ep_exposed_s(2 * a * one, 2 * a * one, a * one, 3 * a * one, np.array([True]), np.array([2 / 8]))
    assert got[0] == pytest.approx(1.75 * a + 2.25 * s * a, rel=1e-12)
    assert ep_exposed_s(2 * a * one, 2 * a * one, a * one, 3 * a * one, np.array([False]), np.array([2 / 8]))[0] \
        == pytest.approx(4 * a, rel=1e-12)
    paired = ep_exposed_s(2 * a * one, 4 * a * one, a * one, 3 * a * one, np.array([True]), np.array([0.0]))
    assert paired[0] == pytest.approx(3 * a + s * (2 * a + a), rel=1e-12)


def test_more_micro_batches_hide_more_of_the_expert_all_to_all():
    """Mixtral 8x7B on 32 H100, pp 2, ep 8: with 2 micro-batches per step (global batch 32 over dp 16) every
    micro-batch is a warm-up or cool-down one, unpaired, and exposes the whole all-to-all, as a stack without
    the overlap does; with 16, 14 of them pair and hide part of it."""
    row = dict(model="mixtral-8x7b", n_gpus=32, tp=1, pp=2, ep=8, seq_len=4096, recompute="selective",
               precision="bf16")
    few, many = (_eval(global_batch=gb, **row)["time_ep_comm_mb_s"][0] for gb in (32, 256))
    whole = _eval(global_batch=256, stack="megatron-2021", **row)["time_ep_comm_mb_s"][0]
    assert many < few == pytest.approx(whole, rel=1e-12)
