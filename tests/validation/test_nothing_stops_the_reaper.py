"""Nothing a node prints and no outage stops the reaper or loses a run (issue 35): figures no arithmetic survives are
the agent's error, named by their field; a report the database refuses is set aside while the others are stored; a
spool file that is no report is set aside once; a kept report waits until it is stored; silence is judged from when
the database came back; a run a dead worker held in Redis is queued again.

Runs on the suite's database; the poison figures reproduce only on PostgreSQL (which refuses Infinity in jsonb) and
are skipped on SQLite. The broker and worker tests use the suite's real Redis and Celery worker."""

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from cudaweb.drift.models import PeerBand
from cudaweb.nodes.models import Node
from cudaweb.common import dbretry
from cudaweb.validation import queue, reaper, report_spool, services
from cudaweb.validation.models import CheckResult, ValidationRun
from tests.conftest import _database_url, wait_for_terminal
from tests.services import REPO

pytestmark = pytest.mark.django_db(transaction=True)
REPORT = REPO / "tests" / "fixtures" / "real" / "h200-gpus2-standard.json"
Status = ValidationRun.Status
AWAY_KEY = "cudaweb:database-away-seen"  # dbretry.AWAY_KEY


def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL refuses what SQLite takes (Infinity in jsonb); .ci/run's PostgreSQL pass runs it")


@pytest.fixture
def spool(settings, tmp_path):
    settings.CUDAWEB_REPORT_SPOOL_DIR = str(tmp_path / "spool")
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    return tmp_path / "spool"


@pytest.fixture
def no_outage_seen(redis_server):
    """The reaper's memory of database outages (this process's and the one in Redis) starts empty."""
    memory = getattr(dbretry, "_away", {})
    memory.update(seen=0.0, shared=0.0)
    client = queue.broker_client()
    client.delete(AWAY_KEY)
    yield
    client.delete(AWAY_KEY)
    client.close()
    memory.update(seen=0.0, shared=0.0)


def real_report():
    return json.loads(REPORT.read_text())


def poisoned(text_figure):
    """A real report's text whose bf16 matmul figure is `text_figure`, as a broken or hostile host would print it."""
    report = real_report()
    check = next(c for c in report["checks"] if "matmul_bf16_tflops" in c["metrics"])
    check["metrics"]["matmul_bf16_tflops"] = 123456.5
    return json.dumps(report).replace("123456.5", text_figure, 1)


def node_printing(tmp_path, text, name):
    out = tmp_path / ("report-" + name)
    out.write_text(text)
    python = tmp_path / ("python-" + name)
    python.write_text("#!/bin/sh\ncat %s\n" % out)
    python.chmod(0o755)
    return Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=str(python))


def peers_stored(count=3):
    """`count` H200 nodes with a stored report each: the peer bands exist, so drift compares against them."""
    for i in range(count):
        run = ValidationRun.objects.create(node=Node.objects.create(name="peer-%d" % i, transport="local"),
                                           status=Status.RUNNING)
        assert services.run_store_report(run=run, report=real_report()) == Status.PASSED
    assert PeerBand.objects.filter(gpu_model="NVIDIA H200", metric="matmul_bf16_tflops", count=count).exists()


@pytest.mark.parametrize("figure", ["1.7e308", "1" + "0" * 400])
def test_a_figure_no_arithmetic_survives_is_the_agents_error_named_by_its_field(tmp_path, spool, figure):
    """1.7e308 TFLOP/s made the drift -Infinity (PostgreSQL refused it: the run stayed RUNNING for good) and an
    integer of 401 digits made drift raise OverflowError (DASHBOARD_ERROR without the report)."""
    postgres_only()
    peers_stored()
    spool.mkdir()  # the worker's spool is there, as on any worker that has kept a report before
    run = ValidationRun.objects.create(node=node_printing(tmp_path, poisoned(figure), "poisoned"))
    assert services.run_execute(run_id=run.id) == Status.AGENT_ERROR
    run.refresh_from_db()
    assert run.status == Status.AGENT_ERROR and "matmul_bf16_tflops" in run.reason and "cuda.matmul" in run.reason
    assert report_spool.location(run.id).endswith(":%s" % (spool / ("%s.json" % run.id)))  # the spool looked in below
    assert list(spool.iterdir()) == []  # nothing kept for the reaper to trip on: no report, no partial, none set aside


