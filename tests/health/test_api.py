"""The loop in the token API: the node-local health command posts a watch report; GET /api/v1/events/ lists what the
watch saw; /metrics counts the loop's states, events and breaker."""

import json

import pytest
from django.utils import timezone

from cudaweb.health import machine
from cudaweb.health.models import HealthEvent, NodeLoop
from cudaweb.nodes.report_credentials import node_credential_issue
from tests.api.conftest import bearer, token_for  # noqa: F401 (a fixture)
from tests.health.conftest import make_node
from tests.health.standin import watch_report

pytestmark = pytest.mark.django_db


def _post(client, name, body, token):
    return client.post("/api/v1/nodes/%s/watch-report/" % name, data=json.dumps(body),
                       content_type="application/json", **bearer(token))


def test_a_watch_report_posted_by_the_node_becomes_events_and_moves_the_node(client, token_for, loop_settings,
                                                                           act_policy):
    node = make_node("gpu-api-1")
    _, credential = node_credential_issue(node=node, by="test")
    answer = _post(client, "gpu-api-1", watch_report("xid79", "nvlink_growth"), credential)
    assert answer.status_code == 202, answer.content
    data = json.loads(answer.content)
    assert (data["node"], data["state"], data["events_new"], data["findings_dropped"]) == ("gpu-api-1", "suspect",
                                                                                            3, 0)
    answer = _post(client, "gpu-api-1", watch_report("xid13"), credential)
    assert json.loads(answer.content)["state"] == "quarantined"
    _post(client, "gpu-api-1", watch_report("xid13"), credential)
    assert HealthEvent.objects.get(node=node, signature="xid_application").count == 2
    # a user's token may not post a node's report, whatever its role (tests/health/test_node_credentials.py)
    assert _post(client, "gpu-api-1", watch_report(), token_for("admin")).status_code == 403
    quick = watch_report()
    quick["mode"] = "quick"
    for bad in (quick, {"schema": "cudaprobe/1", "mode": "watch"}):
        refused = _post(client, "gpu-api-1", bad, credential)
        assert refused.status_code == 400, refused.content
    assert _post(client, "no-such-node", watch_report(), credential).status_code == 403
    assert client.post("/api/v1/nodes/gpu-api-1/watch-report/", data="{}", content_type="application/json"
                       ).status_code == 401
    # the look after the quarantine took the policy's first rung (auto): the reset is in flight
    assert NodeLoop.objects.get(node=node).state == machine.REMEDIATING


def test_events_by_node_and_since(client, token_for, loop_settings, act_policy):
    from cudaweb.health.ingest import report_ingest

    a, b = make_node("gpu-ev-a"), make_node("gpu-ev-b")
    report_ingest(a, watch_report("nvlink_growth"))
    cut = timezone.now()
    report_ingest(b, watch_report("xid13"))
    token = token_for("viewer")
    every = json.loads(client.get("/api/v1/events/", **bearer(token)).content)
    assert every["count"] == 2 and {e["node"] for e in every["events"]} == {"gpu-ev-a", "gpu-ev-b"}
    only_b = json.loads(client.get("/api/v1/events/", {"node": "gpu-ev-b"}, **bearer(token)).content)
    assert [(e["signature"], e["event_class"]) for e in only_b["events"]] == [("xid_application", "application")]
    since = json.loads(client.get("/api/v1/events/", {"since": cut.isoformat()}, **bearer(token)).content)
    assert [e["node"] for e in since["events"]] == ["gpu-ev-b"]
    assert client.get("/api/v1/events/", {"since": "1700000000"}, **bearer(token)).status_code == 400
    # an offset PostgreSQL refuses (beyond +-15:59) or a moment that leaves the calendar once in UTC is a 400, not a 500
    for far in ("0184-08-30T19:22:04-17:17", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"):
        answer = client.get("/api/v1/events/", {"since": far}, **bearer(token))
        assert answer.status_code in (200, 400), (far, answer.status_code)
    assert json.loads(client.get("/api/v1/events/", {"since": "0184-08-30T19:22:04-17:17"}, **bearer(token)
                                 ).content)["count"] == 2
    assert client.get("/api/v1/events/", {"nod": "x"}, **bearer(token)).status_code == 400
    assert json.loads(client.get("/api/v1/events/", {"node": "nope"}, **bearer(token)).content)["count"] == 0


def test_the_openapi_document_names_the_loop(client):
    doc = json.loads(client.get("/api/v1/openapi.json").content)
    assert "/api/v1/events/" in doc["paths"] and "/api/v1/nodes/{name}/watch-report/" in doc["paths"]
    body = doc["paths"]["/api/v1/nodes/{name}/watch-report/"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["properties"]["mode"] == {"const": "watch"}


def test_metrics_count_states_events_and_the_breaker(client, token_for, loop_settings, act_policy):
    from cudaweb.health.ingest import report_ingest

    node = make_node("gpu-m")
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report("xid79"))
    text = client.get("/metrics", **bearer(token_for("viewer"))).content.decode()
    assert 'cudaweb_loop_nodes{state="quarantined"} 1.0' in text
    assert 'cudaweb_health_events_open{class="hardware",severity="fail"} 2.0' in text
    assert 'cudaweb_health_event_sightings_total{class="hardware",severity="fail"} 4.0' in text
    assert "cudaweb_loop_breaker_open 0.0" in text
