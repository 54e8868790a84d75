"""Alpha-beta collective costs by hand."""

import numpy as np
import pytest

from objectives.collectives import Tiers, all_reduce_s, all_to_all_s, p2p_s, reduce_scatter_s, split_tiers

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
    assert p2p_s(GB, np.array([4.0]), NET)[0] == pytest.approx(1 / 360)
    assert p2p_s(GB, np.array([8.0]), NET)[0] == pytest.approx(1 / 46.5)
