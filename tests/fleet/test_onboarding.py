"""Onboarding that recovers: step 4 after any ending offers "validate again", a run without a verdict says why and
what to do, and the decision rests on the node's newest finished run with a verdict, whatever started it."""

import re

import pytest
from django.urls import reverse

from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import Node
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="new-h200", transport=Node.Transport.LOCAL)


def ended(node, status, reason, trigger=ValidationRun.Trigger.WIZARD):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, trigger=trigger)
    run_finish(run=run, status=status, reason=reason)
    return run


def page(client, node):
    response = client.get(reverse("fleet:node_onboard", args=[node.id]))
    assert response.status_code == 200
    return response.content.decode()


def decision_run(html):
    found = re.search(r'name="run" value="([0-9a-f-]{36})"', html)
    return found.group(1) if found else None


def test_a_run_without_a_verdict_explains_itself_and_offers_validate_again(operator_client, node, monkeypatch,
                                                                         django_capture_on_commit_callbacks):
    ended(node, ValidationRun.Status.UNREACHABLE, "cannot reach 10.0.4.42:22: No route to host")
    html = page(operator_client, node)
    assert 'id="no-verdict"' in html and "cannot reach 10.0.4.42:22: No route to host" in html
    assert "sshd runs on the node" in html and 'id="validate-again"' in html
    assert 'id="decision-form"' not in html and "A decision needs a run with a verdict" in html
    queued = []
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: queued.extend(run.id for run, _ in runs))
    with django_capture_on_commit_callbacks(execute=True):
        operator_client.post(reverse("fleet:onboard_validate", args=[node.id]))
    assert len(queued) == 1 and ValidationRun.objects.get(id=queued[0]).mode == "full"
    assert 'id="onboard-step" data-poll-url' in page(operator_client, node)  # the new run, followed live


def test_a_failed_run_offers_both_the_decision_and_validate_again(operator_client, node):
    run = stored_run(node, scaled(real_report(), statuses={"driver.gpu_health": "fail"}), trigger="wizard")
    html = page(operator_client, node)
    assert decision_run(html) == str(run.id) and 'id="validate-again"' in html and 'id="no-verdict"' not in html


def test_a_validation_from_the_node_page_is_the_wizards_too(operator_client, node):
    run = stored_run(node, real_report(), trigger=ValidationRun.Trigger.MANUAL)
    assert decision_run(page(operator_client, node)) == str(run.id)


def test_after_an_ending_without_verdict_the_decision_rests_on_the_newest_run_with_one(operator_client, node):
    earlier = stored_run(node, real_report(), trigger="wizard")
    ended(node, ValidationRun.Status.AGENT_ERROR, "the agent printed nothing on stdout")
    html = page(operator_client, node)
    assert 'id="no-verdict"' in html and decision_run(html) == str(earlier.id)
    assert "the newest run with a verdict" in html


def test_the_decision_refuses_an_older_run_and_a_run_that_is_no_uuid(operator_client, node):
    older = stored_run(node, real_report(), trigger="wizard")
    newer = stored_run(node, real_report(), trigger="manual")
    token = re.search(r'name="token" value="([0-9a-f-]{36})"', page(operator_client, node)).group(1)
    url = reverse("fleet:onboard_decide", args=[node.id])
    for value in ("not-a-uuid", "", str(older.id), "%s" % Node.objects.create(name="x", transport="local").id):
        response = operator_client.post(url, {"run": value, "decision": "accepted", "token": token})
        assert response.status_code == 302 and response.url == reverse("fleet:node_onboard", args=[node.id]), value
    assert not AcceptanceRecord.objects.exists()
    response = operator_client.post(url, {"run": str(newer.id), "decision": "accepted", "token": token})
    assert response.url == AcceptanceRecord.objects.get(run=newer).get_absolute_url()
    html = page(operator_client, node)
    assert "Decided:" in html and 'id="validate-again"' in html and 'id="decision-form"' not in html
