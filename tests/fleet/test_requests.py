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
    monkeypatch.setattr(queue, "enqueue", _broker_down)
    response = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "quick"},
                                    follow=True)
    assert response.status_code == 200
    assert "does not answer" in response.content.decode() and "Nothing was queued" in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_redis_down_on_a_bulk_request_says_what_was_queued(operator_client, local_node, monkeypatch):
    monkeypatch.setattr(queue, "enqueue", _broker_down)
    response = operator_client.post(reverse("fleet:nodes_validate"), {"label": "rack-1", "mode": "quick"},
                                    follow=True)
    assert response.status_code == 200 and "Nothing was queued" in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_a_double_click_gets_the_same_run(operator_client, local_node, monkeypatch):
    monkeypatch.setattr(queue, "enqueue", lambda run, budget_s: None)
    first = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "quick"})
    second = operator_client.post(reverse("fleet:node_validate", args=[local_node.id]), {"mode": "full"})
    assert first["Location"] == second["Location"] and ValidationRun.objects.count() == 1
