"""The Celery app of bench/watch_scale.py's one worker: cudaweb's own, with the watch's sessions opened on stand-ins
that answer a recorded real watch report at once (so what is measured is the dashboard's cost), and each task's
database queries, CPU and wall time appended to $WATCH_SCALE_STATS; each look's moment to $WATCH_SCALE_LOOKS."""

import json
import os
import sys
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

        self.looks.write("%s %.3f\n" % (self.node.name, time.time()))
        self.looks.flush()
        noisy = int(self.node.name.rsplit("-", 1)[1]) % 50 == 0
        return ExecResult(0, self.reports[noisy], "")


@worker_process_init.connect
def _stand_ins(**kwargs):
    from django.db import connection

    from cudaweb.health import watch
    from tests.health.standin import watch_report

    looks = open(os.environ["WATCH_SCALE_LOOKS"], "a")
    reports = {False: json.dumps(watch_report()), True: json.dumps(watch_report("nvlink_growth"))}
    watch.SESSIONS.opener = lambda node, purpose="": StandIn(node, looks, reports)

    def count(execute, sql, params, many, context):
        _task["queries"] = _task.get("queries", 0) + 1
        return execute(sql, params, many, context)

    connection.execute_wrappers.append(count)
    _task["out"] = open(os.environ["WATCH_SCALE_STATS"], "a")


@task_prerun.connect
def _start(task=None, **kwargs):
    _task.update(queries=0, cpu=time.process_time(), wall=time.monotonic())


@task_postrun.connect
def _end(task=None, **kwargs):
    _task["out"].write(json.dumps({"task": task.name.rsplit(".", 1)[-1], "queries": _task["queries"],
                                   "cpu_s": round(time.process_time() - _task["cpu"], 6),
                                   "wall_s": round(time.monotonic() - _task["wall"], 6)}) + "\n")
    _task["out"].flush()
