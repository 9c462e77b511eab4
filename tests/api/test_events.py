"""Health events in the token API: GET /api/v1/events/ filtered by state (open, acknowledged, closed) and klass;
GET /api/v1/events/<id>/ with the node's state, newest run and playbook; POST /api/v1/events/<id>/acknowledge/ by an
operator, with a note, audited and kept once."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.health.models import HealthEvent
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, stored_run
from tests.health.conftest import make_node

pytestmark = pytest.mark.django_db


def _event(node, signature="gpu_fallen_off_bus", klass="hardware", ago=0, **fields):
    at = timezone.now() - timedelta(minutes=ago)
    fields.setdefault("gpu_uuid", "GPU-%08d-0000-0000-0000-000000000000" % HealthEvent.objects.count())
    return HealthEvent.objects.create(node=node, check_id="driver.xid", signature=signature, severity="fail",
                                      klass=klass, first_seen=at, last_seen=at, evidence="NVRM: Xid 79", **fields)


def _ids(client, token, **query):
    answer = client.get("/api/v1/events/", query, **bearer(token))
    assert answer.status_code == 200, answer.content
    return [e["id"] for e in json.loads(answer.content)["events"]]


def test_the_list_filters_by_state_and_class(client, token_for):
    node = make_node("gpu-api-ev")
    fresh = _event(node, ago=1)
    application = _event(node, signature="xid_application", klass="application", ago=2)
    acknowledged = _event(node, ago=3, acknowledged_at=timezone.now(), acknowledged_by_name="op", ack_note="on it")
    closed = _event(node, ago=4, open=False)
    token = token_for("viewer")
    assert _ids(client, token) == [fresh.id, application.id, acknowledged.id, closed.id]
    assert _ids(client, token, state="open") == [fresh.id, application.id]
    assert _ids(client, token, state="acknowledged") == [acknowledged.id]
    assert _ids(client, token, state="closed") == [closed.id]
    assert _ids(client, token, klass="application") == [application.id]
    assert _ids(client, token, state="open", klass="hardware", node="gpu-api-ev") == [fresh.id]
    one = json.loads(client.get("/api/v1/events/", {"state": "acknowledged"}, **bearer(token)).content)["events"][0]
    assert (one["acknowledged_by"], one["ack_note"]) == ("op", "on it") and one["acknowledged_at"]
    for bad in ({"state": "bogus"}, {"klass": "firmware"}):
        assert client.get("/api/v1/events/", bad, **bearer(token)).status_code == 400


def test_an_event_with_its_node_state_run_and_playbook(client, token_for):
    node = make_node("gpu-api-one")
    run = stored_run(node, real_report())
    event = _event(node)
    body = json.loads(client.get("/api/v1/events/%d/" % event.id, **bearer(token_for("viewer"))).content)
    assert (body["id"], body["node"], body["signature"], body["evidence"]) == (
        event.id, "gpu-api-one", "gpu_fallen_off_bus", "NVRM: Xid 79")
    assert body["node_state"] == "ready" and body["latest_run"] == str(run.id)
    assert body["playbook"]["id"] == "gpu_hardware" and body["acknowledged_at"] is None
    missing = client.get("/api/v1/events/%d/" % (event.id + 1000), **bearer(token_for("viewer")))
    assert missing.status_code == 404 and json.loads(missing.content)["error"] == "not_found"


def test_acknowledging_needs_an_operator_and_a_note_is_audited_and_kept_once(client, token_for):
    node = make_node("gpu-api-ack")
    event = _event(node)
    url = "/api/v1/events/%d/acknowledge/" % event.id

    def post(token, body):
        return client.post(url, json.dumps(body), content_type="application/json", **bearer(token))

    assert post(token_for("viewer"), {"note": "mine"}).status_code == 403
    operator = token_for("operator", "api-operator-ack")
    for empty in ({}, {"note": ""}, {"note": "   "}):
        assert post(operator, empty).status_code == 400, empty
    event.refresh_from_db()
    assert event.acknowledged_at is None
    answer = post(operator, {"note": "RMA ticket 77 open"})
    assert answer.status_code == 200, answer.content
    body = json.loads(answer.content)
    assert (body["acknowledged_by"], body["ack_note"]) == ("api-operator-ack", "RMA ticket 77 open")
    (audited,) = AuditEvent.objects.filter(action="event.acknowledged")
    assert audited.actor_name == "api-operator-ack" and audited.detail["event"] == event.id
    again = post(operator, {"note": "again"})
    assert again.status_code == 409 and "acknowledged already" in json.loads(again.content)["detail"]
    event.refresh_from_db()
    assert event.ack_note == "RMA ticket 77 open"
    assert _ids(client, operator, state="acknowledged") == [event.id]