def test_a_check_id_reported_twice_is_the_agents_error_naming_it(tmp_path, spool):
    report = real_report()
    report["checks"].append(dict(report["checks"][2]))
    run = ValidationRun.objects.create(node=node_printing(tmp_path, json.dumps(report), "twice"))
    assert services.run_execute(run_id=run.id) == Status.AGENT_ERROR
    run.refresh_from_db()
    assert "names check %s twice" % report["checks"][2]["id"] in run.reason
    assert not CheckResult.objects.filter(run=run).exists()


def kept(spool_dir, run, report, age_s=120):
    report_spool.report_keep(run_id=run.id, report=report).release()
    path = spool_dir / ("%s.json" % run.id)
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_a_kept_report_the_database_refuses_is_set_aside_once_and_the_others_are_reaped(
        spool, settings, caplog, no_outage_seen):
    """A report spooled before figures were checked (by an older worker) whose figure PostgreSQL refused (drift
    -Infinity): before, every reaper pass failed on it ("reaping failed" every 20 s) and nothing else was reaped. A
    spool file is host output too: checked again, the agent's error, set aside once."""
    postgres_only()
    peers_stored()
    bad = real_report()
    next(c for c in bad["checks"] if "matmul_bf16_tflops" in c["metrics"])["metrics"]["matmul_bf16_tflops"] = 1.7e308
    poisoned_run = ValidationRun.objects.create(node=Node.objects.create(name="poisoned", transport="local"),
                                                status=Status.RUNNING, heartbeat=timezone.now())
    good_run = ValidationRun.objects.create(node=Node.objects.create(name="good", transport="local"),
                                            status=Status.RUNNING, heartbeat=timezone.now())
    long_ago = timezone.now() - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 600)
    silent = ValidationRun.objects.create(node=Node.objects.create(name="silent", transport="local"),
                                          status=Status.RUNNING, heartbeat=long_ago)
    poisoned_path = kept(spool, poisoned_run, bad)
    kept(spool, good_run, real_report())
    with caplog.at_level(logging.ERROR):
        counts = reaper.runs_reap()
    assert counts["stored"] == 1 and counts["interrupted"] == 1, counts
    good_run.refresh_from_db()
    silent.refresh_from_db()
    poisoned_run.refresh_from_db()
    assert good_run.status == Status.PASSED and silent.status == Status.INTERRUPTED
    moved = spool / report_spool.QUARANTINE / poisoned_path.name
    assert not poisoned_path.exists() and moved.exists()
    assert poisoned_run.status == Status.AGENT_ERROR and str(moved) in poisoned_run.reason
    assert "matmul_bf16_tflops is 1.7e+308" in poisoned_run.reason
    assert str(moved) in caplog.text
    assert poisoned_run.checks.count() == 0 and poisoned_run.drift == {}
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert reaper.runs_reap()["stored"] == 0  # set aside once: not tried, nor logged, again
    assert "cannot be stored" not in caplog.text


def test_a_truncated_spool_file_is_set_aside_once_and_its_run_stored_from_its_own_column(spool, caplog):
    """The worker ended the run DASHBOARD_ERROR with the report in its column; the spool's copy is truncated. Before,
    an ERROR every pass, and the run never got its check rows."""
    report = real_report()
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING)
    services.run_finish(run=run, status=Status.DASHBOARD_ERROR, report=report, reason="the database was away")
    path = kept(spool, run, report)
    path.write_text(path.read_text()[:1000])
    os.utime(path, (time.time() - 120, time.time() - 120))
    with caplog.at_level(logging.ERROR):
        assert reaper.reports_sweep() == 1
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"])
    assert (spool / report_spool.QUARANTINE / path.name).exists() and not path.exists()
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert reaper.reports_sweep() == 0
    assert caplog.text == ""


