"""A node speaks only for itself: POST /api/v1/nodes/<name>/watch-report/ takes that node's own credential and
nothing else (no user's token, no other node's credential); what one report can store, tell and cost is bounded;
opening and closing events is audited. Each test is a reproduction of an attack of a hostile node."""

import copy
import json

import pytest

from cudaweb.accounts.models import AuditEvent
from cudaweb.health import machine
from cudaweb.health.models import HealthEvent, NodeLoop, Transition
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import NodeCredential
from cudaweb.nodes.report_credentials import node_credential_issue
from tests.api.conftest import bearer, token_for  # noqa: F401 (a fixture)
from tests.health.conftest import act_policy, loop_settings, make_node  # noqa: F401 (fixtures)
from tests.health.standin import UUID, watch_report

pytestmark = pytest.mark.django_db


def _post(client, name, body, credential):
    return client.post("/api/v1/nodes/%s/watch-report/" % name, data=json.dumps(body),
                       content_type="application/json", **bearer(credential))


@pytest.fixture
def two_nodes(loop_settings, act_policy):
    """gpu-a (the attacker's, with its credential) and gpu-b (a victim with a real fault seen by a look)."""
    from cudaweb.health.ingest import report_ingest

    attacker, victim = make_node("gpu-a"), make_node("gpu-b")
    report_ingest(victim, watch_report("xid13"))  # an open event on the victim
    return attacker, victim, node_credential_issue(node=attacker, by="test")[1]


def test_a_nodes_credential_cannot_post_for_another_node_nor_hide_its_fault(client, two_nodes):
    attacker, victim, credential = two_nodes
    before = list(HealthEvent.objects.filter(node=victim).values_list("id", "open", "count"))
    for body in (watch_report("xid79"), watch_report()):  # a fault to drain it, a clean report to hide its event
        answer = _post(client, "gpu-b", body, credential)
        assert answer.status_code == 403 and "speaks for node gpu-a only" in answer.json()["detail"]
    assert list(HealthEvent.objects.filter(node=victim).values_list("id", "open", "count")) == before
    assert NodeLoop.objects.get(node=victim).state == machine.READY
    assert not Transition.objects.filter(node=victim).exists()
    assert not HookDelivery.objects.filter(node=victim).exists()
    # its own node it may report
    assert _post(client, "gpu-a", watch_report("xid79"), credential).status_code == 202
    assert NodeLoop.objects.get(node=attacker).state == machine.SUSPECT


def test_no_users_token_posts_a_nodes_report_whatever_its_role(client, two_nodes, token_for):
    _, victim, _ = two_nodes
    for role in ("viewer", "operator", "admin"):
        answer = _post(client, "gpu-b", watch_report("xid79"), token_for(role))
        assert answer.status_code == 403 and "own credential" in answer.json()["detail"], role
    assert not HealthEvent.objects.filter(node=victim, signature="gpu_fallen_off_bus").exists()


def test_a_nodes_credential_reads_and_starts_nothing(client, two_nodes):
    """It is no user's token: the fleet's nodes, runs, events and audit, validation and network tests refuse it."""
    _, _, credential = two_nodes
    for method, url, body in (("get", "/api/v1/nodes/", None), ("get", "/api/v1/nodes/gpu-b/", None),
                              ("get", "/api/v1/events/", None), ("get", "/api/v1/audit/", None),
                              ("post", "/api/v1/nodes/gpu-b/validate/", {"mode": "burnin", "burnin_seconds": 86400}),
                              ("post", "/api/v1/nodes/gpu-a/validate/", {"mode": "quick"}),
                              ("post", "/api/v1/network-tests/", {"nodes": ["gpu-a", "gpu-b"]}),
                              ("post", "/api/v1/nodes/gpu-a/credential/", {})):
        answer = getattr(client, method)(url, data=json.dumps(body) if body else None,
                                         content_type="application/json", **bearer(credential))
        assert answer.status_code == 401, (url, answer.status_code)


def test_a_revoked_or_replaced_credential_is_refused(client, two_nodes):
    attacker, _, credential = two_nodes
    node_credential_issue(node=attacker, by="test")  # a new one: the old one is revoked
    assert _post(client, "gpu-a", watch_report(), credential).status_code == 401
    assert NodeCredential.objects.filter(node=attacker, revoked=None).count() == 1


