"""Validation requests from the pages: a busy node answers with its live run; Redis away is a message, not a 500."""

import pytest
from django.urls import reverse

from cudaweb.nodes.models import Node
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as a page runs: queueing happens at once


@pytest.fixture
def local_node():
    return Node.objects.create(name="gpu-1", transport=Node.Transport.LOCAL, labels=["rack-1"])


def _broker_down(run, budget_s):
    raise queue.BrokerUnavailable("the task queue (Redis) does not answer: Error 111 connecting")


def test_redis_down_on_validate_is_a_message_and_nothing_is_kept(operator_client, local_node, monkeypatch):
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: _broker_down(None, 0))
    response = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "quick"},
                                    follow=True)
    assert response.status_code == 200
    assert "does not answer" in response.content.decode() and "Nothing was queued" in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_redis_down_on_a_bulk_request_says_what_was_queued(operator_client, local_node, monkeypatch):
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: _broker_down(None, 0))
    response = operator_client.post(reverse("fleet:nodes_validate"), {"label": "rack-1", "mode": "quick"},
                                    follow=True)
    assert response.status_code == 200 and "Nothing was queued" in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_a_double_click_gets_the_same_run(operator_client, local_node, monkeypatch):
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    first = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "quick"})
    second = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "full"})
    assert first["Location"] == second["Location"] and ValidationRun.objects.count() == 1


def test_a_bulk_request_is_followed_by_its_batch_whatever_its_size(operator_client, monkeypatch):
    queued = []
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: queued.extend(run.id for run, _ in runs))
    nodes = [Node.objects.create(name="r-%d" % i, transport=Node.Transport.LOCAL, labels=["rack-9"]) for i in range(3)]
    busy = ValidationRun.objects.create(node=nodes[0], status=ValidationRun.Status.RUNNING)
    response = operator_client.post(reverse("fleet:nodes_validate"), {"label": "rack-9", "mode": "quick"})
    assert "?batch=" in response["Location"] and "ids=" not in response["Location"]
    page = operator_client.get(response["Location"]).content.decode()
    assert all(n.name in page for n in nodes)
    busy.refresh_from_db()
    assert busy.batch is not None  # the node's live run answers for it, and the batch page follows it
    assert ValidationRun.objects.filter(batch=busy.batch).count() == 3
    assert sorted(queued) == sorted(ValidationRun.objects.exclude(id=busy.id).values_list("id", flat=True))
