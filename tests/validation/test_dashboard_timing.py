"""The dashboard's own steps of a run (issue 33): the worker marks when it reached the node, started the agent and
had its report; with the queueing, claim and storing they are drawn on the run page's waterfall and answered by
GET /api/v1/runs/<id>/. The node is a local one whose interpreter replays a real H200 report after a pause."""

import re

import pytest
from django.urls import reverse

from cudaweb.api.services import token_issue
from cudaweb.nodes.models import Node
from cudaweb.validation import services
from cudaweb.validation.dashboard_timing import GAPS, STEPS, run_steps
from cudaweb.validation.models import ValidationRun
from tests.conftest import user_with_role
from tests.drift.helpers import REAL

pytestmark = pytest.mark.django_db
AGENT_PAUSE_S = 0.4
TIMED = "h200-gpus1-standard.json"


@pytest.fixture
def finished_run(tmp_path, settings):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    settings.CUDAWEB_RETRY_FIGURES = False  # one agent run: the steps of that run only
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nsleep %s\ncat '%s'\n" % (AGENT_PAUSE_S, REAL / TIMED))
    python.chmod(0o755)
    node = Node.objects.create(name="h200-steps", transport=Node.Transport.LOCAL, python_path=str(python))
    run = ValidationRun.objects.create(node=node, mode="standard")
    assert services.run_execute(run_id=run.id) in ValidationRun.VERDICT_STATUSES
    run.refresh_from_db()
    return run


def test_the_worker_marks_each_of_its_steps_in_order(finished_run):
    steps = run_steps(finished_run)
    assert [s["step"] for s in steps] == list(STEPS)
    times = [s["at"] for s in steps]
    assert times == sorted(times)
    gaps = {s["step"]: s["gap_s"] for s in steps}
    assert gaps["report_received"] >= AGENT_PAUSE_S  # the agent's own time lies between its start and its report
    assert steps[-1]["since_queued_s"] == pytest.approx(
        (finished_run.finished - finished_run.created).total_seconds(), abs=0.002)


def test_the_run_page_draws_the_dashboards_steps_and_the_agent_after_its_start(operator_client, finished_run):
    page = operator_client.get(reverse("runs:run_detail", args=[finished_run.id])).content.decode()
    section = re.search(r'<details class="waterfall" id="waterfall">.*?</details>', page, re.S).group(0)
    for what in GAPS.values():  # waiting for a worker, reaching the node, ... storing the report
        assert "dashboard: %s" % what in section
    assert 'class="wf-dash"' in section
    agent_start = next(s["since_queued_s"] for s in run_steps(finished_run) if s["step"] == "agent_started")
    first_check = min(c["started_s"] for c in finished_run.report["checks"])
    starts = re.findall(r'<tr class="wf-check"><td>[^<]+</td><td>([0-9.]+)</td>', section)
    assert starts and float(starts[0]) == pytest.approx(agent_start + first_check, abs=0.01)


def test_the_api_answers_the_steps(client, django_user_model, finished_run):
    token = token_issue(user=user_with_role(django_user_model, "api-viewer", "viewer"), name="test")[1]
    body = client.get("/api/v1/runs/%s/" % finished_run.id, HTTP_AUTHORIZATION="Bearer %s" % token).json()
    assert [s["step"] for s in body["dashboard_timing"]] == list(STEPS)
    assert body["dashboard_timing"][0]["gap_s"] is None and body["dashboard_timing"][-1]["gap_s"] >= 0


def test_a_run_before_the_marks_draws_no_dashboard_rows(finished_run):
    ValidationRun.objects.filter(id=finished_run.id).update(dashboard_timing={})
    finished_run.refresh_from_db()
    assert [s["step"] for s in run_steps(finished_run)] == ["queued", "claimed", "stored"]
    from cudaweb.fleet.waterfall import run_waterfall

    layout = run_waterfall(report=finished_run.report, steps=run_steps(finished_run))
    assert not layout["dashboard"] and all(row["kind"] != "dashboard" for row in layout["rows"])


def test_marks_the_database_would_not_take_are_lost_and_the_run_is_stored(tmp_path, settings, monkeypatch):
    from django.db import OperationalError
    from django.db.models.query import QuerySet

    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    settings.CUDAWEB_RETRY_FIGURES = False
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\ncat '%s'\n" % (REAL / TIMED))
    python.chmod(0o755)
    update = QuerySet.update

    def refusing(self, **fields):
        if "dashboard_timing" in fields:
            raise OperationalError("the server closed the connection unexpectedly")
        return update(self, **fields)

    monkeypatch.setattr(QuerySet, "update", refusing)
    node = Node.objects.create(name="h200-blink", transport=Node.Transport.LOCAL, python_path=str(python))
    run = ValidationRun.objects.create(node=node, mode="standard")
    assert services.run_execute(run_id=run.id) in ValidationRun.VERDICT_STATUSES
    run.refresh_from_db()
    assert run.dashboard_timing == {} and run.checks.count() == len(run.report["checks"])
    assert [s["step"] for s in run_steps(run)] == ["queued", "claimed", "stored"]
