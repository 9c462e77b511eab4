"""`make run`'s supervisor: a dead worker is started again while web and Redis stay up; the queue is kept on disk;
SIGTERM stops every process it started."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.agent.harness import processes_with_env
from tests.services import REPO, free_port, wait_for_port

pytestmark = pytest.mark.e2e


def _children(pid):
    try:
        return [int(p) for p in Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()]
    except OSError:
        return []


def _worker_of(pid):
    for child in _children(pid):
        if b"celery" in Path("/proc/%d/cmdline" % child).read_bytes():
            return child
    return None


def test_a_dead_worker_is_started_again_and_sigterm_stops_everything(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(CUDAWEB_VAR_DIR=str(var), CUDAWEB_ADMIN_PASSWORD="a-long-test-password", PYTHONUNBUFFERED="1")
    subprocess.run([sys.executable, "-m", "cudaweb.local_state"], cwd=REPO, env=env, check=True)
    port = free_port()
    log = open(tmp_path / "runlocal.log", "wb")
    runlocal = subprocess.Popen([sys.executable, "manage.py", "runlocal", "--port", str(port)], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_for_port(port, timeout=90), (tmp_path / "runlocal.log").read_text()
        deadline = time.monotonic() + 30
        while (worker := _worker_of(runlocal.pid)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(worker, signal.SIGKILL)  # the worker, its pool and its beat
        deadline = time.monotonic() + 60
        while _worker_of(runlocal.pid) in (None, worker):
            assert time.monotonic() < deadline, (tmp_path / "runlocal.log").read_text()
            time.sleep(0.2)
        assert runlocal.poll() is None
        assert urllib.request.urlopen("http://127.0.0.1:%d/login/" % port, timeout=10).status == 200
        assert "starting it again" in (tmp_path / "runlocal.log").read_text()
        assert list((var / "redis").glob("appendonly*"))  # the queue is kept on disk
    finally:
        runlocal.send_signal(signal.SIGTERM)
        runlocal.wait(timeout=60)
        log.close()
    deadline = time.monotonic() + 20
    while processes_with_env("CUDAWEB_VAR_DIR", str(var)):
        assert time.monotonic() < deadline, "left running: %s" % processes_with_env("CUDAWEB_VAR_DIR", str(var))
        time.sleep(0.2)
