"""The database blinks under real runs (a real Celery worker, real PostgreSQL): a restart of a cluster of our own in
the middle of a bulk run and connections terminated twice cost no report; a pool process killed after a drop ends
its run at once; `validate_node --wait` rides over a drop.

Not marked e2e: .ci/run runs these in its PostgreSQL pass (`make test`) only. The bulk runs use their own cluster
(tests/pgcluster.py), whatever the suite's database; the others need the suite's database to be PostgreSQL."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request
from tests.agent.harness import processes_with_env
from tests.conftest import _database_url, wait_for_terminal
from tests.services import REPO

REPORT = REPO / "tests" / "fixtures" / "real" / "h200-gpus2-standard.json"
Status = ValidationRun.Status


def bulk_rounds(fault, worker_env=None, **options):
    """One round of bench/db_faults.py (its own PostgreSQL, Redis and worker): the round's figures."""
    argv = [sys.executable, str(REPO / "bench" / "db_faults.py"), "--rounds", "1", "--fault", fault, "--json"]
    for name, value in options.items():  # True: a flag
        argv += ["--" + name.replace("_", "-")] + ([] if value is True else [str(value)])
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE",
                                                            "CUDAWEB_REPORT_SPOOL_DIR")}
    env.update(worker_env or {})
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (figures,) = json.loads(done.stdout.strip().splitlines()[-1])["rounds"]
    return figures


def test_a_postgresql_restart_in_the_middle_of_a_bulk_run_costs_no_report():
    figures = bulk_rounds("restart", nodes=8, concurrency=4, agent_s=3, fault_at_s=2, outage_s=8)
    assert figures["did"].startswith("restarted") and figures["retried_writes"] > 0  # the fault hit the runs
    assert figures["states"] == {"PASSED": 8} and figures["stored"] == 8 and figures["retries"] == 0, figures
    assert figures["stored_by_reaper"] == 0, figures  # all within the retries


def test_an_outage_longer_than_the_retries_costs_no_report_either():
    """Retries of 2 s against an outage of 15 s: the worker gives up with its runs RUNNING and their reports in its
    spool; its reaper stores them, with their checks, once the database is back."""
    figures = bulk_rounds("restart", nodes=4, concurrency=4, agent_s=2, fault_at_s=1, outage_s=15,
                          worker_env={"CUDAWEB_DB_RETRY_S": "2", "CUDAWEB_REAP_EVERY_S": "2"})
    assert figures["states"] == {"PASSED": 4} and figures["stored"] == 4 and figures["stored_by_reaper"] == 4, figures


def test_connections_terminated_twice_in_a_bulk_run_cost_no_report():
    """The second time the connections end while reports are being stored (held in their transactions by a lock of
    the bench's): the stores are cut half-way and tried again on new connections, by the worker, within the round.
    A connection ended between two writes no longer shows it: the next write drops it quietly (CONN_HEALTH_CHECKS,
    dashboard_timing's marks), so only a cut in the middle of a write proves the retry."""
    figures = bulk_rounds("terminate", nodes=8, concurrency=4, agent_s=3, fault_at_s=2, terminate_gap_s=3,
                          in_flight=True)
    assert re.match(r"terminated [1-9]\d* then [1-9]\d* connections \([1-9]\d* storing a report\)", figures["did"]), \
        figures
    assert figures["retried_writes"] > 0, figures  # the cut stores were tried again
    assert figures["states"] == {"PASSED": 8} and figures["stored"] == 8 and figures["retries"] == 0, figures
    assert figures["stored_by_reaper"] == 0, figures  # all within the retries, none left for a reaper


def test_a_soft_time_limit_inside_a_long_outage_costs_no_report():
    """The agents finish within their budget (4 s); the database is away 80 s, past the report's store retries (40 s),
    and the task's soft time limit (its budget + 60 s) comes while the run's end is still tried: the report waits in
    the spool and a reaper stores it. Before, the run ended TIMED_OUT ("the worker's soft time limit ended the run")
    and the reaper dropped its kept report unstored (unless its pass came before the end's next try: hence a
    reaper pass every 45 s)."""
    figures = bulk_rounds("restart", nodes=4, concurrency=4, agent_s=2, fault_at_s=1, outage_s=80, round_timeout_s=200,
                          worker_env={"CUDAWEB_AGENT_TIMEOUT_STANDARD": "4", "CUDAWEB_DB_RETRY_S": "40",
                                      "CUDAWEB_REAP_EVERY_S": "45"})
    assert figures["states"] == {"PASSED": 4} and figures["stored"] == 4 and figures["stored_by_reaper"] == 4, figures


