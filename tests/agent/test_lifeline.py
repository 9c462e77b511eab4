"""A GPU worker ends with its agent (agents/cudaprobe/lifeline.py): a real `worker --serve`, started by the agent's
own children.Worker in a stand-in agent process and busy in the burn-in task (stress.gpu_sustained), is gone within
2 s of a kill -9 of that process, even while it sits in one C call that holds the GIL; and an agent that starts names
a worker left by an earlier one (stray_agent_worker) without ending it."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from agents.cudaprobe import lifeline, strays
from tests.agent.harness import FAKE_TORCH, REPO, Scenario, check, run_agent

DEATH_LIMIT_S = 2.0

# The burn-in task's torch, as far as gpu_sustained goes before its load: the matmul never returns, inside one C
# call that holds the GIL (a regular expression that backtracks for ever), so no Python code of the worker runs.
STAND_IN_TORCH = '''
import os, re, types
bfloat16 = "bfloat16"

class _Props:
    total_memory = 141 * 2**30
    uuid = ""

class Generator:
    def __init__(self, device=None):
        pass
    def manual_seed(self, seed):
        return self

def randn(*shape, **kw):
    return object()

def empty(*shape, **kw):
    return object()

def matmul(a, b, out=None):
    open(os.environ["LIFELINE_TEST_MARK"], "w").close()
    re.match(r"(a+)+$", "a" * 64 + "b")  # ~2^64 steps in C, the GIL held

cuda = types.SimpleNamespace(set_device=lambda index: None, get_device_properties=lambda index: _Props(),
                             synchronize=lambda index=None: None, is_initialized=lambda: False)
'''

# The agent's side: children.Worker starts the worker (as the agent does, its pid in the worker's environment) and
# asks it for a burn-in; this process then waits to be killed.
STAND_IN_AGENT = '''
import sys, time
from agents.cudaprobe import children
worker = children.Worker(dict(__import__("os").environ), 0)
worker.send("agents.cudaprobe.checks.stress:gpu_sustained", {"seconds": 600})
print(worker.popen.pid, flush=True)
time.sleep(600)
'''


def _alive(pid):
    """Running, as opposed to gone or a zombie nobody reaped yet (a zombie holds no GPU memory and runs nothing)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, limit_s):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def stand_in_torch(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(STAND_IN_TORCH)
    return tmp_path


def test_a_worker_busy_in_a_c_call_dies_within_two_seconds_of_a_kill_9_of_its_agent(stand_in_torch, tmp_path):
    mark = tmp_path / "in-the-matmul"
    env = dict(os.environ, PYTHONPATH="%s:%s" % (stand_in_torch, REPO), LIFELINE_TEST_MARK=str(mark),
               CUDAPROBE_BYTECODE_CACHE="off")
    agent = subprocess.Popen([sys.executable, "-c", STAND_IN_AGENT], cwd=REPO, env=env, stdout=subprocess.PIPE,
                             text=True)
    worker = None
    try:
        worker = int(agent.stdout.readline())
        assert _wait_for(mark.exists, 60), "the worker never reached the burn-in's matmul"
        time.sleep(0.5)  # well inside the C call
        assert _alive(worker)
        killed = time.monotonic()
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait()
        assert _wait_for(lambda: not _alive(worker), DEATH_LIMIT_S), \
            "worker %d still running %.1f s after its agent's kill -9" % (worker, time.monotonic() - killed)
    finally:
        agent.kill()
        agent.wait()
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)  # ours: the test started it


def test_a_worker_whose_agent_died_before_it_started_exits_at_once(stand_in_torch):
    # the agent named in its environment is not its parent (that agent is gone; someone else adopted the worker)
    env = dict(os.environ, PYTHONPATH="%s:%s" % (stand_in_torch, REPO), **{lifeline.AGENT_PID_ENV: "1"})
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe.worker", "--serve"], cwd=REPO, env=env,
                          stdin=subprocess.PIPE, capture_output=True, timeout=30)
    assert done.returncode == lifeline.EXIT_ORPHANED


OLD_WORKER = """import time
time.sleep(120)  # an earlier agent's worker, from before the lifeline: it goes on when its agent is gone
"""


