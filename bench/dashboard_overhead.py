"""What the dashboard adds to a run over the bare agent (issues 22, 33).

Starts its own Redis and a Celery worker (concurrency 1) and registers one local node whose interpreter is a
wrapper that notes when the agent process started and ended. By default (no GPU, this machine) the wrapper runs
this venv's python on the real agent zipapp the worker uploads, with the recorded H200 outputs standing in for
nvidia-smi and torch (tests/fakes, as the agent tests use them). With --real (a GPU host) it runs --agent-python
on the zipapp as it is, and --bare runs the bare agent (`python -m agents.cudaprobe`) before each dashboard run,
the two taking turns. For each mode, ROUNDS runs; per run:
- request -> stored: from run_request() to the run's `finished` (the report stored, the run in its end state);
- agent: the agent process's own wall time, read by the wrapper;
- overhead: the difference (queue, broker hop, task start, bundle upload, progress writes, storing the report);
- the dashboard's own steps (cudaweb.validation.dashboard_timing): queued -> claimed -> transport up -> agent
  started -> report received -> stored, each gap on its own line;
and then (unless --no-command) the same through `manage.py validate_node --wait --json`, whose wall time also holds
Django's start (start -> request) and the wait's notice and the report's print (stored -> exit).
REDIS_URL, when set, names the Redis to use. --cold N: first N runs per mode on a host's first run, for both sides: the agent cache (the uploaded zipapp) and
the bytecode cache (CUDAPROBE_BYTECODE_CACHE) emptied before each. --json FILE keeps every run's figures.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cudaweb_bench python3 bench/dashboard_overhead.py --rounds 5
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WRAPPER = """#!/bin/sh
# the node's "interpreter": the real agent (the zipapp in "$1"), timed
start=$(date +%%s.%%N)
%(prefix)s %(env)s %(python)s "$@"
status=$?
echo "$start $(date +%%s.%%N)" >> %(times)s
exit $status
"""


def spread(values):
    return "%.3f / %.3f / %.3f" % (min(values), statistics.median(values), max(values)) if values else "-"


def bare_run(python, mode, env):
    """The bare agent's wall time, as an operator runs it on the host: (seconds, exit status, its report or {})."""
    started = time.time()
    done = subprocess.run([python, "-m", "agents.cudaprobe", "--mode", mode, "--json"], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=300)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {}
    return time.time() - started, done.returncode, report


FIGURE_CHECKS = ("cuda.copy_bandwidth", "cuda.matmul")  # kept per run, to set beside bench/reference_loop.py


