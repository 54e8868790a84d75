"""Communication time of each parallelism, per micro-batch (tp, cp, ep, pp) and per step (dp).

Volumes (16-bit activations and gradients):
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
- Context parallelism (ring attention, Liu et al. 2023; Megatron-Core CP): per layer each rank passes its
  K and V chunk around the cp ring (cp-1 steps) in the forward, K, V and their gradients in the backward,
  overlapped with the attention core; only what exceeds it is exposed. A ring over more than one NVLink
  domain steps at its cross-domain hop (``collectives.ring_hop_s``); a recomputed attention core (full
  recompute; selective on unfused stacks) passes K and V around again.
- Expert parallelism (Lepikhin et al. 2021, GShard): per MoE layer an all-to-all dispatch and combine of
  top-k copies of each token in the forward, and again in the backward, and in the recomputed forward of
  full recompute (6 instead of 4); the fraction ``ep_comm_exposed`` is not hidden where the stack overlaps
  it with compute (Megatron-Core 2025+), all of it otherwise.
- Pipeline parallelism (Narayanan Sec. 4.1): per micro-batch and model chunk, the stage boundary sends
  b·s·h activations forward and gradients back (split over tp by the scatter/gather optimisation when
  sequence parallel); interleaving multiplies the sends by v.
- Data parallelism (Narayanan Sec. 3.2; Megatron distributed optimizer): once per step, a reduce-scatter
  of the gradients and an all-gather of the updated weights (ZeRO-0: an all-reduce). The reduce-scatter
  hides behind the backward of the last micro-batch and the all-gather behind the forward of the first;
  ZeRO-3 gathers weights in every micro-batch's forward and backward and reduce-scatters every
  micro-batch's gradients (Rajbhandari et al. Sec. 5.3), hidden behind that micro-batch's compute.
  Stacks without overlap (Megatron-LM 2021) expose all of it.
Groups are placed tp innermost, then cp, then dp (ep inside dp x cp), pp outermost.
"""

from __future__ import annotations

import numpy as np

from objectives.base import Model, as_codes, lookup
from objectives.calibration import trait
from objectives.collectives import (Tiers, all_reduce_s, all_to_all_s, p2p_s, reduce_scatter_bw_s, reduce_scatter_s,
                                   ring_hop_s, ring_latency_s, split_tiers)
from objectives.topology import scaleout_bw, scaleout_latency_s

__all__ = ["Communication", "tiers_of"]

ACT_BYTES = 2.0  # 16-bit activations and gradients on the wire
_TP_OVERLAP = trait("tp_overlap")
_DP_OVERLAP = trait("dp_overlap")
_EP_OVERLAP = trait("ep_overlap")
_TP_ASYNC = trait("tp_async_dgrad")
_UNFUSED_ATTN = (trait("attention_kernel") == 0).astype(np.float64)  # unfused attention: selective recompute re-runs the core
FULL = 2.0  # recompute code of full recompute (objectives.table CATEGORIES)


def tiers_of(c, cal) -> Tiers:
    """Scale-up and scale-out bandwidth (bytes/s per GPU per direction) and latency of each row.

    Scale-out comes from the fabric (``objectives.topology``): NIC rate x efficiency for ring collectives,
    divided by the oversubscription the job meets above the leaf for all-to-all and pipeline sends; the
    calibrated network latency plus the switch hops of a named network (none for a row that names no
    network, whose figures are those the model was calibrated with).
    """
    bw_out = scaleout_bw(c, cal)
    return Tiers(
        size=c["scaleup_size"],
        bw_up=c["scaleup_gbps"] * 1e9 * cal.scaleup_eff,
        bw_out=bw_out,
        lat_up=cal.scaleup_latency_s,
        lat_out=scaleout_latency_s(c, cal),
        bw_cross=bw_out / np.maximum(c["net_oversub_seen"], 1.0),
    )


