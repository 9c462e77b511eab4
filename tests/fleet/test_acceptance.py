"""Accept or quarantine a new node: an immutable, exportable record of who decided, when, and on what."""

import hashlib
import json
import re

import pytest
from django.urls import reverse

from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import Node
from cudaweb.fleet.services import acceptance_decide
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="new-h200", transport=Node.Transport.LOCAL)


def test_accepting_records_the_evidence_and_makes_the_run_the_baseline(node, admin_user):
    run = stored_run(node, real_report(), trigger="wizard")
    record = acceptance_decide(node=node, run=run, decision="accepted", user=admin_user, note="burn-in ok")
    node.refresh_from_db()
    assert node.baseline == run and node.status == Node.Status.PASSING
    assert record.evidence["run"]["id"] == str(run.id) and record.evidence["report"]["verdict"] == "pass"
    canonical = json.dumps(record.evidence, sort_keys=True, separators=(",", ":"))
    assert record.digest == hashlib.sha256(canonical.encode()).hexdigest()


def test_the_record_cannot_be_changed_or_deleted(node, admin_user):
    run = stored_run(node, real_report())
    record = acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user)
    record.note = "edited later"
    with pytest.raises(AcceptanceRecord.Immutable):
        record.save()
    with pytest.raises(AcceptanceRecord.Immutable):
        record.delete()
    assert AcceptanceRecord.objects.get().note == ""


def test_quarantine_holds_even_when_later_runs_pass(node, admin_user):
    run = stored_run(node, real_report())
    acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user)
    stored_run(node, real_report())
    node.refresh_from_db()
    assert node.status == Node.Status.QUARANTINED


def test_a_decision_needs_a_finished_run_of_this_node(node, admin_user):
    other = Node.objects.create(name="other", transport=Node.Transport.LOCAL)
    run = stored_run(other, real_report())
    with pytest.raises(ValueError):
        acceptance_decide(node=node, run=run, decision="accepted", user=admin_user)


def test_the_wizard_decision_exports_as_json_and_prints_as_html(operator_client, node, admin_user):
    run = stored_run(node, real_report(), trigger="wizard")
    page = operator_client.get(reverse("fleet:node_onboard", args=[node.id])).content.decode()
    assert 'id="decision-form"' in page
    token = re.search(r'name="token" value="([0-9a-f-]{36})"', page).group(1)  # this form's own id
    form = {"run": str(run.id), "decision": "accepted", "note": "rack 4, slot 2", "token": token}
    response = operator_client.post(reverse("fleet:onboard_decide", args=[node.id]), form)
    again = operator_client.post(reverse("fleet:onboard_decide", args=[node.id]), form)  # a double click
    record = AcceptanceRecord.objects.get()  # one decision, one record
    assert again.url == record.get_absolute_url()
    assert response.url == record.get_absolute_url()
    html = operator_client.get(record.get_absolute_url()).content.decode()
    assert "Accepted into the fleet" in html and record.digest in html and "rack 4, slot 2" in html
    exported = operator_client.get(reverse("fleet:acceptance_json", args=[record.id]))
    assert exported["Content-Disposition"].startswith("attachment")
    document = json.loads(exported.content)
    assert document["decision"] == "accepted" and document["decided_by"] == admin_user.username
    assert document["digest_sha256"] == record.digest and document["evidence"]["run"]["id"] == str(run.id)
    assert 'Decided: <a href="%s"' % record.get_absolute_url() in operator_client.get(
        reverse("fleet:node_onboard", args=[node.id])).content.decode()
