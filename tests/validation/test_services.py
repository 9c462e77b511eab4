from datetime import timedelta

import pytest
from django.utils import timezone

from cudaweb.nodes.models import Node
from cudaweb.validation import services
from cudaweb.validation.models import ValidationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="n1", transport=Node.Transport.LOCAL, python_path="python3")


def test_claim_is_exclusive(node):
    run = ValidationRun.objects.create(node=node)
    assert services.run_claim(run_id=run.id) is True
    assert services.run_claim(run_id=run.id) is False  # a redelivered task does nothing
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.RUNNING and run.started and run.heartbeat


def test_execute_of_a_claimed_run_does_nothing(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    assert services.run_execute(run_id=run.id) is None


def test_reaper_interrupts_runs_whose_worker_went_silent(node, settings):
    now = timezone.now()
    stale = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING,
                                         heartbeat=now - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 5))
    alive = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, heartbeat=now)
    assert services.runs_reap_stale(now=now) == 1
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert stale.status == ValidationRun.Status.INTERRUPTED and "worker was killed or lost" in stale.reason
    assert alive.status == ValidationRun.Status.RUNNING


def test_finish_never_overwrites_a_terminal_state(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.PASSED)
    assert services.run_finish(run=run, status=ValidationRun.Status.INTERRUPTED) is False
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.PASSED


def test_the_agent_is_told_the_nodes_previous_validation(node, tmp_path, settings):
    """Kernel-log Xid errors older than the previous validation are history: the agent gets --since."""
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    argv_log = tmp_path / "argv"
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho \"$@\" > %s\nexit 3\n" % argv_log)
    python.chmod(0o755)
    Node.objects.filter(id=node.id).update(python_path=str(python))
    earlier = timezone.now() - timedelta(days=1)
    ValidationRun.objects.create(node=node, status=ValidationRun.Status.PASSED, finished=earlier)
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == ValidationRun.Status.AGENT_ERROR
    args = argv_log.read_text().split()
    assert args[args.index("--since") + 1] == earlier.isoformat()
