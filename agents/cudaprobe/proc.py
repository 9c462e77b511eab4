"""Run an external command under a time budget; a hang is a result, never a stuck agent."""

import os
import signal
import subprocess
import threading
import time

OUTPUT_CAP = 256 * 1024
RUNNING = set()  # the children of run() in flight, so that an agent told to stop can end them (kill_all)
# A child is started and entered in RUNNING under this lock, and kill_all takes it too: a child another thread is
# starting when the agent is told to stop is killed with the others (not left running once its Popen returns), and
# none starts after (seen under load: the health command's watchdog left one driver query behind, issue 31).
_SPAWN = threading.Lock()
_STOPPED = []
AHEAD = {}  # tuple(argv) -> Future of a run started ahead of the check that asks for it (readahead.py)


class CommandResult:
    __slots__ = ("argv", "returncode", "stdout", "stderr", "timed_out", "missing", "duration_s")

    def __init__(self, argv, returncode=None, stdout="", stderr="", timed_out=False, missing=False, duration_s=0.0):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.missing = missing
        self.duration_s = duration_s

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    def combined(self):
        return (self.stdout + ("\n" + self.stderr if self.stderr else "")).strip()


def _decode(data):
    return (data or b"")[:OUTPUT_CAP].decode("utf-8", "replace")


def kill_group(popen):
    """Kill the child and everything it started (it leads its own session)."""
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all(for_good=False):
    """Kill every run() child in flight, with what it started (one being started now included); for_good: the agent
    is ending, and no run() starts a child after this."""
    with _SPAWN:
        if for_good:
            _STOPPED.append(True)
        for popen in list(RUNNING):
            kill_group(popen)


def run(argv, timeout, env=None, cwd=None):
    """Run argv with a wall-clock budget; children are killed with it on timeout. A command started ahead
    (readahead.py) answers with that run's result."""
    ahead = AHEAD.get(tuple(argv))
    if ahead is not None:
        return ahead.result()
    return run_now(argv, timeout, env, cwd)


def run_now(argv, timeout, env=None, cwd=None):
    started = time.monotonic()
    with _SPAWN:
        if _STOPPED:
            return CommandResult(argv, returncode=None, stderr="not started: the agent is stopping", timed_out=True)
        try:
            popen = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                env=env, cwd=cwd, start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(argv, missing=True)
        except PermissionError as exc:
            return CommandResult(argv, returncode=126, stderr=str(exc))
        RUNNING.add(popen)
    try:
        out, err = popen.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(popen)
        out, err = popen.communicate()
        timed_out = True
    finally:
        kill_group(popen)  # grandchildren left behind by a finished child
        RUNNING.discard(popen)
    return CommandResult(
        argv, popen.returncode, _decode(out), _decode(err), timed_out, False, time.monotonic() - started
    )


def start(argv, env=None, log_path=None):
    """Start a long-lived child in its own session, talking over stdin/stdout pipes, stderr to a file.

    The caller reads, waits and kills (kill_group)."""
    err = open(log_path, "wb") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.PIPE, env=env,
                                start_new_session=True)
    finally:
        if err is not subprocess.DEVNULL:
            err.close()
