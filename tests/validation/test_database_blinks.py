"""A dropped database connection costs no report: a write is done again on a new connection, a report the database
would not take is kept and stored later with its checks, and the readers (pages, API) answer again at once."""

import io
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest
from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from cudaweb.api.selectors import run_detail as api_run_detail
from cudaweb.nodes.models import Node
from cudaweb.common import dbretry
from cudaweb.validation import reaper, report_spool, services
from cudaweb.validation.models import CheckResult, ValidationRun
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db(transaction=True)
REPORT = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "h200-gpus2-standard.json"
Status = ValidationRun.Status


def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("a connection the server ends needs PostgreSQL; CI runs this there")


def drop_my_connection():
    """End this thread's own session from another one, as a PostgreSQL restart or failover would."""
    import psycopg

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"] or "postgres",
                         password=db["PASSWORD"] or None, dbname=db["NAME"], autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    return pid


@pytest.fixture
def spool(settings, tmp_path):
    settings.CUDAWEB_REPORT_SPOOL_DIR = str(tmp_path / "spool")
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    return tmp_path / "spool"


@pytest.fixture
def quick_retries(settings):
    settings.CUDAWEB_DB_RETRY_S, settings.CUDAWEB_DB_RETRY_FIRST_S = 0.3, 0.05


def node_printing(tmp_path, script, name="n1"):
    python = tmp_path / ("python-" + name)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=str(python))


def test_a_write_on_a_dropped_connection_is_done_on_a_new_one():
    postgres_only()
    node = Node.objects.create(name="n1", transport=Node.Transport.LOCAL)
    old_pid = drop_my_connection()
    with pytest.raises(OperationalError):  # the drop is real: a plain write fails
        Node.objects.filter(id=node.id).update(gpu_count=2)
    assert dbretry.retrying(lambda: Node.objects.filter(id=node.id).update(gpu_count=3)) == 1
    assert connection.connection.info.backend_pid != old_pid
    assert Node.objects.get(id=node.id).gpu_count == 3


def test_nothing_is_retried_inside_a_transaction_and_retries_end_after_their_budget(quick_retries):
    calls = []

    def failing():
        calls.append(time.monotonic())
        raise OperationalError("server closed the connection unexpectedly")

    with pytest.raises(OperationalError), transaction.atomic():
        dbretry.retrying(failing)
    assert len(calls) == 1  # the caller retries the whole transaction
    calls.clear()
    started = time.monotonic()
    with pytest.raises(OperationalError):
        dbretry.retrying(failing)
    assert len(calls) >= 3 and time.monotonic() - started < 2


def test_healthz_and_the_api_answer_at_once_after_the_connection_dropped():
    """The web's own connection dies with the others; the next request checks it and opens a new one."""
    postgres_only()
    from cudaweb.api.services import token_issue

    user = user_with_role(get_user_model(), "reader", "viewer")
    _, token = token_issue(user=user, name="t")
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.PASSED)
    handler = WSGIHandler()

    def get(path, **headers):
        environ = dict(PATH_INFO=path, REQUEST_METHOD="GET", **headers)
        setup_testing_defaults(environ)
        environ["wsgi.input"] = io.BytesIO(b"")
        answer = {}
        body = b"".join(handler(environ, lambda status, _headers: answer.update(status=status)))
        return int(answer["status"].split()[0]), json.loads(body)

    assert get("/healthz")[1]["database"] == "ok"
    drop_my_connection()
    assert get("/healthz")[1]["database"] == "ok"
    drop_my_connection()
    status, body = get("/api/v1/runs/%s/" % run.id, HTTP_AUTHORIZATION="Bearer " + token)
    assert status == 200 and body["status"] == "PASSED"


def test_storing_a_report_twice_stores_it_once():
    report = json.loads(REPORT.read_text())
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING)
    assert services.run_store_report(run=run, report=report) == Status.PASSED
    assert services.run_store_report(run=run, report=report) == Status.PASSED  # a try whose answer was lost
    assert CheckResult.objects.filter(run=run).count() == len(report["checks"])


def test_a_report_the_database_would_not_take_is_kept_and_the_reaper_stores_it_with_its_checks(
        tmp_path, spool, quick_retries, monkeypatch, client, admin_user):
    report = json.loads(REPORT.read_text())
    node = node_printing(tmp_path, "cat %s\n" % REPORT)
    run = ValidationRun.objects.create(node=node)
    real_store = services._run_store_report

    def database_away(**kwargs):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(services, "_run_store_report", database_away)
    assert services.run_execute(run_id=run.id) == Status.DASHBOARD_ERROR
    run.refresh_from_db()
    assert run.report == report and not run.checks.exists() and "is kept" in run.reason
    assert [run_id for run_id, _, _ in report_spool.reports_kept()] == [run.id]
    client.force_login(admin_user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="kept-report"' in page and report["checks"][0]["id"] in page and 'id="raw-output"' not in page
    assert api_run_detail(run_id=run.id)["report"] == report  # GET /api/v1/runs/<id>/ answers it too

    monkeypatch.setattr(services, "_run_store_report", real_store)  # the database takes writes again
    assert reaper.reports_sweep(min_age_s=0) == 1
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"]) and not run.raw_output
    assert "stored by the reaper" in run.reason and report_spool.reports_kept() == []
    assert Node.objects.get(id=node.id).status == Node.Status.PASSING


def test_a_report_whose_run_stayed_running_while_the_database_was_away_is_stored_not_interrupted(spool, settings):
    """The worker gave up (the database away past its retries) with the run RUNNING and its report in the spool:
    the reaper stores it before it looks for silent runs."""
    report = json.loads(REPORT.read_text())
    stale = timezone.now() - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S + 60)
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING,
                                       heartbeat=stale)
    report_spool.report_keep(run_id=run.id, report=report).release()  # the worker gave up on it
    old = time.time() - 120
    os.utime(spool / ("%s.json" % run.id), (old, old))
    assert reaper.runs_reap() == {"stored": 1, "interrupted": 0, "requeued": 0, "lost": 0}
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"])


