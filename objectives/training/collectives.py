"""Alpha-beta costs of NCCL-style collectives over a two-tier network, vectorized.

A communication group of ``group`` ranks placed ``stride`` ranks apart (tp innermost with stride 1, then
cp, ep/dp, pp outermost; docs/architecture.md) has ``g_in = clip(scaleup_size / stride, 1, group)`` members inside
one scale-up domain (NVLink) and ``g_out = group / g_in`` domains. Collectives run hierarchically
(reduce-scatter inside the domain, then across domains on every GPU's own NIC in parallel, rail-optimized;
then all-gather inside), the ring bandwidth terms of Thakur et al. (2005) and Patarasuk & Yuan (2009):

    all-reduce of n bytes:  2(g_in-1)/g_in * n/B_up + 2(g_out-1)/g_out * (n/g_in)/B_out
    reduce-scatter or all-gather: half of that.

All-reduce latency uses a tree depth, 2*ceil(log2 g) hops of alpha per tier, as NCCL picks tree or
NVLS-tree algorithms once rings get long; reduce-scatter and all-gather have only ring algorithms in NCCL,
so their latency is (g-1) hops per tier (NCCL tuning model, hardware-catalog S28). Bandwidths are bytes/s per GPU
per direction; ``B_out`` already carries the NIC efficiency. Ring collectives pass data to the next
domain on the same rail, which in a rail-optimized fat tree mostly shares a leaf, so they use ``B_out``;
all-to-all and pipeline sends spread over the fabric and cross the leaf uplinks, so they use ``B_cross``
(``B_out`` over the oversubscription the job meets; objectives.training.topology).

A job is placed so that a group that fits in a domain sits inside one (on a 72-GPU NVL72 rack a job of
power-of-two groups uses 64 GPUs per rack, as Slurm's ``--segment`` does): ``g_in`` counts whole members.

Ring sends (context-parallel ring attention, pipeline stages) move in lockstep: every rank sends to its
neighbour, and a step ends when its slowest hop does. A ring whose group spans more than one domain has
hops that leave it, so every step runs at the scale-out tier (NCCL send/recv, Megatron-Core CP and PP).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Tiers", "up_bw", "split_tiers", "spans_domains", "all_reduce_s", "reduce_scatter_s", "reduce_scatter_bw_s",
           "all_gather_s", "all_to_all_s", "routed_all_to_all_s", "p2p_s", "ring_hop_s", "ring_latency_s", "all_reduce_terms",
           "reduce_scatter_terms", "all_to_all_terms", "p2p_terms"]


class Tiers:
    """Per-row bandwidths (bytes/s) and latencies (s) of the scale-up and scale-out tiers."""

    __slots__ = ("size", "bw_up", "bw_out", "lat_up", "lat_out", "bw_cross", "mesh")

    def __init__(self, size, bw_up, bw_out, lat_up, lat_out, bw_cross=None, mesh=0.0):
        self.size, self.bw_up, self.bw_out, self.lat_up, self.lat_out = size, bw_up, bw_out, lat_up, lat_out
        self.bw_cross = bw_out if bw_cross is None else bw_cross  # traffic through the leaf uplinks
        self.mesh = mesh  # 1 where the domain is a full mesh of point-to-point links (no switch), else 0


def up_bw(g_in, tiers: Tiers) -> np.ndarray:
    """Scale-up bandwidth per GPU per direction for traffic among ``g_in`` members of one domain.

    A switched domain (NVLink switches) gives every GPU its whole bandwidth toward any peers. A full mesh
    (AMD Infinity Fabric on an 8-GPU OAM board: 7 links, one to each peer) gives a group of ``g_in`` the
    g_in - 1 links to its members only: (g_in - 1) / (size - 1) of the aggregate, one link for a pair
    (AMD MI300X platform: 64 GB/s per direction to each peer; RCCL runs one ring per link)."""
    if not np.any(tiers.mesh):
        return tiers.bw_up
    share = np.minimum((g_in - 1.0) / np.maximum(tiers.size - 1.0, 1.0), 1.0)
    return tiers.bw_up * np.where(tiers.mesh > 0, np.maximum(share, 1.0 / np.maximum(tiers.size - 1.0, 1.0)), 1.0)


def split_tiers(group: np.ndarray, stride: np.ndarray, tiers: Tiers) -> tuple[np.ndarray, np.ndarray]:
    """(g_in, g_out): members of a group inside one scale-up domain, and the number of domains it spans."""
    g_in = np.minimum(np.maximum(np.floor(tiers.size / stride), 1.0), group)  # np.clip, at half its cost
    return g_in, group / g_in


def spans_domains(group, stride, tiers: Tiers) -> np.ndarray:
    """True where some group of ``group`` ranks ``stride`` apart has members in more than one domain."""
    return split_tiers(group, stride, tiers)[1] > 1.0


def _depth(g: np.ndarray) -> np.ndarray:
    """ceil(log2 g) for whole g >= 1, exactly and without a logarithm: the binary exponent of g - 1."""
    return np.frexp(g - 1.0)[1].astype(np.float64)


def all_reduce_s(nbytes, group, stride, tiers: Tiers) -> np.ndarray:
    """Hierarchical ring all-reduce time of ``nbytes`` per rank (0 for a group of one)."""
    bw, lat = all_reduce_terms(nbytes, group, stride, tiers)
    return bw + lat


def all_reduce_terms(nbytes, group, stride, tiers: Tiers) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth term, latency term) of :func:`all_reduce_s`, which is their sum."""
    g_in, g_out = split_tiers(group, stride, tiers)
    bw = 2.0 * (g_in - 1.0) / g_in * nbytes / up_bw(g_in, tiers) + 2.0 * (g_out - 1.0) / g_out * (nbytes / g_in) / tiers.bw_out
    return bw, 2.0 * _depth(g_in) * tiers.lat_up + 2.0 * _depth(g_out) * tiers.lat_out


