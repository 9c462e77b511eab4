"""A rack at once, and what goes wrong around it: Redis away, a queue that lost a task, a pool process killed
mid-run, a second request for a busy node, several nodes from the command line."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_register_local
from cudaweb.validation import reaper
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request, runs_request
from tests.agent.harness import FAKE_BIN, Scenario, processes_with_env
from tests.conftest import _database_url, wait_for_terminal
from tests.services import REPO, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FAKES = Path(__file__).resolve().parent.parent / "fakes"


def manage(*args, **env):
    full = dict(os.environ, DATABASE_URL=_database_url(connection.settings_dict),
                DJANGO_SETTINGS_MODULE="tests.settings", **env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=240)


def test_redis_down_is_a_clear_message_exit_3_and_nothing_kept():
    node_register_local(python_path=sys.executable)
    done = manage("validate_node", "localhost", "--wait", REDIS_URL="redis://127.0.0.1:%d/0" % free_port())
    assert done.returncode == 3, done.stderr
    assert "the task queue (Redis) does not answer" in done.stderr and "nothing was queued" in done.stderr
    assert not ValidationRun.objects.exists()


def test_several_nodes_by_label_print_a_list_and_a_busy_node_answers_with_its_live_run(celery_worker):
    for name in ("rack-a1", "rack-a2"):
        node = node_register_local(name=name, python_path=sys.executable)
        Node.objects.filter(id=node.id).update(labels=["rack-a"])
    done = manage("validate_node", "--label", "rack-a", "--wait", "--json")
    assert done.returncode == 1, done.stderr  # no GPU here: the verdicts are fail
    results = json.loads(done.stdout)
    assert [r["node"] for r in results] == ["rack-a1", "rack-a2"]
    assert all(set(r) == {"node", "run", "retry_of", "status", "reason", "root_cause", "report"} and r["status"] == "FAILED"
               for r in results)
    slow = Node.objects.create(name="slow", transport=Node.Transport.LOCAL, python_path=str(FAKES / "hanging-python"),
                               agent_timeout_s=20)
    first = manage("validate_node", "slow").stdout.split()
    second = manage("validate_node", "slow", "rack-a1").stdout.split()
    assert len(first) == 1 and second[0] == first[0] and second[1] not in first
    wait_for_terminal(ValidationRun.objects.get(id=first[0]), timeout=120)
    assert ValidationRun.objects.filter(node=slow).count() == 1


def test_a_pending_run_the_queue_lost_is_queued_again(celery_worker, settings):
    node = node_register_local(python_path=sys.executable)
    lost = ValidationRun.objects.create(node=node)  # a row whose task never reached Redis (or Redis restarted)
    ValidationRun.objects.filter(id=lost.id).update(created=timezone.now() - timedelta(minutes=5))
    assert reaper.runs_reap()["requeued"] == 1
    run = wait_for_terminal(lost, timeout=120)
    assert run.status == ValidationRun.Status.FAILED and run.enqueue_count == 1 and run.report


def test_a_rack_wide_request_is_published_by_a_worker(celery_worker, settings):
    settings.CUDAWEB_FANOUT_MIN = 2  # this process's request fans out; the worker publishes the runs' tasks
    rack = [node_register_local(name="fan-%d" % i, python_path=sys.executable) for i in range(3)]
    runs = runs_request(nodes=rack, mode="quick")
    assert all(run.enqueued is None for run in runs)
    for run in runs:
        run = wait_for_terminal(run, timeout=180)
        assert run.status == ValidationRun.Status.FAILED and run.enqueue_count == 1 and run.report  # no GPU here


def _ancestors(pid):
    chain = []
    while pid > 1:
        chain.append(pid)
        fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
        pid = int(fields[1])
    return chain


def test_a_killed_pool_process_ends_its_run_retries_it_once_and_stops_its_agent(celery_worker, tmp_path):
    scenario = Scenario(tmp_path / "host")
    scenario.write("behaviour", "hang")  # nvidia-smi hangs: the agent is busy in L1 for a while
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexport PATH=%s:$PATH FAKE_NVSMI_DIR=%s CUDAPROBE_NVSMI_TIMEOUT=60\nexec %s \"$@\"\n"
                      % (FAKE_BIN, scenario.root, sys.executable))
    python.chmod(0o755)
    node = Node.objects.create(name="doomed", transport=Node.Transport.LOCAL, python_path=str(python),
                               agent_timeout_s=120)
    run = run_request(node=node)
    deadline = time.monotonic() + 60
    while not (agents := processes_with_env("FAKE_NVSMI_DIR", str(scenario.root))):
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.2)
    chain = _ancestors(min(agents))
    pool_process = chain[chain.index(celery_worker.pid) - 1]  # the worker's child that runs this task
    os.kill(pool_process, signal.SIGKILL)
    run = wait_for_terminal(run, timeout=30)
    assert run.status == ValidationRun.Status.INTERRUPTED and "worker process running it died" in run.reason
    deadline = time.monotonic() + 15
    while processes_with_env("FAKE_NVSMI_DIR", str(scenario.root)) and set(agents) & set(
            processes_with_env("FAKE_NVSMI_DIR", str(scenario.root))):
        assert time.monotonic() < deadline, "the agent of the dead worker kept running"
        time.sleep(0.2)
    (retry,) = run.retries.all()
    retry = wait_for_terminal(retry, timeout=180)
    assert retry.status == ValidationRun.Status.FAILED  # the hang is now a finding (nvidia_smi_hang), not lost