def test_a_report_whose_host_never_comes_back_is_stored_from_the_runs_column(spool, monkeypatch):
    """The worker gave up (the database away past its retries) with the report in the run's column; its host and
    spool are gone. Any reaper stores it from the database."""
    from django.db import OperationalError

    report = real_report()
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING)
    real_store = services._run_store_report

    def away(**kwargs):
        raise OperationalError("the database system is shutting down")

    monkeypatch.setattr(services, "_run_store_report", away)
    monkeypatch.setattr(services.settings, "CUDAWEB_DB_RETRY_S", 0.2)
    assert services._run_keep_report(run=run, report=report) == Status.DASHBOARD_ERROR
    monkeypatch.setattr(services, "_run_store_report", real_store)
    for path in spool.glob("*.json"):
        path.unlink()  # the host is gone, with its spool
    ValidationRun.objects.filter(id=run.id).update(finished=timezone.now() - timedelta(seconds=60))
    assert reaper.reports_sweep() == 1
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"]) and not run.report_unstored


def test_a_kept_report_is_not_deleted_when_its_run_was_ended_before_it_was_stored(spool):
    """A long outage: a reaper judged the run lost (INTERRUPTED) while its agent finished. Before, the worker deleted
    the spool copy because the store answered a state that is no verdict: the report was gone."""
    report = real_report()
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING)
    ValidationRun.objects.filter(id=run.id).update(status=Status.INTERRUPTED, reason="no sign of life")
    assert services._run_keep_report(run=run, report=report) == Status.INTERRUPTED
    assert (spool / ("%s.json" % run.id)).exists()
    assert reaper.reports_sweep(min_age_s=0) == 1
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"])


def test_silence_is_judged_from_when_the_database_came_back(spool, settings, no_outage_seen):
    """Heartbeats cannot be written while the database is away: a run silent since before an outage is not lost
    until the database has answered for a whole CUDAWEB_STALE_RUN_S. Before, a pass just after the outage ended every
    run in flight INTERRUPTED and retried it beside its live agent."""
    stale = timezone.now() - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 60)
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING,
                                       heartbeat=stale)
    dbretry.away_note()  # a heartbeat that just failed, in a worker (through Redis)
    dbretry._away["seen"] = 0.0  # this process itself saw nothing: only Redis knows
    assert reaper.runs_reap()["interrupted"] == 0
    run.refresh_from_db()
    assert run.status == Status.RUNNING
    later = timezone.now() + timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 1)
    assert reaper.runs_reap(now=later)["interrupted"] == 1  # the database has answered long enough since


