"""The Celery app of bench/watch_scale.py's one worker: cudaweb's own, with the watch's sessions opened on stand-ins
that answer a recorded real watch report at once (so what is measured is the dashboard's cost), and each task's
database queries, CPU and wall time appended to $WATCH_SCALE_STATS (and each look's, run on the watch's threads); each
look's moment to $WATCH_SCALE_LOOKS."""

import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from celery.signals import task_postrun, task_prerun, worker_process_init  # noqa: E402

from cudaweb.celery import app  # noqa: E402,F401 (the app celery -A finds here)

_task = {}


class StandIn:
    """A node that answers the watch at once with the recorded report (2 % of them with an NVLink counter
    growing, so that events are made and grow)."""

    def __init__(self, node, looks, reports):
        self.node, self.looks, self.reports = node, looks, reports

    def upload_agent(self, payload, digest):
        return "/stand-in/cudaprobe.pyz"

    def run_agent(self, python, agent_path, agent_args, limit_s, on_stderr_line=None, env=None):
        from cudaweb.remote.transports.base import ExecResult

        os.write(self.looks, b"%s %.3f\n" % (self.node.name.encode(), time.time()))  # one append: lines never mix
        noisy = int(self.node.name.rsplit("-", 1)[1]) % 50 == 0
        return ExecResult(0, self.reports[noisy], "")


@worker_process_init.connect
def _stand_ins(**kwargs):
    from django.db import connection

    from cudaweb.health import watch
    from tests.health.standin import watch_report

    looks = os.open(os.environ["WATCH_SCALE_LOOKS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    reports = {False: json.dumps(watch_report()), True: json.dumps(watch_report("nvlink_growth"))}
    if not os.environ.get("WATCH_SCALE_SSH"):  # --ssh: the real transports, to the simulated hosts
        watch.SESSIONS.opener = lambda node, purpose="": StandIn(node, looks, reports)

    def count(execute, sql, params, many, context):
        _task["queries"] = _task.get("queries", 0) + 1
        return execute(sql, params, many, context)

    connection.execute_wrappers.append(count)
    _task["out"] = open(os.environ["WATCH_SCALE_STATS"], "a")
    lock = threading.Lock()
    original = watch.look

    def counted_look(node_id, *args, **kwargs):
        mine = {"queries": 0}

        def count_mine(execute, sql, params, many, context):
            mine["queries"] += 1
            return execute(sql, params, many, context)

        cpu, wall = time.thread_time(), time.monotonic()
        with connection.execute_wrapper(count_mine):
            result = original(node_id, *args, **kwargs)
        row = json.dumps({"task": "look", "queries": mine["queries"], "cpu_s": round(time.thread_time() - cpu, 6),
                          "wall_s": round(time.monotonic() - wall, 6)})
        with lock:
            _task["out"].write(row + "\n")
            _task["out"].flush()
        return result

    watch.look = counted_look


@task_prerun.connect
def _start(task=None, **kwargs):
    _task.update(queries=0, cpu=time.process_time(), wall=time.monotonic())


@task_postrun.connect
def _end(task=None, **kwargs):
    # queries: the task's own thread's (a batch's looks run on the watch's threads, counted per look); CPU: the
    # whole process's while the task ran, its looks' threads included
    _task["out"].write(json.dumps({"task": task.name.rsplit(".", 1)[-1], "queries": _task["queries"],
                                   "cpu_s": round(time.process_time() - _task["cpu"], 6),
                                   "wall_s": round(time.monotonic() - _task["wall"], 6)}) + "\n")
    _task["out"].flush()