def reduce_scatter_s(nbytes, group, stride, tiers: Tiers, split=None) -> np.ndarray:
    """Reduce-scatter of ``nbytes`` per rank (input size): half an all-reduce's bandwidth, ring latency.
    ``split``: ``split_tiers(group, stride, tiers)``, where the caller has it already."""
    bw, lat = reduce_scatter_terms(nbytes, group, stride, tiers, split)
    return bw + lat


def reduce_scatter_terms(nbytes, group, stride, tiers: Tiers, split=None) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth term, latency term) of :func:`reduce_scatter_s` (and of an all-gather), which is their sum."""
    split = split or split_tiers(group, stride, tiers)
    return reduce_scatter_bw_s(nbytes, split, tiers), ring_latency_s(group, stride, tiers, split)


def reduce_scatter_bw_s(nbytes, split, tiers: Tiers) -> np.ndarray:
    """The bandwidth term of :func:`reduce_scatter_s`, given ``split_tiers`` of its group."""
    g_in, g_out = split
    return (g_in - 1.0) / g_in * nbytes / up_bw(g_in, tiers) + (g_out - 1.0) / g_out * (nbytes / g_in) / tiers.bw_out


def ring_latency_s(group, stride, tiers: Tiers, split=None) -> np.ndarray:
    """Latency of one ring reduce-scatter or all-gather: (g-1) hops on each tier (``split`` as above)."""
    g_in, g_out = split or split_tiers(group, stride, tiers)
    return (g_in - 1.0) * tiers.lat_up + (g_out - 1.0) * tiers.lat_out


all_gather_s = reduce_scatter_s  # all-gather to ``nbytes`` per rank costs the same as its reduce-scatter


def all_to_all_s(nbytes, group, stride, tiers: Tiers) -> np.ndarray:
    """All-to-all where every rank sends ``nbytes`` spread evenly over the group.

    The share for peers in other domains leaves on the rank's NIC while the in-domain share crosses
    NVLink at the same time; the slower of the two sets the time.
    """
    bw, lat = all_to_all_terms(nbytes, group, stride, tiers)
    return bw + lat


def all_to_all_terms(nbytes, group, stride, tiers: Tiers) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth term, latency term) of :func:`all_to_all_s`, which is their sum."""
    g_in, g_out = split_tiers(group, stride, tiers)
    inside = (g_in - 1.0) / group * nbytes / up_bw(g_in, tiers)
    outside = (group - g_in) / group * nbytes / tiers.bw_cross
    lat = (g_in > 1) * tiers.lat_up + (g_out > 1) * tiers.lat_out
    return np.maximum(inside, outside), lat * (group > 1)


