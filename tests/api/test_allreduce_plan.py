"""The allreduce plan through the API, the network page and `manage.py test_network`: asked for, queued, its
rounds shown (the bisection itself: tests/test_network_allreduce.py; for real: tests/e2e/test_simulated_cluster.py)."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.network.tasks import run_network_test
from cudaweb.nodes.models import Node
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def published(monkeypatch):
    queued = []
    monkeypatch.setattr(run_network_test, "apply_async", lambda args, **kw: queued.append(args[0]))
    return queued


@pytest.fixture
def rack():
    return [Node.objects.create(name="gpu-%d" % i, transport=Node.Transport.LOCAL, labels=["rack-1"])
            for i in range(4)]


def _bisected(test):
    names = [n.name for n in test.nodes.order_by("name")]
    rows = [(0, names, "all 4 nodes", "slow", 0.01), (1, names[:2], "half", "pass", 0.3),
            (1, names[2:], "half", "slow", 0.01), (2, [names[2], names[0]], "with a good node", "pass", 0.3),
            (2, [names[3], names[1]], "with a good node", "slow", 0.01)]
    for number, members, role, status, busbw in rows:
        CollectiveResult.objects.create(test=test, round=number, members=members, role=role, status=status,
                                        backend="gloo", busbw_gbs=busbw, latency_us=1500, expected_gbs=1.25,
                                        duration_s=12.5)
    NetworkTest.objects.filter(id=test.id).update(status=NetworkTest.Status.DONE, suspects=[names[3]],
                                                  summary="bisected in 2 more round(s): slow node: %s" % names[3])


def test_the_api_queues_the_plan_and_shows_its_rounds(client, token_for, rack, published):
    response = client.post("/api/v1/network-tests/", {"label": "rack-1", "plan": "allreduce"},
                           content_type="application/json", **bearer(token_for("operator")))
    body = json.loads(response.content)
    assert response.status_code == 202 and body["plan"] == "allreduce" and published == [body["network_test"]]
    bad = client.post("/api/v1/network-tests/", {"label": "rack-1", "plan": "all"}, content_type="application/json",
                      **bearer(token_for("operator")))
    assert bad.status_code == 400
    test = NetworkTest.objects.get(id=body["network_test"])
    _bisected(test)
    detail = json.loads(client.get("/api/v1/network-tests/%s/" % test.id, **bearer(token_for("viewer"))).content)
    assert detail["suspects"] == ["gpu-3"] and [c["round"] for c in detail["collectives"]] == [0, 1, 1, 2, 2]
    assert detail["collectives"][0]["members"] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert detail["collectives"][4]["status"] == "slow" and detail["collectives"][4]["expected_gbs"] == 1.25


def test_the_network_page_starts_the_plan_and_shows_the_rounds(operator_client, rack, published):
    response = operator_client.post(reverse("network:start"), {"label": "rack-1", "plan": "allreduce"})
    test = NetworkTest.objects.get()
    assert response.status_code == 302 and test.plan == NetworkTest.Plan.ALLREDUCE
    _bisected(test)
    page = operator_client.get(reverse("network:detail", args=[test.id])).content.decode()
    assert 'id="rounds"' in page and "Slow: <b>gpu-3</b>" in page and "with a good node" in page
    assert "0.010 GB/s (gloo)" in page and "1.250 GB/s" in page and 'id="matrix"' not in page
    # the page says where gloo's expectation comes from: the line rate times a share measured on a healthy cluster
    assert "the share a healthy gloo cluster was measured\nto reach (11.2 %" in page


def test_the_command_queues_the_plan_and_prints_the_test(rack, published, capsys):
    call_command("test_network", "gpu-0", "gpu-1", "gpu-2", "--plan", "allreduce")
    test = NetworkTest.objects.get()
    assert capsys.readouterr().out.strip() == str(test.id) and test.plan == "allreduce"
    assert list(test.nodes.order_by("name").values_list("name", flat=True)) == ["gpu-0", "gpu-1", "gpu-2"]


def test_the_command_waits_and_exits_1_when_a_slow_node_is_named(rack, capsys, monkeypatch):
    monkeypatch.setattr(run_network_test, "apply_async", lambda args, **kw: _bisected(
        NetworkTest.objects.get(id=args[0])))
    with pytest.raises(SystemExit) as done:
        call_command("test_network", "--label", "rack-1", "--plan", "allreduce", "--wait", "--json")
    assert done.value.code == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["suspects"] == ["gpu-3"] and len(shown["collectives"]) == 5
