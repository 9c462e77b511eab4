from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from cudaweb.nodes.models import Node
from cudaweb.validation import queue, reaper, services
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


def test_reaper_interrupts_runs_whose_worker_went_silent_and_runs_them_once_more(node, settings, monkeypatch):
    queued = []
    monkeypatch.setattr(queue, "enqueue", lambda run, budget_s: queued.append(run.id))
    other = Node.objects.create(name="n2", transport=Node.Transport.LOCAL)
    now = timezone.now()
    stale = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING,
                                         heartbeat=now - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 5))
    alive = ValidationRun.objects.create(node=other, status=ValidationRun.Status.RUNNING, heartbeat=now)
    assert reaper.runs_reap(now=now)["interrupted"] == 1
    stale.refresh_from_db()
    alive.refresh_from_db()
    assert stale.status == ValidationRun.Status.INTERRUPTED and "worker was killed or lost" in stale.reason
    assert alive.status == ValidationRun.Status.RUNNING
    (retry,) = stale.retries.all()
    assert retry.status == ValidationRun.Status.PENDING and queued == [retry.id] and retry.mode == stale.mode
    # a retry that is lost too ends for good: one retry only
    ValidationRun.objects.filter(id=retry.id).update(status=ValidationRun.Status.RUNNING, heartbeat=stale.heartbeat)
    reaper.runs_reap(now=now)
    retry.refresh_from_db()
    assert retry.status == ValidationRun.Status.INTERRUPTED and not retry.retries.exists()


def test_one_live_run_per_node_is_a_database_rule(node):
    ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    with pytest.raises(IntegrityError), transaction.atomic():
        ValidationRun.objects.create(node=node, status=ValidationRun.Status.PENDING)
    ValidationRun.objects.create(node=node, status=ValidationRun.Status.PASSED)  # finished runs are not limited


def test_a_second_request_returns_the_live_run(node):
    first = services.run_request(node=node)
    assert services.run_request(node=node, mode="full") == first
    assert ValidationRun.objects.filter(node=node).count() == 1


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


def test_pruning_keeps_the_newest_the_baseline_and_what_a_decision_rests_on(node, admin_user):
    from cudaweb.fleet.models import AcceptanceRecord

    now = timezone.now()
    runs = []
    for age in range(8):  # 8 finished runs, 100 to 107 days old
        run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.PASSED, verdict="pass")
        ValidationRun.objects.filter(id=run.id).update(created=now - timedelta(days=100 + age))
        runs.append(run)
    Node.objects.filter(id=node.id).update(baseline=runs[7], last_run=runs[0])
    AcceptanceRecord.objects.create(node=node, run=runs[6], decision="accepted", decided_by=admin_user,
                                    decided_at=now, evidence={}, digest="0" * 64)
    fresh = ValidationRun.objects.create(node=node, status=ValidationRun.Status.FAILED)
    deleted = services.runs_prune(older_than_days=30, keep_last=2)
    kept = set(ValidationRun.objects.values_list("id", flat=True))
    assert deleted == 5, [runs.index(r) if r in runs else r for r in ValidationRun.objects.all()]
    assert kept == {fresh.id, runs[0].id, runs[6].id, runs[7].id}  # newest two, the decision's, the baseline


def test_a_rack_wide_request_is_published_by_a_worker_and_nothing_twice(settings, monkeypatch,
                                                                       django_capture_on_commit_callbacks):
    from cudaweb.validation import queue, services

    settings.CUDAWEB_FANOUT_MIN = 5
    fanned, direct = [], []
    monkeypatch.setattr(queue, "enqueue_fanout", lambda runs: fanned.append([r.id for r in runs]))
    monkeypatch.setattr(queue, "enqueue_many", lambda pairs: direct.append([r.id for r, _ in pairs]))
    rack = [Node.objects.create(name="r%02d" % i, transport=Node.Transport.LOCAL) for i in range(6)]
    with django_capture_on_commit_callbacks(execute=True):
        runs = services.runs_request(nodes=rack, mode="quick")
    assert fanned == [[r.id for r in runs]] and direct == []  # one call: the request published no run's task
    few = [Node.objects.create(name="f%02d" % i, transport=Node.Transport.LOCAL) for i in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        services.runs_request(nodes=few, mode="quick")
    assert len(direct) == 1 and len(fanned) == 1  # a small request publishes its runs itself
    direct.clear()
    assert services.runs_enqueue(run_ids=[str(r.id) for r in runs]) == 6
    assert sorted(direct[0]) == sorted(r.id for r in runs)
    ValidationRun.objects.filter(id__in=[r.id for r in runs]).update(enqueued=timezone.now())  # as enqueue_many does
    ValidationRun.objects.filter(id=runs[0].id).update(status=ValidationRun.Status.RUNNING)
    assert services.runs_enqueue(run_ids=[str(r.id) for r in runs]) == 0  # a redelivered fan-out: nothing twice


def test_a_node_that_is_some_gpus_of_its_host_runs_the_agent_with_them(node, tmp_path, settings):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    env_log = tmp_path / "env"
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nenv > %s\nexit 3\n" % env_log)
    python.chmod(0o755)
    Node.objects.filter(id=node.id).update(python_path=str(python), visible_devices="1")
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == ValidationRun.Status.AGENT_ERROR
    env = dict(line.split("=", 1) for line in env_log.read_text().splitlines() if "=" in line)
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["CUDAWEB_NODE_DEVICES"] == "1"


def test_the_broker_is_asked_for_every_run_a_fan_out_message_carries(redis_server, settings):
    """A fan-out task's run ids are in its base64 body (argsrepr stops at 1,024 bytes): all 250 are held."""
    import redis

    from cudaweb.celery import app

    rack = [Node.objects.create(name="h%03d" % i, transport=Node.Transport.LOCAL) for i in range(250)]
    runs = ValidationRun.objects.bulk_create([ValidationRun(node=n) for n in rack])
    queue_name = "fanout-test-%d" % id(rack)
    client = redis.Redis.from_url(redis_server)
    original = app.conf.task_default_queue
    app.conf.task_default_queue = queue_name
    try:
        queue.enqueue_fanout(runs)
        assert client.llen(queue_name) == 1
        assert queue.broker_holds([r.id for r in runs]) == {str(r.id) for r in runs}
    finally:
        app.conf.task_default_queue = original
        client.delete(queue_name)