def routed_all_to_all_s(nbytes, group, stride, tiers: Tiers, topk, max_domains) -> np.ndarray:
    """An MoE dispatch (or combine) of ``nbytes`` per rank, ``topk`` copies of each token, over an expert-parallel
    group, with node-limited routing where ``max_domains`` > 0 (DeepSeek-V3, arXiv 2412.19437 Sec. 2.1.2 and
    3.2.2: each token goes to experts on at most M nodes, and crosses the fabric once per node, its copies for
    that node's experts forwarded over NVLink): a token's cross-domain copies fall from topk x (g_out - 1) /
    g_out to min(topk, M) x (g_out - 1) / g_out, and every copy crosses the scale-up domain once, directly or
    after the fabric. ``max_domains`` 0: :func:`all_to_all_s`."""
    bw, lat = all_to_all_terms(nbytes, group, stride, tiers)
    g_in, g_out = split_tiers(group, stride, tiers)
    limited = (max_domains > 0) & (g_out > 1.0)
    share = np.minimum(1.0, np.where(max_domains > 0, max_domains, topk) / np.maximum(topk, 1.0))
    outside = share * (group - g_in) / group * nbytes / tiers.bw_cross
    inside = (group - 1.0) / group * nbytes / up_bw(g_in, tiers)
    return np.where(limited, np.maximum(inside, outside), bw) + lat


def p2p_s(nbytes, group, stride, tiers: Tiers) -> np.ndarray:
    """One lockstep send of ``nbytes`` between the pipeline stages of a group of ``group`` stages
    ``stride`` ranks apart: over NVLink when every stage of the group shares a domain, else at the pace of
    the boundary that leaves it, through the leaf uplinks (stages are far apart in the fabric)."""
    inside = ~spans_domains(group, stride, tiers)
    return np.where(inside, nbytes / up_bw(2.0, tiers) + tiers.lat_up, nbytes / tiers.bw_cross + tiers.lat_out)


def p2p_terms(nbytes, group, stride, tiers: Tiers) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth term, latency term) of :func:`p2p_s`, which is their sum."""
    inside = ~spans_domains(group, stride, tiers)
    return (np.where(inside, nbytes / up_bw(2.0, tiers), nbytes / tiers.bw_cross),
            np.where(inside, tiers.lat_up, tiers.lat_out))


def ring_hop_s(nbytes, group, stride, tiers: Tiers) -> np.ndarray:
    """One step of a ring of sends (context-parallel ring attention): every rank sends ``nbytes`` to the
    next of its ``group`` ranks ``stride`` apart; the step ends with its slowest hop. A ring over more than
    one domain has hops that leave it, on the NIC at ``B_out``: its domains are neighbours in the job, and
    NCCL routes a send to another rail over NVLink onto the receiver's rail first (PXN,
    NCCL_P2P_PXN_LEVEL), so the hop stays under one leaf."""
    inside = ~spans_domains(group, stride, tiers)
    return np.where(inside, nbytes / up_bw(2.0, tiers) + tiers.lat_up, nbytes / tiers.bw_out + tiers.lat_out)
