"""Alpha-beta collective costs by hand."""

import numpy as np
import pytest

from objectives.training.collectives import Tiers, all_reduce_s, all_to_all_s, p2p_s, reduce_scatter_s, ring_hop_s, split_tiers

# 8-GPU NVLink domains at 360 GB/s, NICs at 46.5 GB/s, no latency: bandwidth terms only
NET = Tiers(size=np.array([8.0]), bw_up=np.array([360e9]), bw_out=np.array([46.5e9]), lat_up=0.0, lat_out=0.0)
GB = 1e9


def test_split_tiers():
    g_in, g_out = split_tiers(np.array([64.0]), np.array([1.0]), NET)
    assert (g_in[0], g_out[0]) == (8, 8)
    g_in, g_out = split_tiers(np.array([64.0]), np.array([8.0]), NET)  # one member per node (dp over tp=8)
    assert (g_in[0], g_out[0]) == (1, 64)


def test_ring_all_reduce_inside_a_node():
    # 2 (g-1)/g n / B = 2 * 7/8 * 1 GB / 360 GB/s
    assert all_reduce_s(GB, np.array([8.0]), np.array([1.0]), NET)[0] == pytest.approx(2 * 7 / 8 / 360)


def test_hierarchical_all_reduce_across_nodes():
    # 64 GPUs = 8 nodes x 8: 2*7/8*n/B_up + 2*7/8*(n/8)/B_out
    t = all_reduce_s(GB, np.array([64.0]), np.array([1.0]), NET)[0]
    assert t == pytest.approx(2 * 7 / 8 / 360 + 2 * 7 / 8 / 8 / 46.5)
    assert reduce_scatter_s(GB, np.array([64.0]), np.array([1.0]), NET)[0] == pytest.approx(t / 2)


def test_all_to_all_bottleneck_is_the_nic():
    # 16 ranks over 2 nodes: 7/16 of the bytes on NVLink, 8/16 on the NIC
    t = all_to_all_s(GB, np.array([16.0]), np.array([1.0]), NET)[0]
    assert t == pytest.approx(max(7 / 16 / 360, 8 / 16 / 46.5))


def test_p2p_inside_and_across():
    """Pipeline sends of a group of pp stages ``stride`` ranks apart: 2 stages 4 apart share an 8-GPU node
    (NVLink, 1 GB / 360 GB/s); 4 stages 4 apart span 16 ranks, so the stage 1 -> 2 boundary leaves the node
    and paces every send (1 GB / 46.5 GB/s; the old rule, stride < domain, said NVLink); stages 8 apart
    are always on different nodes."""
    assert p2p_s(GB, np.array([2.0]), np.array([4.0]), NET)[0] == pytest.approx(1 / 360)
    assert p2p_s(GB, np.array([4.0]), np.array([4.0]), NET)[0] == pytest.approx(1 / 46.5)
    assert p2p_s(GB, np.array([2.0]), np.array([8.0]), NET)[0] == pytest.approx(1 / 46.5)


def test_ring_hop_paced_by_its_cross_node_hop():
    """A context-parallel ring of 8 ranks at stride 1 sits in one node: a step is 1 GB / 360 GB/s. A ring of
    32 (tp 1, cp 32) spans 4 nodes; its 4 node-crossing hops pace every lockstep step at the NIC,
    1 GB / 46.5 GB/s, 7.7x slower (the old rule priced the hop by the stride, 1 < 8: NVLink). A ring of 4
    at stride 2 (tp 2, cp 4) spans 8 ranks, one node: NVLink."""
    assert ring_hop_s(GB, np.array([8.0]), np.array([1.0]), NET)[0] == pytest.approx(1 / 360)
    assert ring_hop_s(GB, np.array([32.0]), np.array([1.0]), NET)[0] == pytest.approx(1 / 46.5)
    assert ring_hop_s(GB, np.array([4.0]), np.array([2.0]), NET)[0] == pytest.approx(1 / 360)


def test_a_full_mesh_gives_a_small_group_only_its_own_links():
    """An 8-GPU Infinity Fabric board is a full mesh: 7 links of 64 GB/s, one to each peer (448 GB/s per
    direction in all, x 0.8 ring efficiency = 358.4 GB/s). A tp 2 pair shares one link, 51.2 GB/s: an
    all-reduce of 1 GB takes 2 x 1/2 x 1 / 51.2 = 19.53 ms, 7x what a switched domain of the same
    aggregate gives (2.79 ms). A tp 4 group has 3 of the 7 links: 2 x 3/4 / (358.4 x 3/7) = 9.77 ms. The
    whole board (g = 8) has all 7, as a switched domain does; a pipeline send to a neighbour takes one link."""
    mesh = Tiers(size=np.array([8.0]), bw_up=np.array([358.4e9]), bw_out=np.array([46.5e9]), lat_up=0.0,
                 lat_out=0.0, mesh=np.array([1.0]))
    switched = Tiers(size=np.array([8.0]), bw_up=np.array([358.4e9]), bw_out=np.array([46.5e9]), lat_up=0.0,
                     lat_out=0.0)
    one = np.array([1.0])
    assert all_reduce_s(GB, 2 * one, one, mesh)[0] == pytest.approx(19.53e-3, rel=1e-3)
    assert all_reduce_s(GB, 2 * one, one, switched)[0] == pytest.approx(2.79e-3, rel=1e-3)
    assert all_reduce_s(GB, 4 * one, one, mesh)[0] == pytest.approx(2 * 3 / 4 / (358.4 * 3 / 7), rel=1e-9)
    assert all_reduce_s(GB, 8 * one, one, mesh)[0] == pytest.approx(all_reduce_s(GB, 8 * one, one, switched)[0])
    assert p2p_s(GB, 2 * one, one, mesh)[0] == pytest.approx(1 / 51.2, rel=1e-9)


def test_node_limited_routing_sends_each_token_once_per_node():
    """DeepSeek-V3's dispatch (arXiv 2412.19437 Sec. 2.1.2, 3.2.2): 8 routed copies of each token over ep 64 =
    8 nodes of 8 GPUs. Unlimited, 56/64 of the copies leave the node: 56/64 x B / 46.5 GB/s (the NIC bounds it).
    Limited to M = 4 nodes, a token crosses the fabric once per node, at most 4 of its 8 copies: 4/8 x 56/64 x B
    / 46.5 GB/s, and every copy crosses NVLink once, directly or forwarded: 63/64 x B / 360 GB/s; the slower
    of the two. B = 1 GB per rank."""
    from objectives.training.collectives import routed_all_to_all_s

    one = np.array([1.0])
    nbytes, group, stride, topk = 1e9 * one, 64.0 * one, 1.0 * one, 8.0 * one
    unlimited = routed_all_to_all_s(nbytes, group, stride, NET, topk, 0.0 * one)
    assert unlimited[0] == pytest.approx(all_to_all_s(nbytes, group, stride, NET)[0], rel=1e-12)
    assert unlimited[0] == pytest.approx(56 / 64 * 1e9 / NET.bw_cross[0], rel=1e-12)
    limited = routed_all_to_all_s(nbytes, group, stride, NET, topk, 4.0 * one)
    assert limited[0] == pytest.approx(max(4 / 8 * 56 / 64 * 1e9 / NET.bw_cross[0], 63 / 64 * 1e9 / 360e9), rel=1e-12)
    # within one node nothing crosses the fabric: the limit changes nothing
    inside = routed_all_to_all_s(nbytes, 8.0 * one, stride, NET, topk, 4.0 * one)
    assert inside[0] == pytest.approx(all_to_all_s(nbytes, 8.0 * one, stride, NET)[0], rel=1e-12)
