"""Pair plans: every round holds disjoint pairs; the matrix meets every pair once, the ring needs O(1) rounds."""

import itertools

import pytest

from cudaweb.network import plans


@pytest.mark.parametrize("count", range(2, 12))
def test_the_matrix_meets_every_pair_once_in_disjoint_rounds(count):
    rounds = plans.matrix(count)
    pairs = [p for round_ in rounds for p in round_]
    assert sorted(pairs) == list(itertools.combinations(range(count), 2))
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    for round_ in rounds:
        nodes = [n for p in round_ for n in p]
        assert len(nodes) == len(set(nodes))


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8, 9, 64, 1001])
def test_the_ring_gives_every_node_its_neighbours_in_at_most_three_rounds(count):
    rounds = plans.ring(count)
    assert len(rounds) <= 3
    pairs = {p for round_ in rounds for p in round_}
    expected = {tuple(sorted((i, (i + 1) % count))) for i in range(count)}
    assert pairs == expected
    for round_ in rounds:
        nodes = [n for p in round_ for n in p]
        assert len(nodes) == len(set(nodes))


def test_small_sets_get_the_matrix_and_large_ones_the_ring():
    assert plans.plan_for(8) == "matrix" and plans.plan_for(9) == "ring"
