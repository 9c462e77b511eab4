"""A GPU worker ends with its agent: within a moment of the agent's death, however busy the worker is.

A worker left behind computes and holds GPU memory with no one to read its answer (seen on an H200: a worker of an
agent killed by kill -9 in the middle of a burn-in ran on for more than 5 minutes, and the node's next validations
found its GPU busy). Two guards, because either alone has a gap:
- the kernel's parent-death signal (Linux prctl PR_SET_PDEATHSIG, SIGKILL): delivered even while the worker is
  inside a long CUDA call that holds the GIL, where no Python code runs. It fires when the *thread* that started
  the worker ends, so the agent starts its workers from its main thread (children.Pool does).
- a watchdog thread on the parent's pid, for a kernel without prctl or a parent that died before prctl was called;
  it ends the process with os._exit, since an exception raised in a thread would not stop the main one. Long tasks
  also call `exit_if_orphaned()` between their steps (the burn-in's windows, the memory test's patterns).

The agent names its pid in the worker's environment (AGENT_PID_ENV): a worker whose parent is already another
process when it starts (the agent died while it was being started) exits at once.
"""

import ctypes
import os
import signal
import threading
import time

AGENT_PID_ENV = "CUDAPROBE_AGENT_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
WATCH_INTERVAL_S = 0.2
EXIT_ORPHANED = 3  # the agent's own exit status when its stdin closes (cli.EXIT_ORPHANED)

_parent = []  # [pid] of the agent this worker answers to, once tie() ran


def _set_parent_death_signal():
    """Ask the kernel to SIGKILL this process when its parent ends; False where it cannot (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_pid(environ=None):
    """The agent's pid: the one it named in the environment, else this process's parent now."""
    value = (os.environ if environ is None else environ).get(AGENT_PID_ENV, "")
    return int(value) if value.isdigit() else os.getppid()


def orphaned():
    """True once the agent this worker was tied to is no longer its parent (it died; init or a subreaper adopted
    this process)."""
    return bool(_parent) and os.getppid() != _parent[0]


def exit_if_orphaned():
    if orphaned():
        os._exit(EXIT_ORPHANED)


def _watch():
    while True:
        time.sleep(WATCH_INTERVAL_S)
        exit_if_orphaned()


def tie(environ=None):
    """Tie this process's life to its agent's; returns whether the kernel's parent-death signal is set."""
    _parent[:] = [parent_pid(environ)]
    signalled = _set_parent_death_signal()
    exit_if_orphaned()  # the agent died before the signal was asked for: the kernel will not send it now
    threading.Thread(target=_watch, daemon=True, name="agent-watch").start()
    return signalled
