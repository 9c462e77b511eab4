"""The audit page (admins): filters by actor, action, object type and dates; CSV and JSON exports of the same
selection; the nav link only for admins."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import Node
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(admin_user, django_user_model):
    other = user_with_role(django_user_model, "alice", "operator")
    node = Node.objects.create(name="gpu-9", transport=Node.Transport.LOCAL)
    audit.record("validation.requested", actor=other, obj=node, mode="quick")
    audit.record("node.quarantined", actor=other, obj=node, note="bad HBM")
    audit.record("login.failed", username="mallory")
    old = audit.record("node.created", actor=admin_user, obj=node)
    # a test's time travel, past the append-only queryset on purpose
    QuerySet.update(AuditEvent.objects.filter(id=old.id), when=timezone.now() - timedelta(days=30))
    return node


def _page(client, **query):
    return client.get(reverse("audit:list"), query).content.decode()


def test_the_page_filters_by_actor_action_object_and_dates(operator_client, events):
    page = _page(operator_client)
    assert page.count("<tr><td>") == AuditEvent.objects.count()
    assert "mallory" in page and "bad HBM" in page
    page = _page(operator_client, actor="alice")
    assert "validation.requested" in page and "node.quarantined" in page and "mallory" not in page
    page = _page(operator_client, action="node.quarantined")
    assert "bad HBM" in page and "validation.requested</td>" not in page
    page = _page(operator_client, object_type="nodes.node", since=(timezone.now() - timedelta(days=1)).date())
    assert "node.quarantined" in page and "node.created</td>" not in page and "login.failed</td>" not in page
    page = _page(operator_client, until=(timezone.now() - timedelta(days=20)).date())
    assert "node.created" in page and "node.quarantined</td>" not in page
    assert "<tr><td>" not in _page(operator_client, since="not a date")  # a bad filter selects nothing, not all


def test_exports_honour_the_filters(operator_client, events):
    response = operator_client.get(reverse("audit:export_csv"), {"actor": "alice"})
    assert response["Content-Disposition"].startswith('attachment; filename="cudaweb-audit-')
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["action"] for r in rows] == ["node.quarantined", "validation.requested"]  # newest first
    assert json.loads(rows[0]["detail"]) == {"note": "bad HBM"} and rows[0]["object_repr"] == "gpu-9"
    data = json.loads(operator_client.get(reverse("audit:export_json"), {"action": "login.failed"}).content)
    assert [(e["action"], e["actor"], e["detail"]) for e in data["events"]] == [
        ("login.failed", "", {"username": "mallory"})]


def test_csv_export_cells_a_spreadsheet_would_run_are_made_text(operator_client, django_user_model):
    """OWASP's CSV injection advice: a cell starting with =, +, -, @, tab or CR gets a quote in front."""
    node = Node.objects.create(name="gpu-x", transport=Node.Transport.LOCAL)
    for name in ("-A1-A2", "=HYPERLINK(\"http://x\")", "+1", "@SUM(A1)", "\tx", "\rx", "plain-name"):
        AuditEvent.objects.create(action="node.changed", actor_name=name, object_type="nodes.node",
                                  object_id=str(node.id), object_repr=name)
    response = operator_client.get(reverse("audit:export_csv"), {"action": "node.changed"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode(), newline="")))
    assert sorted(r["actor"] for r in rows) == sorted(
        ["'-A1-A2", "'=HYPERLINK(\"http://x\")", "'+1", "'@SUM(A1)", "'\tx", "'\rx", "plain-name"])
    assert all(r["object_repr"] == r["actor"] for r in rows)


def test_only_admins_see_the_link_and_the_page(client, operator_client, django_user_model):
    assert 'id="nav-audit"' in operator_client.get(reverse("fleet:node_list")).content.decode()
    client.force_login(user_with_role(django_user_model, "op", "operator"))
    assert 'id="nav-audit"' not in client.get(reverse("fleet:node_list")).content.decode()
    assert client.get(reverse("audit:list")).status_code == 403


def test_a_page_action_is_recorded_with_the_client_address(operator_client):
    node = Node.objects.create(name="ws", transport=Node.Transport.LOCAL)
    operator_client.post(reverse("fleet:node_validate", args=[node.id]), {"mode": "nonsense"}, REMOTE_ADDR="198.18.7.7")
    assert not AuditEvent.objects.filter(action="validation.requested").exists()  # a refused form requests nothing
    operator_client.post(reverse("runs:schedules"), {"label": "rack-1", "every_hours": 6, "mode": "quick"},
                         REMOTE_ADDR="198.18.7.7")
    event = AuditEvent.objects.get(action="schedule.created")
    assert (event.actor_name, event.client_address, event.detail["target"]) == ("operator", "198.18.7.7",
                                                                                 "label rack-1")