@pytest.fixture
def stray(tmp_path):
    """A worker of an earlier agent whose agent died: `python -m agents.cudaprobe.worker --serve` (an older copy of
    the agent, without the lifeline), its parent gone, adopted by init."""
    package = tmp_path / "old-agent" / "agents" / "cudaprobe"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "worker.py").write_text(OLD_WORKER)
    # in a session of its own, as every agent started its workers (setsid execs in place: $! is the worker)
    started = subprocess.run(["bash", "-c", 'PYTHONPATH="$1" setsid "$2" -m agents.cudaprobe.worker --serve '
                              '</dev/null >/dev/null 2>&1 & echo $!', "-", str(tmp_path / "old-agent"), sys.executable],
                             capture_output=True, text=True, timeout=30, check=True)
    pid = int(started.stdout)
    try:
        assert _wait_for(lambda: strays.is_worker(strays._cmdline("/proc", pid)), 10), "the stray never started"
        yield pid
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)  # ours: this fixture started it


def test_the_next_agent_names_a_stray_worker_and_leaves_it_running(tmp_path, stray):
    report, _ = run_agent(Scenario(tmp_path / "host"), args=["--mode", "quick", "--only", "driver.processes"])
    processes = check(report, "driver.processes")
    assert processes["status"] == "warn" and "stray_agent_worker" in processes["signatures"], processes
    assert "pid %d (parent " % stray in processes["summary"]
    # the command to end them (this machine is shared: another's stray may be named beside ours)
    assert str(stray) in re.search(r"kill ([\d ]+)", processes["summary"]).group(1).split()
    assert processes["metrics"]["stray_agent_workers"] >= 1
    assert _alive(stray), "the agent must name a stray worker, not end it"


def test_a_worker_started_by_hand_is_no_stray(stand_in_torch):
    # no agent named, its parent no agent, but not in a session of its own as an agent's workers are: a test's or
    # an operator's, not a stray
    worker = subprocess.Popen([sys.executable, "-m", "agents.cudaprobe.worker", "--serve"], cwd=REPO,
                              env=dict(os.environ, PYTHONPATH="%s:%s" % (stand_in_torch, REPO)),
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: strays.is_worker(strays._cmdline("/proc", worker.pid)), 10)
        assert worker.pid not in {s["pid"] for s in strays.stray_workers()}
    finally:
        worker.kill()
        worker.wait()


def test_a_worker_that_names_its_live_parent_as_its_agent_is_no_stray(stand_in_torch):
    # children.Pool's workers started by something other than the agent's command (a bench script, a test) are
    # still some live process's: only a worker whose agent is gone is a stray
    worker = subprocess.Popen([sys.executable, "-m", "agents.cudaprobe.worker", "--serve"], cwd=REPO,
                              env=dict(os.environ, PYTHONPATH="%s:%s" % (stand_in_torch, REPO),
                                       **{lifeline.AGENT_PID_ENV: str(os.getpid())}),
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        assert _wait_for(lambda: strays.is_worker(strays._cmdline("/proc", worker.pid)), 10)
        assert worker.pid not in {s["pid"] for s in strays.stray_workers()}
    finally:
        worker.kill()
        worker.wait()


def test_an_agent_names_none_of_its_own_workers_as_strays(tmp_path):
    # torch.import chosen: the agent starts its rank-0 worker before L1 (the recorded torch), running beside the scan
    report, _ = run_agent(Scenario(tmp_path / "host"),
                          args=["--mode", "quick", "--only", "driver.processes,torch.import"],
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, REPO)})
    assert report["timing"]["workers"], "no worker of this agent ran beside the scan"
    processes = check(report, "driver.processes")
    # this machine is shared: another's test may leave a worker named here; none of this agent's own may be
    assert "driver.processes,torch.import" not in processes["summary"], processes["summary"]
    if "stray_agent_worker" not in processes["signatures"]:
        assert processes["status"] == "pass"


# The watchdog alone (the kernel's signal turned off, as on a kernel without prctl): a worker in a long Python loop
# still ends within 2 s of its agent's death.
WATCHED_CHILD = '''
from agents.cudaprobe import lifeline
lifeline._set_parent_death_signal = lambda: False
lifeline.tie()
print("tied", flush=True)
while True:
    sum(range(10000))
'''
PARENT_OF_WATCHED = '''
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, CUDAPROBE_AGENT_PID=str(os.getpid())))
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(600)
'''


def test_without_the_kernels_signal_the_watchdog_ends_the_worker_within_two_seconds():
    parent = subprocess.Popen([sys.executable, "-c", PARENT_OF_WATCHED, WATCHED_CHILD], cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _wait_for(lambda: not _alive(child), DEATH_LIMIT_S), "the watchdog did not end the worker"
    finally:
        parent.kill()
        parent.wait()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)  # ours: the test started it
