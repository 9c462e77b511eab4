"""The allreduce plan's bisection (cudaweb/network/collective.py) on a modelled fabric: every node's link has a
rate and a delay, a unit's all-reduce runs at its slowest member's rate and waits for its slowest member's delay at
each ring step. The real agents over a real (simulated) network: tests/e2e/test_simulated_cluster.py."""

import math

import pytest

from cudaweb.network import collective
from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.nodes.models import Node

pytestmark = pytest.mark.django_db(transaction=True)  # each unit of a round runs in its own thread
HEALTHY_GBS, STEP_US = 0.9, 200.0


def fabric(monkeypatch, rates=None, delays_us=None, fails=(), bad_links=()):
    """Replace the agents' run with the model; returns the list of units run, per round."""
    rates, delays_us, ran = rates or {}, delays_us or {}, []

    def run(*, test, round_number, nodes, slot, role):
        names = [n.name for n in nodes]
        ran.append((round_number, names))
        slow_link = any(a in names and b in names for a, b in bad_links)
        fields = {"status": CollectiveResult.Status.PASS, "backend": "gloo", "expected_gbs": 1.0,
                  "busbw_gbs": min(rates.get(n, HEALTHY_GBS) for n in names) / (10 if slow_link else 1),
                  "latency_us": 2 * (len(names) - 1) * max(delays_us.get(n, STEP_US) for n in names)}
        if any(n in fails for n in names):
            fields.update(status=CollectiveResult.Status.FAIL, failure="peer never answered (port blocked, or it "
                          "never came)", busbw_gbs=None, latency_us=None)
        return CollectiveResult.objects.create(test=test, round=round_number, members=names, role=role,
                                               duration_s=1.0, **fields)

    monkeypatch.setattr(collective, "collective_run", run)
    return ran


def cluster(count):
    nodes = [Node.objects.create(name="sim%02d" % i, transport=Node.Transport.LOCAL) for i in range(count)]
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.ALLREDUCE)
    test.nodes.set(nodes)
    return test


def test_a_healthy_set_runs_one_all_reduce(monkeypatch):
    ran = fabric(monkeypatch)
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    assert len(ran) == 1 and ran[0][1] == ["sim%02d" % i for i in range(8)]
    assert test.suspects == [] and "as fast as gloo should be over the slowest link" in summary
    assert "90 % of the 1 GB/s gloo should reach over the slowest link (11.2 % of its line rate, calibrated" in summary


@pytest.mark.parametrize("count,place", [(3, 0), (3, 1), (3, 2), (4, 3), (5, 4), (8, 5), (9, 8), (16, 0), (32, 29)])
@pytest.mark.parametrize("fault", ["rate", "delay", "fails"])
def test_one_slow_node_is_named_in_log2_n_rounds(monkeypatch, count, place, fault):
    slow = "sim%02d" % place
    ran = fabric(monkeypatch, rates={slow: 0.01} if fault == "rate" else None,
                 delays_us={slow: 20000} if fault == "delay" else None, fails=[slow] if fault == "fails" else ())
    test = cluster(count)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    # a failed all-reduce over every node fails the test, bisected all the same; a slow one is a finding of a test DONE
    failed = NetworkTest.Status.FAILED if fault == "fails" else NetworkTest.Status.DONE
    assert test.status == failed and test.suspects == [slow], summary
    rounds = max(number for number, _ in ran) + 1
    assert rounds <= math.ceil(math.log2(count)) + 2, ran  # round 0, the halvings, one or two to confirm
    assert "slow node: %s" % slow in summary
    statuses = {tuple(r.members): r.status for r in test.collectives.all()}
    assert statuses[tuple("sim%02d" % i for i in range(count))] in ("slow", "fail")
    for round_number, names in ran:  # units of a round share no node
        same = [n for r, members in ran if r == round_number for n in members]
        assert len(same) == len(set(same))


def test_a_slow_link_between_two_good_nodes_is_named_as_the_link(monkeypatch):
    fabric(monkeypatch, bad_links=[("sim04", "sim05")])
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    assert test.suspects == ["sim04-sim05"], summary
    assert "slow link" in summary


def test_everything_slow_alike_names_no_one(monkeypatch):
    fabric(monkeypatch, rates={"sim%02d" % i: 0.1 for i in range(8)})
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    assert test.suspects == [] and "both halves are slow" in summary and "no single node" in summary


def test_two_slow_nodes_in_different_halves_are_not_blamed_on_one(monkeypatch):
    fabric(monkeypatch, rates={"sim01": 0.01, "sim06": 0.01})
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    assert test.suspects == [] and "no single node or link stands out" in summary
    assert "more than one node, or something they share" in summary


def test_two_failing_halves_are_reported_as_both(monkeypatch):
    fabric(monkeypatch, fails=["sim01", "sim06"])
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    assert "both halves are slow" in summary


def test_slow_units_compare_latency_per_ring_step_and_ignore_sub_millisecond_noise():
    def unit(members, busbw, latency):
        return CollectiveResult(members=members, status="pass", busbw_gbs=busbw, latency_us=latency)

    four, pair = unit(list("abcd"), 0.9, 6 * 200.0), unit(list("ef"), 0.9, 2 * 210.0)
    assert collective.slow_units([four, pair]) == []  # 6 steps vs 2: alike per step
    noisy = unit(list("gh"), 0.9, 2 * 1900.0)  # 9x per step, but a step under 2 ms
    assert collective.slow_units([pair, noisy]) == []
    late = unit(list("ij"), 0.9, 2 * 20000.0)
    assert collective.slow_units([pair, late]) == [late]


def test_a_busbw_ten_times_lower_outvotes_a_noisy_latency_elsewhere():
    def unit(members, busbw, latency):
        return CollectiveResult(members=members, status="pass", busbw_gbs=busbw, latency_us=latency)

    noisy, slowed = unit(list("abcd"), 0.1, 14859.0), unit(list("efgh"), 0.01, 2953.0)  # measured on this host
    assert collective.slow_units([noisy, slowed]) == [slowed]
    lossy = unit(list("efgh"), 0.07, 192805.0)
    assert collective.slow_units([unit(list("abcd"), 0.25, 6440.0), lossy]) == [lossy]


def test_a_round_that_looks_alike_below_a_slow_group_runs_again_and_finds_the_intermittent_node(monkeypatch):
    ran = fabric(monkeypatch, rates={"sim05": 0.01})
    modelled = collective.collective_run

    def intermittent(*, test, round_number, nodes, slot, role):
        result = modelled(test=test, round_number=round_number, nodes=nodes, slot=slot, role=role)
        if round_number == 2:  # the loss missed this round
            CollectiveResult.objects.filter(id=result.id).update(busbw_gbs=HEALTHY_GBS)
            result.busbw_gbs = HEALTHY_GBS
        return result

    monkeypatch.setattr(collective, "collective_run", intermittent)
    test = cluster(8)
    summary = collective.network_test_allreduce(test=test)
    test.refresh_from_db()
    assert test.suspects == ["sim05"], summary
    assert [r.role for r in test.collectives.filter(round=3)] == ["half (again)", "half (again)"]
    assert max(number for number, _ in ran) == 4