def test_a_run_whose_worker_holds_its_kept_report_is_alive(spool, settings, no_outage_seen):
    stale = timezone.now() - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 60)
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING,
                                       heartbeat=stale)
    path = kept(spool, run, real_report())
    holds = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\ntime.sleep(60)")
    worker = subprocess.Popen([sys.executable, "-c", holds, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "held"
        assert reaper.runs_reap() == {"stored": 0, "interrupted": 0, "requeued": 0, "lost": 0}
    finally:
        worker.kill()
        worker.wait()
    run.refresh_from_db()
    assert run.status == Status.RUNNING


def test_a_spool_that_cannot_take_a_report_says_so_and_leaves_no_partial_file(spool, tmp_path):
    """A full disk: a tmpfs of one page (as root; a real report is larger)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    spool.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(spool)]).returncode != 0:
        pytest.skip("no tmpfs can be mounted here")
    try:
        run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"))
        report = real_report()
        assert len(json.dumps(report)) > 4096
        with pytest.raises(report_spool.SpoolFull, match="could not take the report"):
            report_spool.report_keep(run_id=run.id, report=report).release()
        assert os.listdir(spool) == []
    finally:
        subprocess.run(["umount", str(spool)], check=True)


def test_a_pending_run_whose_message_a_dead_worker_holds_is_queued_again(celery_worker, settings, no_outage_seen):
    """Redis's `unacked` set holds a message delivered to a worker that died (killed with its claim waiting on the
    database) until the visibility timeout, three days. Before, the reaper counted it as queued and the run stayed
    PENDING; now no live worker says it holds it, so it is queued again and the live worker runs it."""
    from cudaweb.celery import app

    settings.CUDAWEB_PENDING_CHECK_S = 0
    node = Node.objects.create(name="orphan", transport=Node.Transport.LOCAL,
                               python_path=str(Path(node_printing_dir()) / "python"))
    run = ValidationRun.objects.create(node=node, enqueued=timezone.now(), enqueue_count=1)
    client = queue.broker_client()
    message = {"body": "", "headers": {"id": str(run.id), "task": "cudaweb.validation.tasks.execute_run",
                                       "argsrepr": "('%s',)" % run.id},
               "properties": {"delivery_tag": "dead-%s" % run.id, "body_encoding": "base64"}}
    tag = "dead-%s" % run.id
    client.hset("unacked", tag, json.dumps([message, "", app.conf.task_default_queue]))
    client.zadd("unacked_index", {tag: time.time()})
    try:
        assert queue.broker_holds([run.id]) == set()
        assert reaper.runs_reap()["requeued"] == 1
        assert wait_for_terminal(run, timeout=60).status == Status.PASSED
    finally:
        client.hdel("unacked", tag)
        client.zrem("unacked_index", tag)
        client.close()


def node_printing_dir():
    folder = Path(os.environ["CUDAWEB_REPORT_SPOOL_DIR"]).parent / "i35-agent"
    folder.mkdir(exist_ok=True)
    python = folder / "python"
    python.write_text("#!/bin/sh\ncat %s\n" % REPORT)
    python.chmod(0o755)
    return folder


def test_validate_node_with_the_database_down_exits_3_without_a_traceback():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings",
               DATABASE_URL="postgres://postgres@127.0.0.1:9/nowhere")
    done = subprocess.run([sys.executable, "manage.py", "validate_node", "n1", "--wait"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "database" in done.stderr


def test_validate_node_wait_follows_a_run_to_its_real_end(spool):
    """Before, --wait stopped at DASHBOARD_ERROR (exit 3) while a reaper stored the report as PASSED shortly after,
    and at INTERRUPTED while the run's retry went on."""
    import threading

    from cudaweb.fleet.management.commands.validate_node import Command

    report = real_report()
    kept_run = ValidationRun.objects.create(node=Node.objects.create(name="kept", transport="local"),
                                            status=Status.RUNNING)
    services.run_finish(run=kept_run, status=Status.DASHBOARD_ERROR, report=report, report_unstored=True,
                        reason="the database was away")
    lost = ValidationRun.objects.create(node=Node.objects.create(name="lost", transport="local"),
                                        status=Status.RUNNING)
    dbretry.retrying(reaper._run_lost_record, run_id=lost.id, reason="the worker was killed")  # not queued
    retry = ValidationRun.objects.get(retry_of=lost)

    def later():
        time.sleep(1.5)
        assert reaper.reports_sweep(min_age_s=0) == 1
        ValidationRun.objects.filter(id=retry.id).update(status=Status.RUNNING)
        services.run_store_report(run=retry, report=report)
        connection.close()

    helper = threading.Thread(target=later)
    helper.start()
    ended = Command()._wait([kept_run, lost])
    helper.join()
    assert [(run.id, run.status) for run in ended] == [(kept_run.id, Status.PASSED), (retry.id, Status.PASSED)]


def test_the_reapers_index_reads_names_and_times_only_and_clears_an_hour_old_partial(spool, monkeypatch):
    """reports_waiting is the spool's index: it opens no report (a pass over many kept reports costs no parsing), and
    a .tmp a writer killed mid-write left is removed once an hour old, never while younger (it may be mid-write)."""
    run_id = uuid.uuid4()
    report_spool.report_keep(run_id=run_id, report={"schema": "cudaprobe/1", "checks": []}).release()
    old, young = spool / ("%s.tmp" % uuid.uuid4()), spool / ("%s.tmp" % uuid.uuid4())
    for partial in (old, young):
        partial.write_text('{"schema": "cudap')
    hour_ago = time.time() - report_spool.TMP_MAX_AGE_S - 60
    os.utime(old, (hour_ago, hour_ago))
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: (opened.append(str(path)), real_open(path, *a, **k))[1])
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: opened.append(str(self)) or "")
    waiting = report_spool.reports_waiting()
    assert [found for found, _age in waiting] == [run_id]
    assert not old.exists() and young.exists()
    assert not [path for path in opened if path.endswith((".json", ".tmp"))]  # no report read to list them
