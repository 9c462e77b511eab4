"""The agent's command runner ends what it started: a child being started when the agent is told to stop is killed
with the others, and none starts after (the health command's watchdog left one driver query behind under load)."""

import os
import subprocess
import threading
import time

from agents.cudaprobe import proc


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_child_being_started_when_the_agent_stops_is_killed_and_none_starts_after(monkeypatch):
    monkeypatch.setattr(proc, "_STOPPED", [])
    monkeypatch.setattr(proc, "RUNNING", set())
    in_popen, let_go, started = threading.Event(), threading.Event(), []
    real_popen = subprocess.Popen

    def slow_popen(*args, **kwargs):  # a fork and exec that take their time, as on a loaded host
        popen = real_popen(*args, **kwargs)
        started.append(popen)
        in_popen.set()
        let_go.wait(10)
        return popen

    monkeypatch.setattr(proc.subprocess, "Popen", slow_popen)
    runner = threading.Thread(target=proc.run, args=(["sleep", "60"], 60), daemon=True)
    runner.start()
    assert in_popen.wait(10)
    stopper = threading.Thread(target=proc.kill_all, kwargs={"for_good": True})
    stopper.start()
    time.sleep(0.2)
    let_go.set()  # the Popen returns while kill_all is under way
    stopper.join(10)
    runner.join(10)
    pid = started[0].pid
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid), "the child started during kill_all still runs"
    after = proc.run(["sleep", "60"], 60)
    assert after.timed_out and "not started" in after.stderr and len(started) == 1


def test_killing_what_is_in_flight_does_not_stop_later_commands(monkeypatch):
    monkeypatch.setattr(proc, "_STOPPED", [])
    proc.kill_all()  # what readahead does at the end of a watch: the health command still drains after it
    assert proc.run(["true"], 10).ok
    assert os.path.exists("/proc/self")