class Communication(Model):
    requires = (
        "d_model", "n_kv_heads", "d_head", "seq_len", "moe_experts", "moe_topk", "layers_per_stage",
        "tp", "pp", "cp", "ep", "vp", "dp", "micro_batch", "n_microbatches", "recompute", "sequence_parallel",
        "zero_stage", "params_per_gpu", "time_attn_fwd_s", "time_layer_fwd_s", "time_layer_bwd_s",
        "time_compute_mb_s", "time_qkv_gemm_s", "time_fc1_gemm_s", "scaleup_size", "scaleup_gbps", "nic_gbps", "net_eff_rel", "net_oversub_seen",
        "net_hop_latency_s", "net_hops", "stack",
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

        # context parallel ring: (cp-1) K+V chunk passes fwd, K, V, dK, dV bwd; stride tp. Its slowest hop
        # paces each step (collectives.ring_hop_s); a re-run attention core passes K and V again
        kv_chunk = ACT_BYTES * 2.0 * tokens * c["n_kv_heads"] * c["d_head"] / np.minimum(t, c["n_kv_heads"])
        cp_fwd = (cp - 1.0) * ring_hop_s(kv_chunk, cp, t, net)
        rerun = full | ((c["recompute"] == 1.0) & (lookup(_UNFUSED_ATTN, stack) > 0))
        cp_exposed = layers * ((1.0 + rerun) * np.maximum(cp_fwd - c["time_attn_fwd_s"], 0.0)
                               + np.maximum(2.0 * cp_fwd - 2.5 * c["time_attn_fwd_s"], 0.0))

        # expert parallel: dispatch + combine, forward and backward (and the recomputed forward of full
        # recompute); ep group strided by tp inside dp x cp
        routed = (c["moe_experts"] > 0) & (c["ep"] > 1)
        ep = np.zeros(t.shape)
        if routed.any():
            a2a_bytes = ACT_BYTES * tokens * c["moe_topk"] * c["d_model"] / t
            ep_exposed = lookup(np.where(_EP_OVERLAP > 0, cal.ep_comm_exposed, 1.0), stack)
            n_a2a = 4.0 + 2.0 * full
            ep = np.where(routed, layers * n_a2a * all_to_all_s(a2a_bytes, c["ep"], t, net), 0.0) * ep_exposed

        # pipeline: activations forward and gradients back per micro-batch per model chunk; stride tp*cp*dp
        sp_split = np.maximum(t * (c["sequence_parallel"] > 0), 1.0)  # t where sequence parallel, else 1 (t >= 1)
        pp_bytes = act_bytes / sp_split
        pp = np.where(p > 1, 2.0 * c["vp"] * p2p_s(pp_bytes, p, t * cp * c["dp"], net), 0.0)

        # data parallel over dp x cp ranks (stride tp); ZeRO stage decides how often and what hides it.
        # ZeRO-3 / FSDP gathers and reduces layer by layer, so it pays the ring latency once per layer.
        grad_bytes = ACT_BYTES * c["params_per_gpu"]
        dp_group = c["dp"] * cp
        has_dp = dp_group > 1
        split = split_tiers(dp_group, t, net)
        ring_latency = ring_latency_s(dp_group, t, net, split)
        rs = (reduce_scatter_bw_s(grad_bytes, split, net) + ring_latency) * has_dp  # reduce_scatter_s
        per_layer_latency = (layers - 1.0) * ring_latency * has_dp
        z = c["zero_stage"]
        m = c["n_microbatches"]
        bwd_left = np.maximum(rs - layers * c["time_layer_bwd_s"], 0.0)  # not hidden behind a backward
        fwd_left = np.maximum(rs - layers * c["time_layer_fwd_s"], 0.0)  # not hidden behind a forward
        once = bwd_left + fwd_left
        per_mb_rs = np.where(z >= 2, m * bwd_left + fwd_left, once)
        zero3_mb = 3.0 * (rs + per_layer_latency)  # all-gather forward and backward, reduce-scatter
        per_mb_all = m * np.maximum(zero3_mb - c["time_compute_mb_s"], 0.0)
        zero3 = z >= 3
        dp_total = np.where(zero3, m * zero3_mb, np.where(z >= 2, (m + 1.0) * rs, 2.0 * rs))
        dp_exposed = np.where(lookup(_DP_OVERLAP, stack) > 0, np.where(zero3, per_mb_all, per_mb_rs), dp_total)
        return {
            "time_tp_comm_mb_s": tp_exposed,
            "time_cp_comm_mb_s": cp_exposed,
            "time_ep_comm_mb_s": ep,
            "time_pp_comm_mb_s": pp,
            "time_dp_comm_s": dp_total,
            "time_dp_comm_exposed_s": dp_exposed,
        }