def figures(report):
    """The copy and matmul figures of a report (worst GPU), {} when it has none."""
    kept = {}
    for check in (report or {}).get("checks") or []:
        if check.get("id") in FIGURE_CHECKS:
            kept.update({k: v for k, v in (check.get("metrics") or {}).items() if "." not in k})
    return kept


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="quick,standard")
    parser.add_argument("--real", action="store_true", help="the real GPU: no recorded outputs in the wrapper")
    parser.add_argument("--agent-python", default=sys.executable, help="the node's interpreter under the wrapper")
    parser.add_argument("--bare", action="store_true", help="a bare agent run before each dashboard run")
    parser.add_argument("--cold", type=int, default=0, help="first runs per mode with the caches emptied")
    parser.add_argument("--no-command", action="store_true", help="no validate_node --wait runs")
    parser.add_argument("--json", help="every run's figures, to this file")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a time limit still ends the worker, keeps --json
    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-overhead-"))
    times = scratch / "agent-times.txt"
    pycache, agent_cache = scratch / "pycache", scratch / "agent-cache"
    agent_env = {"CUDAPROBE_BYTECODE_CACHE": str(pycache)}
    prefix = ""
    if not args.real:
        from tests.agent.harness import FAKE_BIN, FAKE_TORCH, Scenario

        scenario = Scenario(scratch / "host")
        agent_env.update(scenario.env)
        prefix = "PATH=%s:$PATH PYTHONPATH=%s" % (FAKE_BIN, FAKE_TORCH)
    wrapper = scratch / "python-timed"
    wrapper.write_text(WRAPPER % {"prefix": prefix, "python": args.agent_python, "times": times,
                                  "env": " ".join("%s=%s" % kv for kv in agent_env.items())})
    wrapper.chmod(0o755)
    bare_env = dict(os.environ, **agent_env)
    if not args.real:
        bare_env.update(PATH="%s:%s" % (FAKE_BIN, os.environ["PATH"]), PYTHONPATH=str(FAKE_TORCH))
    redis = None
    if not os.environ.get("REDIS_URL"):
        from cudaweb.embedded import free_port, start_redis
  # a Redis of our own, unless one is named (the device: a carried binary)
        redis_port = free_port()
        redis = start_redis(redis_port, scratch)
        os.environ["REDIS_URL"] = "redis://127.0.0.1:%d/0" % redis_port
    os.environ.update(DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_AGENT_CACHE_DIR=str(agent_cache))
    os.environ.setdefault("SECRET_KEY", "bench-only")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from cudaweb.nodes.models import Node
    from cudaweb.validation.dashboard_timing import GAPS, run_steps
    from cudaweb.validation.models import ValidationRun
    from cudaweb.validation.services import run_request

    Node.objects.filter(name="overhead-0").delete()
    node = Node.objects.create(name="overhead-0", transport=Node.Transport.LOCAL, python_path=str(wrapper))
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                               "--concurrency", "1", "-n", "overhead@%h", "--without-gossip", "--without-mingle"],
                              cwd=REPO, env=dict(os.environ), start_new_session=True)
    kept = []
    try:
        time.sleep(3)  # the worker's start is no part of a run
        warm_up = 0 if args.real else 1  # without a GPU: a first run warms the worker (bundle built, uploaded)
        for mode in args.modes.split(","):
            rows = {name: [] for name in ("request -> stored", "agent", "overhead", "bare agent", "validate_node --wait",
                                          "validate_node overhead", "  start -> request", "  stored -> exit")}
            steps = {step: [] for step in GAPS}
            cold_rows = {"cold: bare agent": [], "cold: request -> stored": [], "cold: agent": [],
                         "cold: overhead": []}
            for number in range(args.cold + warm_up + args.rounds):
                cold = number < args.cold
                tag = "cold: " if cold else ""
                entry = {"mode": mode, "cold": cold, "number": number}
                if cold:
                    shutil.rmtree(pycache, ignore_errors=True)
                if args.bare:
                    entry["bare_s"], entry["bare_rc"], bare_report = bare_run(args.agent_python, mode, bare_env)
                    entry.update(bare_report_s=bare_report.get("duration_s"), bare_figures=figures(bare_report))
                if cold:
                    shutil.rmtree(pycache, ignore_errors=True)
                    shutil.rmtree(agent_cache, ignore_errors=True)
                times.write_text("")
                requested = time.time()
                run = run_request(node=node, mode=mode)
                while ValidationRun.objects.filter(id=run.id, status__in=ValidationRun.LIVE).exists():
                    time.sleep(0.005)
                run.refresh_from_db()
                start, end = map(float, times.read_text().split())
                entry.update(status=run.status, requested_to_stored_s=run.finished.timestamp() - requested,
                             agent_s=end - start,
                             agent_report_s=(run.report or {}).get("duration_s"), agent_figures=figures(run.report),
                             steps=[dict(s, at=s["at"].isoformat()) for s in run_steps(run)])
                entry["overhead_s"] = entry["requested_to_stored_s"] - entry["agent_s"]
                if not args.no_command and not cold:
                    times.write_text("")
                    began = time.time()
                    command = subprocess.run([sys.executable, "manage.py", "validate_node", node.name, "--mode", mode,
                                              "--wait", "--json"], cwd=REPO, env=dict(os.environ), capture_output=True)
                    ended = time.time()
                    c_start, c_end = map(float, times.read_text().split())
                    assert command.returncode in (0, 1), command.stderr[-2000:]
                    waited = ValidationRun.objects.get(id=json.loads(command.stdout)["run"])
                    entry.update(command_s=ended - began, command_agent_s=c_end - c_start,
                                 start_to_request_s=waited.created.timestamp() - began,
                                 stored_to_exit_s=ended - waited.finished.timestamp())
                if number < args.cold + warm_up and not cold:
                    continue
                kept.append(entry)
                if cold:
                    cold_rows["cold: request -> stored"].append(entry["requested_to_stored_s"])
                    cold_rows["cold: agent"].append(entry["agent_s"])
                    cold_rows["cold: overhead"].append(entry["overhead_s"])
                    if args.bare:
                        cold_rows["cold: bare agent"].append(entry["bare_s"])
                    continue
                rows["request -> stored"].append(entry["requested_to_stored_s"])
                rows["agent"].append(entry["agent_s"])
                rows["overhead"].append(entry["overhead_s"])
                if args.bare:
                    rows["bare agent"].append(entry["bare_s"])
                if "command_s" in entry:
                    rows["validate_node --wait"].append(entry["command_s"])
                    rows["validate_node overhead"].append(entry["command_s"] - entry["command_agent_s"])
                    rows["  start -> request"].append(entry["start_to_request_s"])
                    rows["  stored -> exit"].append(entry["stored_to_exit_s"])
                for step in entry["steps"]:
                    if step["gap_s"] is not None:
                        steps[step["step"]].append(step["gap_s"])
            print("%s, %d runs (%s), min / median / max s:" % (mode, args.rounds, run.status))
            for name, values in list(rows.items()) + list(cold_rows.items()):
                if values:
                    print("  %-28s %s" % (name, spread(values)))
            print("  the dashboard's steps (warm runs):")
            for step, values in steps.items():
                print("    %-26s %s" % ("-> %s (%s)" % (step, GAPS[step]), spread(values)))
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)  # a warm shutdown waits for the run in flight; a time limit cannot
        finally:
            os.killpg(worker.pid, 9) if worker.poll() is None else None
            worker.wait()
        if redis is not None:
            redis.terminate()
            redis.wait()
        if args.json:
            Path(args.json).write_text(json.dumps(kept, indent=1))


if __name__ == "__main__":
    main()