def test_reports_past_the_limit_a_minute_are_refused_with_429(client, two_nodes, settings):
    settings.CUDAWEB_NODE_REPORTS_PER_MINUTE = 3
    _, _, credential = two_nodes
    codes = [_post(client, "gpu-a", watch_report(), credential).status_code for _ in range(5)]
    assert codes == [202, 202, 202, 429, 429]
    answer = _post(client, "gpu-a", watch_report(), credential)
    assert answer["Retry-After"] == "60" and "CUDAWEB_NODE_REPORTS_PER_MINUTE" in answer.json()["detail"]


def _flood(count, evidence_size=4000):
    """A watch report of `count` failing findings (200 checks at most, the schema's own cap, each with its share of
    signatures) with long evidence: what a hostile node can send within the agent's schema."""
    report = watch_report()
    template = next(c for c in report["checks"] if c["id"] == "driver.xid")
    checks = min(count, 200)
    report["checks"] = [dict(copy.deepcopy(template), id="flood.c%d" % i, status="fail", summary="finding %d" % i,
                             signatures=(["xid_critical", "gpu_fallen_off_bus"] + ["made_up_%d_%d" % (i, k) for k in
                                         range(count)])[:max(1, count // 200)],
                             evidence="E" * evidence_size) for i in range(checks)]
    return report


def test_a_flood_of_findings_stores_the_cap_and_sends_one_webhook(client, two_nodes, settings):
    attacker, _, credential = two_nodes
    answer = _post(client, "gpu-a", _flood(500), credential)
    assert answer.status_code == 202
    data = answer.json()
    assert data["events_new"] == settings.CUDAWEB_NODE_REPORT_MAX_FINDINGS == 64
    assert data["findings_dropped"] == 400 - 64  # 200 checks x 2 signatures
    assert HealthEvent.objects.filter(node=attacker).count() == 64
    assert all(len(e.evidence) <= 4000 for e in HealthEvent.objects.filter(node=attacker))
    webhooks = HookDelivery.objects.filter(node=attacker, kind=HookDelivery.Kind.WEBHOOK, event="health_event")
    assert webhooks.count() == 1 and "64 new" in webhooks.get().payload["text"]


def test_events_a_node_opens_in_a_day_stop_at_its_cap(client, two_nodes, settings):
    """A node that comes and goes with made-up findings (each report opens new events and closes the last ones)
    stops adding rows at CUDAWEB_NODE_NEW_EVENTS_PER_DAY; what it already has still grows."""
    settings.CUDAWEB_NODE_NEW_EVENTS_PER_DAY = 100
    attacker, _, credential = two_nodes
    dropped = []
    for round_ in range(3):
        report = _flood(64 * 200, evidence_size=10)
        for check in report["checks"]:
            check["signatures"] = ["r%d_%s" % (round_, name) for name in check["signatures"]]
        answer = _post(client, "gpu-a", report, credential)
        assert answer.status_code == 202
        dropped.append(answer.json()["findings_dropped"])
    assert HealthEvent.objects.filter(node=attacker).count() == 100
    # 200 checks of 64 signatures each: 16 a check are read (MAX_SIGNATURES), 64 a report kept, 100 a day opened
    assert dropped == [3200 - 64, 3200 - 36, 3200]
    again = _post(client, "gpu-a", _flood(64 * 200, evidence_size=10), credential).json()
    assert again["events_new"] == 0


def test_a_gpu_named_by_index_or_free_text_is_no_gpu(client, two_nodes):
    attacker, _, credential = two_nodes
    report = watch_report("xid79")
    xid = next(c for c in report["checks"] if c["id"] == "driver.xid")
    finding = {"status": "fail", "signatures": ["xid_critical"], "summary": "Xid 79"}
    xid["gpus"] = [dict(finding, index=0, uuid="0"), dict(finding, index=1, uuid="--help"),
                   dict(finding, index=2, uuid=UUID.upper()), dict(finding, index=3, uuid=UUID)]
    assert _post(client, "gpu-a", report, credential).status_code == 202
    gpus = set(HealthEvent.objects.filter(node=attacker, check_id="driver.xid").values_list("gpu_uuid", flat=True))
    assert gpus == {UUID}


def test_opening_and_closing_events_by_a_node_is_audited(client, two_nodes):
    attacker, _, credential = two_nodes
    _post(client, "gpu-a", watch_report("xid13"), credential)
    _post(client, "gpu-a", watch_report(), credential)
    rows = list(AuditEvent.objects.filter(action="node.report", object_id=str(attacker.pk)).order_by("id"))
    assert [(r.detail["source"], r.detail["opened_count"], r.detail["closed"]) for r in rows] == [
        ("node", 1, 0), ("node", 0, 1)]
    assert "xid_application" in rows[0].detail["opened"][0]