QUICK_REAPER = {"CUDAWEB_STALE_RUN_S": "20", "CUDAWEB_HEARTBEAT_S": "3", "CUDAWEB_REAP_EVERY_S": "2",
                "CUDAWEB_PENDING_CHECK_S": "5"}


def test_runs_a_worker_held_when_it_was_killed_twice_around_an_outage_are_queued_again():
    """The server stops, the worker is killed, a second takes tasks whose claims wait on the database and is killed
    too, the server and a third worker come back. Before, the runs the dead workers held stayed PENDING (Redis's
    `unacked` set counted as queued) until the 3-day visibility timeout."""
    figures = bulk_rounds("killed-twice", worker_env=QUICK_REAPER, nodes=8, concurrency=2, agent_s=2, fault_at_s=1,
                          hold_s=5, outage_s=12, round_timeout_s=120)
    assert figures["live"] == 0 and figures["lost"] == 0 and figures["states"] == {"PASSED": 8}, figures
    assert figures["requeued"] > 0, figures  # the path was taken


def test_an_outage_longer_than_the_silence_allowed_ends_no_live_run():
    """Runs longer than the outage, the outage longer than CUDAWEB_STALE_RUN_S, the database back just before a
    reaper pass (every 2 s). Before, every run was INTERRUPTED while its agent lived, its report deleted, and its
    retry ran a second agent on the node."""
    figures = bulk_rounds("outage", worker_env=QUICK_REAPER, nodes=4, concurrency=4, agent_s=40, fault_at_s=5,
                          outage_s=25, round_timeout_s=150)
    assert figures["states"] == {"PASSED": 4} and figures["retries"] == 0 and figures["stored"] == 4, figures


def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("ending the suite database's connections needs PostgreSQL; .ci/run's PostgreSQL pass runs it")


def terminate_other_connections():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def slow_agent(tmp_path, name, seconds=6):
    """A node whose agent works `seconds` and prints a real report; its processes carry a mark of this test's."""
    mark = str(tmp_path / name)
    python = tmp_path / ("python-" + name)
    python.write_text("#!/bin/sh\nexport CUDAWEB_TEST_AGENT=%s\nsleep %d\ncat %s\n" % (mark, seconds, REPORT))
    python.chmod(0o755)
    return Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=str(python)), mark


def _ancestors(pid):
    chain = []
    while pid > 1:
        chain.append(pid)
        pid = int(Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[1])
    return chain


def kill_the_pool_process_running(mark, worker_pid, before=None):
    deadline = time.monotonic() + 60
    while not (agents := processes_with_env("CUDAWEB_TEST_AGENT", mark)):
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.1)
    if before is not None:
        assert before() > 0  # the run's own connection at least
    chain = _ancestors(min(agents))
    os.kill(chain[chain.index(worker_pid) - 1], signal.SIGKILL)


@pytest.mark.django_db(transaction=True)
def test_a_pool_process_killed_after_a_connection_drop_ends_its_run_at_once(celery_worker, tmp_path):
    postgres_only()
    first_node, first_mark = slow_agent(tmp_path, "first")
    first = run_request(node=first_node)
    kill_the_pool_process_running(first_mark, celery_worker.pid)  # the main process now has used the database
    first = wait_for_terminal(first, timeout=30)
    assert first.status == Status.INTERRUPTED
    assert wait_for_terminal(first.retries.get(), timeout=60).status == Status.PASSED
    second_node, second_mark = slow_agent(tmp_path, "second")
    second = run_request(node=second_node)
    kill_the_pool_process_running(second_mark, celery_worker.pid, before=terminate_other_connections)
    killed = time.monotonic()
    second = wait_for_terminal(second, timeout=20)  # not the reaper's 90 s of silence
    assert time.monotonic() - killed < 20
    assert second.status == Status.INTERRUPTED and "worker process running it died" in second.reason
    assert wait_for_terminal(second.retries.get(), timeout=60).status == Status.PASSED


@pytest.mark.django_db(transaction=True)
def test_validate_node_wait_rides_over_a_connection_drop_and_prints_its_json(celery_worker, tmp_path):
    postgres_only()
    node, _ = slow_agent(tmp_path, "waited", seconds=5)
    env = dict(os.environ, DATABASE_URL=_database_url(connection.settings_dict),
               DJANGO_SETTINGS_MODULE="tests.settings")
    waiting = subprocess.Popen([sys.executable, "manage.py", "validate_node", node.name, "--wait", "--json"],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ValidationRun.objects.filter(node=node, status=Status.RUNNING).exists():
        assert time.monotonic() < deadline and waiting.poll() is None, "the run never started"
        time.sleep(0.1)
    time.sleep(1)  # validate_node is polling its run now
    assert terminate_other_connections() > 0
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err[-3000:]
    result = json.loads(out)
    assert result["status"] == "PASSED" and result["report"]["verdict"] == "pass"