def test_the_reaper_leaves_a_report_its_worker_still_holds_and_takes_it_once_the_worker_is_gone(spool):
    """A worker still trying to store its report holds the kept file (a lock): the reaper's sweep leaves it however
    old it is; a worker killed while it holds one lets it go with its death, and the reaper stores it."""
    report = json.loads(REPORT.read_text())
    run = ValidationRun.objects.create(node=Node.objects.create(name="n1", transport="local"), status=Status.RUNNING)
    held = report_spool.report_keep(run_id=run.id, report=report)
    path = spool / ("%s.json" % run.id)
    os.utime(path, (time.time() - 120, time.time() - 120))
    assert reaper.reports_sweep(min_age_s=0) == 0 and report_spool.reports_kept() == []
    held.release()
    holds = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
             "print('held', flush=True)\ntime.sleep(60)")
    worker = subprocess.Popen([sys.executable, "-c", holds, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "held"
        assert reaper.reports_sweep(min_age_s=0) == 0
    finally:
        worker.kill()
        worker.wait()
    assert reaper.reports_sweep(min_age_s=0) == 1
    run.refresh_from_db()
    assert run.status == Status.PASSED and run.checks.count() == len(report["checks"]) and not path.exists()


def test_an_ssh_run_starting_in_a_blink_reads_its_host_key_and_audits_its_credential_on_a_new_connection(sshd):
    """The host key and the audit row of the node's credential (written at the login) are the run's reads and writes
    too: a connection dropped there is replaced, as everywhere else in a run, not a DASHBOARD_ERROR."""
    postgres_only()
    from cudaweb.accounts.models import AuditEvent
    from cudaweb.nodes.models import HostKey, SSHCredential

    credential = SSHCredential(name="k")
    credential.set_private_key(sshd.private_key())
    credential.save()
    node = Node.objects.create(name="ssh1", address="127.0.0.1", port=sshd.port, username="root",
                               credential=credential)
    key_type, key_base64 = sshd.public_key("host_key")
    HostKey.objects.create(node=node, key_type=key_type, key_base64=key_base64, fingerprint_sha256="x",
                           accepted_at=timezone.now())
    run = ValidationRun.objects.create(node=node, status=Status.RUNNING)
    old_pid = drop_my_connection()
    transport = services._transport(run, purpose="run x")
    assert transport.host_key == (key_type, key_base64) and connection.connection.info.backend_pid != old_pid
    old_pid = drop_my_connection()
    with transport:
        pass
    assert connection.connection.info.backend_pid != old_pid
    assert AuditEvent.objects.filter(action="credential.used", detail__purpose="run x").count() == 1


def test_a_network_test_reaching_its_node_in_a_blink_gets_as_far_as_the_node():
    """A network test's ends (a pair's and an all-reduce's, one runner) read the host key and audit the credential
    too: over a dropped connection they reach the node (here a port where nothing listens: the transport's own
    error, kept as the end's result), not an exception that leaves the end without one."""
    postgres_only()
    import socket

    import paramiko

    from cudaweb.network import agent
    from cudaweb.nodes.models import HostKey, SSHCredential

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    credential = SSHCredential(name="k")
    credential.set_private_key("not a key: the connection is refused before any login")
    credential.save()
    node = Node.objects.create(name="pair1", address="127.0.0.1", port=closed_port, username="root",
                               credential=credential)
    host_key = paramiko.RSAKey.generate(1024)
    HostKey.objects.create(node=node, key_type="ssh-rsa", key_base64=host_key.get_base64(), fingerprint_sha256="x",
                           accepted_at=timezone.now())
    results = {}
    for key, placing in (("pair", ("--peer-role", "rank0")), ("rank", ("--world", "2", "--rank", "0"))):
        drop_my_connection()  # in this thread, as the end runs here (ends_run gives each end its own thread)
        results[key] = agent.end_run(node, agent.peer_args(("127.0.0.1", 1), *placing), 30, "network test")
    assert results["pair"][0] is None and results["pair"][1] and results["rank"][0] is None and results["rank"][1]
    assert "OperationalError" not in results["pair"][1] + results["rank"][1]
