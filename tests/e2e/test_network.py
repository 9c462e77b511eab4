"""The network between nodes, for real: the agent's pair mode at both ends at once over loopback (gloo; no GPU
here), a node with a wrong interface named, and the node that fails with every partner found."""

import sys
import time

import pytest
from django.urls import reverse

from cudaweb.network.models import NetworkTest, PairResult
from cudaweb.network.services import network_test_request
from cudaweb.nodes.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_done(test, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        test.refresh_from_db()
        if test.status not in (NetworkTest.Status.PENDING, NetworkTest.Status.RUNNING):
            return test
        time.sleep(0.5)
    raise AssertionError("network test still %s" % test.status)


def local(name, **fields):
    return Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=sys.executable,
                               address="127.0.0.1", **fields)


def test_three_nodes_one_with_a_wrong_interface(celery_worker, operator_client):
    good = [local("net-a", pair_port_min=29611, pair_port_max=29620),
            local("net-b", pair_port_min=29631, pair_port_max=29640)]
    bad = local("net-c", network_interface="nosuchif0", pair_port_min=29651, pair_port_max=29660)
    test = wait_done(network_test_request(nodes=good + [bad]))
    assert test.status == NetworkTest.Status.DONE and test.plan == NetworkTest.Plan.MATRIX
    pairs = {(p.node_a.name, p.node_b.name): p for p in test.pairs.select_related("node_a", "node_b")}
    assert set(pairs) == {("net-a", "net-b"), ("net-a", "net-c"), ("net-b", "net-c")}
    ok = pairs[("net-a", "net-b")]
    assert ok.status == PairResult.Status.PASS and ok.gloo_latency_us > 0 and ok.gloo_busbw_gbs > 0
    for key in (("net-a", "net-c"), ("net-b", "net-c")):
        assert pairs[key].status == PairResult.Status.FAIL and pairs[key].failure == "wrong interface", pairs[key].reason
    assert test.suspects == ["net-c"]
    page = operator_client.get(reverse("network:detail", args=[test.id])).content.decode()
    assert "Fails with every partner: <b>net-c</b>" in page and "wrong interface" in page


def test_a_peer_that_never_comes_is_named(celery_worker):
    a = local("lone-a", pair_port_min=29671, pair_port_max=29680)
    b = Node.objects.create(name="lone-b", transport=Node.Transport.LOCAL, python_path="/nonexistent/python3",
                            address="127.0.0.1")
    test = wait_done(network_test_request(nodes=[a, b]))
    (pair,) = test.pairs.all()
    assert pair.status == PairResult.Status.FAIL
    assert pair.failure in ("peer never came", "peer never answered (port blocked, or it never came)"), pair.reason
