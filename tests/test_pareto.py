"""Pareto masks, ranks and hypervolume against brute-force definitions."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dse.store.pareto import front_table, hypervolume, nondominated_mask, nondominated_rank, reference_point, to_minimization


def brute_mask(F: np.ndarray) -> np.ndarray:
    """O(n^2) definition: a row is kept unless some row is <= everywhere and < somewhere."""
    n = len(F)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if i != j and np.all(F[j] <= F[i]) and np.any(F[j] < F[i]):
                keep[i] = False
                break
    return keep


def brute_hv(F: np.ndarray, ref: np.ndarray) -> float:
    """Exact hypervolume by inclusion over the grid cells the points' coordinates make."""
    F = F[np.all(F < ref, axis=1)]
    if len(F) == 0:
        return 0.0
    axes = [np.unique(np.concatenate([F[:, j], [ref[j]]])) for j in range(F.shape[1])]
    total = 0.0
    for cell in itertools.product(*(range(len(a) - 1) for a in axes)):
        lo = np.array([axes[j][c] for j, c in enumerate(cell)])
        hi = np.array([axes[j][c + 1] for j, c in enumerate(cell)])
        if np.any(np.all(F <= lo, axis=1)):
            total += float(np.prod(hi - lo))
    return total


small_ints = arrays(np.float64, st.tuples(st.integers(0, 30), st.integers(1, 4)), elements=st.integers(0, 6).map(float))


@settings(max_examples=150, deadline=None)
@given(small_ints)
def test_mask_matches_brute_force(F):
    assert np.array_equal(nondominated_mask(F), brute_mask(F))


@settings(max_examples=60, deadline=None)
@given(small_ints)
def test_ranks_peel_fronts(F):
    rank = nondominated_rank(F)
    assert (rank >= 1).all() or len(F) == 0
    for r in range(1, int(rank.max(initial=0)) + 1):
        rest = rank >= r
        assert np.array_equal(brute_mask(F[rest]), rank[rest] == r)


@settings(max_examples=80, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(0, 12), st.integers(2, 3)), elements=st.integers(0, 5).map(float)))
def test_hypervolume_matches_cell_count(F):
    ref = np.full(F.shape[1], 6.0)
    assert hypervolume(F, ref) == pytest.approx(brute_hv(F, ref))


def test_hypervolume_known_values():
    assert hypervolume(np.array([[1.0, 1.0]]), [2.0, 3.0]) == pytest.approx(2.0)
    assert hypervolume(np.array([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]]), [3.0, 3.0]) == pytest.approx(6.0)
    assert hypervolume(np.array([[0.0, 0.0, 0.0]]), [1.0, 2.0, 3.0]) == pytest.approx(6.0)
    assert hypervolume(np.array([[5.0, 5.0]]), [3.0, 3.0]) == 0.0  # beyond the reference point
    assert hypervolume(np.zeros((0, 2)), [1.0, 1.0]) == 0.0


def test_hypervolume_3d_random_matches_monte_carlo():
    rng = np.random.default_rng(1)
    F = rng.random((40, 3))
    F = F / np.linalg.norm(F, axis=1, keepdims=True)  # a curved front
    ref = np.ones(3) * 1.1
    samples = rng.random((200_000, 3)) * ref
    dominated = np.zeros(len(samples), dtype=bool)
    for p in F:
        dominated |= np.all(samples >= p, axis=1)
    mc = dominated.mean() * np.prod(ref)
    assert hypervolume(F, ref) == pytest.approx(mc, rel=0.02)


def test_large_three_objective_front_is_fast_and_right():
    rng = np.random.default_rng(0)
    F = rng.random((3000, 3))
    mask = nondominated_mask(F)
    sub = rng.choice(3000, 300, replace=False)
    # a sampled row is on the front iff no row of the full set dominates it
    for i in sub:
        dominated = np.any(np.all(F <= F[i], axis=1) & np.any(F < F[i], axis=1))
        assert mask[i] == (not dominated)


def test_directions_and_nan():
    F = to_minimization(np.array([[1.0, 5.0], [np.nan, 2.0]]), ["min", "max"])
    assert F.tolist() == [[1.0, -5.0], [np.inf, -2.0]]
    with pytest.raises(ValueError):
        to_minimization(np.ones((1, 2)), ["min", "up"])


def test_reference_point_is_beyond_worst():
    F = np.array([[1.0, 10.0], [3.0, 2.0], [np.inf, 1.0]])
    ref = reference_point(F)
    assert ref[0] > 3.0 and ref[1] > 10.0


def test_front_table_filters_dedupes_and_orders():
    frame = pd.DataFrame({
        "gpu": ["a", "a", "b", "c", "d", "e"],
        "speed": [5.0, 5.0, 3.0, 4.0, 9.0, 1.0],  # max
        "cost": [5.0, 5.0, 1.0, 4.0, 9.0, 0.5],  # min
        "ok": [True, True, True, True, False, True],
    })
    front = front_table(frame, {"speed": "max", "cost": "min"}, feasible="ok", dedupe=["gpu"])
    assert front["gpu"].tolist() == ["a", "c", "b", "e"]  # best speed first; 'd' infeasible; 'a' once
    assert front["front_index"].tolist() == [1, 2, 3, 4]
    assert (front["pareto_rank"] == 1).all()
