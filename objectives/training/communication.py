"""Communication time of each parallelism, per micro-batch (tp, cp, ep, pp) and per step (dp).

Volumes (16-bit activations; gradients in the stack's precision):
- Tensor parallelism (Narayanan et al. SC'21 Sec. 3.1; Korthikanti et al. Sec. 4.2.2; Megatron-Core
  ``tensor_parallel/layers.py``), per layer, in all-reduce-equivalents (AR) of b·s·h, an all-gather (AG)
  or reduce-scatter (RS) being half of one: the forward's two ARs after the row-parallel out-projection
  and FC2 (with sequence parallelism an AG before QKV and FC1 and an RS after them); in the backward the
  input-gradient AR of the column-parallel QKV and FC1 (sequence parallel: an RS, plus the AG that gathers
  their input again for the weight-gradient GEMM, as the gathered input is not saved), and, sequence
  parallel, the AG of the output gradient into the out-projection and FC2. 4 ARs per layer, 5 with
  sequence parallelism; full recompute repeats the forward's two. Where the stack overlaps TP collectives
  with GEMMs (Megatron-Core ``--tp-comm-overlap``) the fraction ``tp_comm_exposed`` of the forward's and
  the output-gradient ones is exposed; where it runs the column-parallel backward asynchronously
  (``--async-tensor-model-parallel-allreduce``, Megatron-LM default since September 2021; the input-gradient
  AR or RS behind the weight-gradient GEMM, the re-gather behind the input-gradient GEMM), those are
  exposed by what exceeds their GEMM; everything else is exposed.
- Context parallelism (ring attention, Liu et al. 2023; Megatron-Core CP with Transformer Engine's
  ``cp_comm_type`` p2p, ``AttnFuncWithCPAndKVP2P``): each layer runs cp steps per pass, each rank's
  attention against one K/V chunk, and each step sends the chunk the next step needs to the ring's next
  rank while it computes (forward: cp - 1 K/V sends; backward: K/V, then K/V with the dK/dV accumulated so
  far, then dK/dV alone: two single and cp - 2 double sends). A step cannot start before its chunk has
  arrived, so each send hides behind its own step's attention (the core's time / cp), not behind the
  whole core: what exceeds a step is exposed step by step. A ring over more than one
  NVLink domain steps at its cross-domain hop (``collectives.ring_hop_s``); a recomputed attention core
  (full recompute; selective on unfused stacks) passes K and V around again.
- Expert parallelism (Lepikhin et al. 2021, GShard): per MoE layer of the busiest stage
  (objectives.training.layout; dense layers and shared experts dispatch nothing) an all-to-all dispatch and combine of
  top-k copies of each token (node-limited routing, ``moe_max_nodes``: at most that many copies cross the
  fabric, collectives.routed_all_to_all_s) in the forward, and again in the backward, and in the recomputed forward of
  full recompute (6 instead of 4). Stacks that overlap it (Megatron-Core's EP A2A overlap,
  ``--overlap-moe-expert-parallel-comm --delay-wgrad-compute``, which "merges the FWD-BWD passes of adjacent
  micro-batches", moe/README.md; DeepSeek-V3's DualPipe pairs them the same way, arXiv 2412.19437 Sec. 3.2.1)
  run a micro-batch's forward beside the previous one's backward: the forward's dispatch and combine hide
  behind the other's layer backward (its weight-gradient GEMMs delayed into it), the backward's (and a
  recomputed forward's) behind the other's layer forward; what exceeds its window is exposed, the hidden part
  slows the compute under it by OVERLAP_SLOWDOWN. A pipeline's warm-up forwards and cool-down backwards have
  no partner (1F1B: min(pp, m) of the m micro-batches of a stage), so theirs are exposed whole. Other stacks
  expose all of it.
- Pipeline parallelism (Narayanan Sec. 4.1): per micro-batch and model chunk, the stage boundary sends
  b·s·h activations forward and gradients back (split over tp by the scatter/gather optimisation when
  sequence parallel); interleaving multiplies the sends by v, and on stacks that overlap them
  (``pp_overlap``, Megatron-Core's overlap_p2p_comm, on exactly when vp > 1) each hides behind the next
  model chunk's forward, exposing only what exceeds it.
- Data parallelism (Narayanan Sec. 3.2; Megatron-Core distributed optimizer; Megatron-FSDP docs): the
  gradients in the stack's precision (fp32 where it accumulates and reduces them in fp32) are
  reduce-scattered and the weights all-gathered as held, 16-bit or fp8 / fp4 (objectives.training.quantization
  param_bytes; ZeRO-0: the gradients all-reduced). Dense
  parameters go over the dp x cp group, expert parameters over the expert data-parallel group. ZeRO-1
  does both once per step, ZeRO-2 reduce-scatters every micro-batch (and PyTorch FSDP's SHARD_GRAD_OP
  gathers every micro-batch too, resharding after each backward), ZeRO-3 / FSDP also gathers the
  weights in every micro-batch's forward and again in its backward (Rajbhandari et al. Sec. 5.3;
  megatron_fsdp.md: gradients reduce-scattered "during every backward pass" for ZeRO-2 and -3).
  Overlapping stacks run them layer by layer behind the neighbouring layer's compute (the gather of
  layer i+1 behind layer i's forward; in the backward the gather of layer i-1 and the reduce-scatter of
  layer i+1 behind layer i's, Megatron-FSDP runtime_schedule.md): a layer's excess over its window is
  exposed, the first gather and the last reduce-scatter of a pass are exposed whole, each pays one ring
  latency, and the hidden part slows the compute under it by OVERLAP_SLOWDOWN of its duration (Lee et al. 2025).
  Stacks without overlap (Megatron-LM 2021) expose all of it, one collective after the backward.
Groups are placed tp innermost, then cp, then dp (ep inside dp x cp), pp outermost.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, as_codes, lookup
from objectives.calibration import trait
from objectives.training.collectives import (
    Tiers,
    all_reduce_s,
    p2p_s,
    reduce_scatter_bw_s,
    reduce_scatter_s,
    ring_hop_s,
    ring_latency_s,
    routed_all_to_all_s,
    split_tiers,
)
from objectives.training.quantization import param_bytes
from objectives.training.topology import scaleout_bw, scaleout_latency_s

__all__ = ["Communication", "tiers_of", "ep_exposed_s"]

ACT_BYTES = 2.0  # 16-bit activations on the wire
#: share of its own duration that a collective running beside compute costs that compute: 18.9%, the mean
#: slowdown of compute overlapped with communication that Lee et al. measured on A100 and H100 (GPT and
#: Llama training, 2025, arXiv 2507.03114, abstract and Sec. 5; up to 40%). It is more than the NCCL
#: kernels' SMs (16 of an H100's 132, the low end of the 16-32 Megatron-FSDP's docs give: 12%): the
#: collective also contends for HBM and L2, and a GEMM that lost SMs runs a tail wave
OVERLAP_SLOWDOWN = 0.189
_TP_OVERLAP = trait("tp_overlap")
_DP_OVERLAP = trait("dp_overlap")
_EP_OVERLAP = trait("ep_overlap")
_TP_ASYNC = trait("tp_async_dgrad")
_UNFUSED_ATTN = (trait("attention_kernel") == 0).astype(np.float64)  # unfused attention: selective recompute re-runs the core
FULL = 2.0  # recompute code of full recompute (objectives.table CATEGORIES)
_GRAD_BYTES = trait("grad_bytes")
_LOW_PARAMS = trait("low_precision_params")
_PP_OVERLAP = trait("pp_overlap")
_FP32_SHARDS = trait("fp32_shards")


def tiers_of(c, cal) -> Tiers:
    """Scale-up and scale-out bandwidth (bytes/s per GPU per direction) and latency of each row.

    Scale-out comes from the fabric (``objectives.training.topology``): NIC rate x efficiency for ring collectives,
    divided by the oversubscription the job meets above the leaf for all-to-all and pipeline sends; the
    calibrated network latency plus the switch hops of a named network (none for a row that names no
    network, whose figures are those the model was calibrated with).
    """
    bw_out = scaleout_bw(c, cal)
    return Tiers(
        size=c["scaleup_size"],
        bw_up=c["scaleup_gbyte_s"] * 1e9 * cal.scaleup_eff,
        bw_out=bw_out,
        lat_up=cal.scaleup_latency_s,
        lat_out=scaleout_latency_s(c, cal),
        bw_cross=bw_out / np.maximum(c["net_oversub_seen"], 1.0),
        mesh=c["scaleup_mesh"],
    )


def ep_exposed_s(fwd_a2a, bwd_a2a, t_fwd, t_bwd, overlaps, unpaired):
    """Exposed expert all-to-all of one MoE layer for one micro-batch (module doc): ``fwd_a2a`` / ``bwd_a2a``
    the layer's all-to-all time in its forward / backward; where the stack ``overlaps`` it, a paired
    micro-batch's forward all-to-all hides behind the partner's layer backward ``t_bwd`` and its backward
    all-to-all behind the partner's forward ``t_fwd`` (the excess exposed, the hidden part slowing that
    compute by OVERLAP_SLOWDOWN); the ``unpaired`` share of micro-batches (pipeline warm-up and cool-down)
    exposes all of it."""
    whole = fwd_a2a + bwd_a2a
    paired = (np.maximum(fwd_a2a - t_bwd, 0.0) + OVERLAP_SLOWDOWN * np.minimum(fwd_a2a, t_bwd)
              + np.maximum(bwd_a2a - t_fwd, 0.0) + OVERLAP_SLOWDOWN * np.minimum(bwd_a2a, t_fwd))
    return np.where(overlaps, unpaired * whole + (1.0 - unpaired) * paired, whole)


class Communication(Model):
    requires = (
        "d_model", "n_kv_heads", "attn_qk_dim", "attn_v_dim", "seq_len", "moe_experts", "moe_topk", "layers_per_stage",
        "moe_layers_per_stage",
        "tp", "pp", "cp", "ep", "vp", "dp", "micro_batch", "n_microbatches", "recompute", "sequence_parallel",
        "zero_stage", "params_per_gpu", "params_expert_per_gpu", "etp", "time_attn_fwd_s", "time_layer_fwd_s",
        "time_layer_bwd_s", "time_qkv_gemm_s", "time_fc1_gemm_s", "scaleup_size", "scaleup_gbyte_s", "scaleup_mesh",
        "nic_gbyte_s", "net_eff_rel", "net_oversub_seen",
        "net_hop_latency_s", "net_hops", "net_transport_latency_s", "stack", "precision", "fp8_recipe", "moe_max_nodes",
        "gpu_fp4_tflop_s",
    )
    provides = {
        "time_tp_comm_mb_s": "s; exposed tensor-parallel communication per micro-batch per stage",
        "time_cp_comm_mb_s": "s; exposed context-parallel communication per micro-batch per stage",
        "time_ep_comm_mb_s": "s; exposed expert-parallel all-to-all per micro-batch per stage",
        "time_pp_comm_mb_s": "s; pipeline sends per micro-batch on the critical path",
        "time_dp_comm_s": "s; data-parallel gradient and weight traffic per step, hidden or not",
        "time_dp_comm_exposed_s": "s; data-parallel communication not hidden behind compute, per step",
    }

    def compute(self, c, cal):
        net = tiers_of(c, cal)
        t, cp, p = c["tp"], c["cp"], c["pp"]
        tokens = c["micro_batch"] * c["seq_len"] / cp
        layers = c["layers_per_stage"]
        stack = as_codes(c["stack"])
        act_bytes = ACT_BYTES * tokens * c["d_model"]  # one micro-batch's activations, b*s*h

        # tensor parallel (stride 1), per layer: one all-reduce-equivalent (AR, or AG + RS sequence parallel)
        sp = c["sequence_parallel"] > 0
        full = c["recompute"] == FULL
        has_tp = t > 1
        ar = np.where(sp, 2.0 * reduce_scatter_s(act_bytes, t, 1.0, net), all_reduce_s(act_bytes, t, 1.0, net)) * has_tp
        half = 0.5 * ar  # one AG or RS (sequence parallel)
        pipelined = (2.0 + 2.0 * full) * ar + np.where(sp, ar, 0.0)  # forward (+ recompute), output-grad AGs
        # column-parallel backward of QKV and FC1: input-grad AR, or re-gather AG + input-grad RS
        per_gemm = np.where(sp, 2.0 * half, ar)
        hidden_by = (c["time_qkv_gemm_s"], c["time_fc1_gemm_s"])
        async_left = sum(np.where(sp, 2.0 * np.maximum(half - g, 0.0), np.maximum(ar - g, 0.0)) for g in hidden_by)
        tp_async = lookup(_TP_ASYNC, stack) > 0
        tp_exposed = layers * (lookup(np.where(_TP_OVERLAP > 0, cal.tp_comm_exposed, 1.0), stack) * pipelined
                               + np.where(tp_async, async_left, 2.0 * per_gemm))

        # context parallel ring, stride tp: the K and V chunk (MLA: its up-projected per-head keys and values,
        # Megatron-Core's CP on MLA), one send per step behind that step's attention (TE
        # AttnFuncWithCPAndKVP2P: each step waits for its chunk, req.wait(), before its kernel); its slowest
        # hop paces each step (collectives.ring_hop_s). Forward: cp - 1 K/V sends behind steps of
        # t_attn / cp; backward (2.5x the forward's attention): the first step sends K/V, the middle ones
        # K/V with dK/dV, the last dK/dV alone. A re-run attention core passes K and V again
        kv_chunk = ACT_BYTES * tokens * c["n_kv_heads"] * (c["attn_qk_dim"] + c["attn_v_dim"]) / np.minimum(t, c["n_kv_heads"])
        ring = cp > 1
        hop = ring_hop_s(kv_chunk, cp, t, net)
        step_fwd = c["time_attn_fwd_s"] / cp

        def behind_step(send, window):
            """One ring step: the send's excess over its step's attention. The hidden part costs the attention
            nothing here: a send takes NCCL's few point-to-point channels, not a collective's (OVERLAP_SLOWDOWN,
            measured beside collectives, would put the NeMo long-sequence cp 16-32 runs 9-10% too slow)."""
            return np.maximum(send - window, 0.0)

        cp_fwd = (cp - 1.0) * behind_step(hop, step_fwd)
        cp_bwd = 2.0 * behind_step(hop, 2.5 * step_fwd) \
            + np.maximum(cp - 2.0, 0.0) * behind_step(ring_hop_s(2.0 * kv_chunk, cp, t, net), 2.5 * step_fwd)
        rerun = full | ((c["recompute"] == 1.0) & (lookup(_UNFUSED_ATTN, stack) > 0))
        cp_exposed = np.where(ring, layers * ((1.0 + rerun) * cp_fwd + cp_bwd), 0.0)

        # expert parallel: dispatch + combine, forward and backward (and the recomputed forward of full
        # recompute); ep group strided by tp inside dp x cp
        routed = (c["moe_experts"] > 0) & (c["ep"] > 1)
        ep = np.zeros(t.shape)
        if routed.any():
            a2a_bytes = ACT_BYTES * tokens * c["moe_topk"] * c["d_model"] / t
            # one dispatch (or combine) of a layer, node-limited where the row says so (moe_max_nodes)
            one = routed_all_to_all_s(a2a_bytes, c["ep"], t, net, c["moe_topk"], c["moe_max_nodes"])
            fwd_a2a, bwd_a2a = 2.0 * one, (2.0 + 2.0 * full) * one  # the recomputed forward's with the backward
            moe_layers = c["moe_layers_per_stage"]  # the busiest stage's MoE layers (objectives.training.layout)
            ep = ep_exposed_s(fwd_a2a, bwd_a2a, c["time_layer_fwd_s"], c["time_layer_bwd_s"],
                              lookup(_EP_OVERLAP, stack) > 0, np.minimum(p, c["n_microbatches"]) / c["n_microbatches"])
            ep = np.where(routed, moe_layers * ep, 0.0)

        # pipeline: activations forward and gradients back per micro-batch per model chunk; stride tp*cp*dp
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        pp_bytes = act_bytes / sp_split
        send = p2p_s(pp_bytes, p, t * cp * c["dp"], net)
        # interleaved on a stack that overlaps them (overlap_p2p_comm): each send behind the next chunk's
        # forward compute, only what exceeds it exposed (the forward is the shorter of the two passes)
        chunk = layers / c["vp"] * c["time_layer_fwd_s"]
        hides = (lookup(_PP_OVERLAP, stack) > 0) & (c["vp"] > 1)
        pp = np.where(p > 1, 2.0 * c["vp"] * np.where(hides, np.maximum(send - chunk, 0.0), send), 0.0)

        # data parallel (ZeRO / FSDP): dense parameters over dp x cp ranks at stride tp, expert parameters over
        # the expert data-parallel group, dp x cp x tp / (ep x etp) ranks at stride ep x etp (Megatron-Core MoE
        # parallel folding): with ep 8 that group has one rank per 8-GPU node, and its NIC carries all of it
        expert = c["params_expert_per_gpu"]
        has_experts = bool(np.any(expert > 0))  # dense tables skip the expert group
        dense = c["params_per_gpu"] - expert if has_experts else c["params_per_gpu"]
        dp_group = c["dp"] * cp
        split_dense = split_tiers(dp_group, t, net)
        lat = ring_latency_s(dp_group, t, net, split_dense)  # a group of one: no latency, no volume
        if has_experts:
            ep_stride = c["ep"] * c["etp"]
            edp_group = dp_group * t / ep_stride
            split_expert = split_tiers(edp_group, ep_stride, net)
            lat = lat + ring_latency_s(edp_group, ep_stride, net, split_expert) * (expert > 0)

        def wire_s(bytes_per_param):
            """Bandwidth time of one reduce-scatter (or all-gather) of every parameter the GPU holds."""
            dense_s = reduce_scatter_bw_s(bytes_per_param * dense, split_dense, net)
            return dense_s + reduce_scatter_bw_s(bytes_per_param * expert, split_expert, net) if has_experts else dense_s

        rs_bw = wire_s(lookup(_GRAD_BYTES, stack))  # gradients in the stack's precision
        # the weights gathered as held: 16-bit, or fp8 / fp4 where the stack keeps them so (fp8_param_gather)
        ag_bw = wire_s(param_bytes(c["precision"], c["fp8_recipe"], lookup(_LOW_PARAMS, stack), c["gpu_fp4_tflop_s"]))
        z, m = c["zero_stage"], c["n_microbatches"]
        overlaps = lookup(_DP_OVERLAP, stack) > 0
        # overlapping stacks reduce and gather layer by layer (one ring latency each); without overlap one
        # collective after the backward (Megatron-LM 2021)
        rs_all = rs_bw + np.where(overlaps, layers, 1.0) * lat
        ag_all = ag_bw + np.where(overlaps, layers, 1.0) * lat
        # ZeRO-2 gathers once per step where the 16-bit weights persist (Megatron), every micro-batch where only
        # the fp32 shard does (PyTorch FSDP SHARD_GRAD_OP reshards after each backward)
        z2_gathers = np.where(lookup(_FP32_SHARDS, stack) > 0, m, 1.0)
        dp_total = np.select([z >= 3, z >= 2, z >= 1],
                             [m * (2.0 * ag_all + rs_all), m * rs_all + z2_gathers * ag_all, rs_all + ag_all], 2.0 * rs_all)
        # per layer, behind the neighbouring layer's compute: the gather of layer i+1 behind layer i's
        # forward, the reduce-scatter of layer i behind layer i-1's backward (Megatron-FSDP runtime_schedule.md);
        # the first gather and the last reduce-scatter of a pass have nothing to hide behind; what is hidden
        # slows the compute it overlaps by OVERLAP_SLOWDOWN of its duration
        r, a = rs_bw / layers + lat, ag_bw / layers + lat
        f, b = c["time_layer_fwd_s"], c["time_layer_bwd_s"]

        def behind(comm, window):
            """Exposed time of ``layers`` per-layer collectives of ``comm`` s, all but the edge one behind a
            layer's ``window`` s of compute."""
            return comm + (layers - 1.0) * (np.maximum(comm - window, 0.0) + OVERLAP_SLOWDOWN * np.minimum(comm, window))

        rs_step, ag_step = behind(r, b), behind(a, f)  # once per step: after the last backward, in the first forward
        # ZeRO-3 per micro-batch: gathers in the forward; in the backward the gather of layer i-1 and the
        # reduce-scatter of layer i+1 share layer i's backward (the last layer stays gathered from the forward)
        zero3_mb = ag_step + r + (layers - 1.0) * (np.maximum(a + r - b, 0.0) + OVERLAP_SLOWDOWN * np.minimum(a + r, b))
        hidden = np.select([z >= 3, z >= 2, z >= 1], [m * zero3_mb, m * rs_step + z2_gathers * ag_step, rs_step + ag_step],
                           behind(2.0 * r, b))  # ZeRO-0: a gradient all-reduce, bucket by bucket
        dp_exposed = np.where(overlaps, hidden, dp_total)
        return {
            "time_tp_comm_mb_s": tp_exposed,
            "time_cp_comm_mb_s": cp_exposed,
            "time_ep_comm_mb_s": ep,
            "time_pp_comm_mb_s": pp,
            "time_dp_comm_s": dp_total,
            "time_dp_comm_exposed_s": dp_exposed,
        }
