"""/healthz: the database, the broker and a live worker (its heartbeat key); 200 or 503 with JSON, no login."""

import json
import time

import pytest

from cudaweb.embedded import free_port
from cudaweb.validation import queue

pytestmark = pytest.mark.django_db


def _health(client):
    response = client.get("/healthz")
    assert response["Content-Type"] == "application/json"
    return response.status_code, json.loads(response.content)


def test_redis_down_is_a_503_that_names_the_broker(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:%d/0" % free_port()
    status, body = _health(client)
    assert status == 503 and body["database"] == "ok" and body["broker"].startswith("error")
    assert body["worker"].startswith("unknown")


def test_no_worker_heartbeat_is_a_503(client, redis_server):
    broker = queue.broker_client()
    broker.delete(queue.WORKER_HEARTBEAT_KEY)
    broker.close()
    status, body = _health(client)
    assert status == 503 and body == {"database": "ok", "broker": "ok", "worker": body["worker"]}
    assert body["worker"].startswith("error: no worker heartbeat")


def test_a_live_worker_makes_it_healthy(client, celery_worker):
    """The worker writes its heartbeat every WORKER_HEARTBEAT_EVERY_S: wait for it (another test may have
    deleted the key since the worker's last write)."""
    deadline = time.monotonic() + queue.WORKER_HEARTBEAT_EVERY_S + 10
    status, body = _health(client)
    while status != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        status, body = _health(client)
    assert (status, body) == (200, {"database": "ok", "broker": "ok", "worker": "ok"})
    broker = queue.broker_client()
    assert broker.ttl(queue.WORKER_HEARTBEAT_KEY) > 0  # it lapses when the worker is gone
    broker.close()
