"""The measuring workers' CUDA context made through the driver API while torch imports (driver_context.py),
against a libcuda.so.1 of our own built here (CI has no GPU): the calls it makes, in order, from a thread, for the
worker's own GPU only, and what the worker passes on to its tasks."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.cudaprobe import driver_context

FAKE_LIBCUDA = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
static void note(const char *what, int value) {
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) { fprintf(f, "%s %d %ld %d\n", what, value, (long)syscall(SYS_gettid), (int)getpid()); fclose(f); }
}
static int count(void) { const char *c = getenv("FAKE_CUDA_COUNT"); return c ? atoi(c) : 1; }
int cuInit(unsigned flags) {
    note("cuInit", flags);
    if (getenv("FAKE_CUDA_INIT_SLEEP")) sleep(atoi(getenv("FAKE_CUDA_INIT_SLEEP")));
    return getenv("FAKE_CUDA_INIT_RC") ? atoi(getenv("FAKE_CUDA_INIT_RC")) : 0;
}
int cuDeviceGetCount(int *n) { *n = count(); note("cuDeviceGetCount", *n); return 0; }
int cuDeviceGet(int *device, int ordinal) {
    note("cuDeviceGet", ordinal);
    *device = ordinal;
    return ordinal < count() ? 0 : 101;
}
int cuDevicePrimaryCtxRetain(void **ctx, int device) {
    note("cuDevicePrimaryCtxRetain", device);
    *ctx = (void *)0x1;
    return 0;
}
"""


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fake libcuda.so.1")
    root = tmp_path_factory.mktemp("fakecuda")
    (root / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(root / "libcuda.so.1"), str(root / "fake.c")], check=True)
    return root


def _worker(libcuda, tmp_path, **env):
    """A real `worker --serve` with the fake driver on its library path; its answer to one gpu_torch_info-like task
    (a task that returns its own args) and the calls the fake driver saw."""
    log = tmp_path / "calls.log"
    agent = tmp_path / "agent"
    shutil.copytree(Path(__file__).resolve().parents[2] / "agents", agent / "agents",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (agent / "agents" / "cudaprobe" / "checks" / "echo_args.py").write_text(ECHO_TASK)
    child_env = dict(os.environ, LD_LIBRARY_PATH=str(libcuda), FAKE_CUDA_LOG=str(log), PYTHONPATH=str(agent), **env)
    request = json.dumps({"task": "agents.cudaprobe.checks.echo_args:echo_args", "args": {}}) + "\n"
    out = subprocess.run([sys.executable, "-m", "agents.cudaprobe.worker", "--serve"], input=request, env=child_env,
                         cwd=agent,
                         capture_output=True, text=True, timeout=120)
    (line,) = [l for l in out.stdout.splitlines() if l.startswith("CUDAPROBE_RESULT ")]
    calls = [l.split() for l in log.read_text().splitlines()] if log.exists() else []
    result = json.loads(line[len("CUDAPROBE_RESULT "):])
    assert "error" not in result, result
    return result, calls


ECHO_TASK = (  # a stand-in task: what the worker handed to its task, and the thread that runs tasks
    "import threading\n"
    "from agents.cudaprobe.registry import gpu_task\n\n\n"
    "@gpu_task\n"
    "def echo_args(args):\n"
    "    return {'args': args, 'main_thread': threading.get_native_id()}\n")


def test_a_measuring_worker_makes_its_own_gpus_context_in_a_thread_and_hands_the_time_to_its_tasks(libcuda, tmp_path):
    result, calls = _worker(libcuda, tmp_path, CUDAPROBE_WORKER_CONTEXT="1", LOCAL_RANK="1", FAKE_CUDA_COUNT="2")
    assert [c[0] for c in calls] == ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain"]
    assert calls[2][1] == "1" and calls[3][1] == "1"  # LOCAL_RANK's GPU, no other
    assert {c[2] for c in calls} != {str(result["main_thread"])}  # not on the thread that imports torch
    made = result["args"]["driver_context"]
    assert made["ordinal"] == 1 and made["context_s"] >= 0 and made["init_s"] >= 0 and "error" not in made


def test_a_rank_with_no_gpu_of_its_number_makes_no_context(libcuda, tmp_path):
    result, calls = _worker(libcuda, tmp_path, CUDAPROBE_WORKER_CONTEXT="1", LOCAL_RANK="1", FAKE_CUDA_COUNT="1")
    assert [c[0] for c in calls] == ["cuInit", "cuDeviceGetCount"]
    assert result["args"]["driver_context"] == {"ordinal": 1, "init_s": pytest.approx(0, abs=5),
                                                "error": "cuInit 0, 1 devices"}


def test_a_failing_driver_is_left_for_torch_to_meet(libcuda, tmp_path):
    result, calls = _worker(libcuda, tmp_path, CUDAPROBE_WORKER_CONTEXT="1", FAKE_CUDA_INIT_RC="100")
    assert [c[0] for c in calls] == ["cuInit"]
    assert result["args"]["driver_context"]["error"].startswith("cuInit 100")


def test_a_driver_that_hangs_does_not_hold_the_first_task_back(libcuda, tmp_path):
    started = time.monotonic()
    result, calls = _worker(libcuda, tmp_path, CUDAPROBE_WORKER_CONTEXT="1", FAKE_CUDA_INIT_SLEEP="30")
    assert time.monotonic() - started < 20  # torch's import, then at most CONTEXT_WAIT_S
    assert result["args"]["driver_context"] == {"ordinal": 0, "error": "still running"}


def test_other_workers_do_not_touch_the_driver_before_their_tasks(libcuda, tmp_path):
    result, calls = _worker(libcuda, tmp_path)  # a training worker, say: it must not hold a context early
    assert calls == [] and "driver_context" not in result["args"]


def test_no_driver_library_is_noted_not_raised_and_only_a_numbered_rank_asks(monkeypatch):
    def missing(name):
        raise OSError("%s: cannot open shared object file" % name)
    monkeypatch.setattr(driver_context.ctypes, "CDLL", missing)
    made = driver_context.start_if_asked({"CUDAPROBE_WORKER_CONTEXT": "1", "LOCAL_RANK": "0"})
    assert made.result() == {"ordinal": 0, "error": "libcuda.so.1: libcuda.so.1: cannot open shared object file"}
    assert driver_context.start_if_asked({"CUDAPROBE_WORKER_CONTEXT": "1", "LOCAL_RANK": "x"}) is None
    assert driver_context.start_if_asked({"LOCAL_RANK": "0"}) is None
