"""What the dashboard adds to a run over the bare agent, on this machine, with no GPU (issue 22).

Starts its own Redis and a Celery worker (concurrency 1) and registers one local node whose interpreter is a
wrapper: it runs this venv's python on the real agent zipapp the worker uploads, with the recorded H200 outputs
standing in for nvidia-smi and torch (tests/fakes, as the agent tests use them), and notes when the agent process
started and ended. For each mode, ROUNDS runs; per run:
- request -> stored: from run_request() to the run's `finished` (the report stored, the run in its end state);
- agent: the agent process's own wall time, read by the wrapper;
- overhead: the difference (queue, broker hop, task start, bundle upload, progress writes, storing the report);
and then the same through `manage.py validate_node --wait --json`, whose wall time also holds Django's start
(start -> request) and the wait's notice and the report's print (stored -> exit).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cudaweb_bench python3 bench/dashboard_overhead.py --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WRAPPER = """#!/bin/sh
# the node's "interpreter": the real agent (the zipapp in "$1") on recorded H200 outputs, timed
start=$(date +%%s.%%N)
PATH=%(fake_bin)s:$PATH PYTHONPATH=%(fake_torch)s %(env)s %(python)s "$@"
status=$?
echo "$start $(date +%%s.%%N)" >> %(times)s
exit $status
"""


def spread(values):
    return "%.3f / %.3f / %.3f" % (min(values), statistics.median(values), max(values))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="quick,standard")
    args = parser.parse_args()
    from cudaweb.embedded import free_port, start_redis
    from tests.agent.harness import FAKE_BIN, FAKE_TORCH, Scenario

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-overhead-"))
    scenario = Scenario(scratch / "host")
    times = scratch / "agent-times.txt"
    wrapper = scratch / "python-on-recorded-h200"
    wrapper.write_text(WRAPPER % {"fake_bin": FAKE_BIN, "fake_torch": FAKE_TORCH, "python": sys.executable,
                                  "times": times, "env": " ".join("%s=%s" % kv for kv in dict(
                                      scenario.env, CUDAPROBE_BYTECODE_CACHE=scratch / "pycache").items())})
    wrapper.chmod(0o755)
    redis_port = free_port()
    redis = start_redis(redis_port, scratch)
    os.environ.update(REDIS_URL="redis://127.0.0.1:%d/0" % redis_port, DJANGO_SETTINGS_MODULE="cudaweb.settings",
                      CUDAWEB_AGENT_CACHE_DIR=str(scratch / "agent-cache"))
    os.environ.setdefault("SECRET_KEY", "bench-only")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from cudaweb.nodes.models import Node
    from cudaweb.validation.models import ValidationRun
    from cudaweb.validation.services import run_request

    Node.objects.filter(name="overhead-0").delete()
    node = Node.objects.create(name="overhead-0", transport=Node.Transport.LOCAL, python_path=str(wrapper))
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                               "--concurrency", "1", "-n", "overhead@%h", "--without-gossip", "--without-mingle"],
                              cwd=REPO, env=dict(os.environ), start_new_session=True)
    try:
        time.sleep(3)  # the worker's start is no part of a run
        for mode in args.modes.split(","):
            rows = {"request -> stored": [], "agent": [], "overhead": [], "validate_node --wait": [],
                    "validate_node overhead": [], "  start -> request": [], "  stored -> exit": []}
            for number in range(args.rounds + 1):  # the first run warms the worker (bundle built, uploaded)
                times.write_text("")
                requested = time.time()
                run = run_request(node=node, mode=mode)
                while ValidationRun.objects.filter(id=run.id, status__in=ValidationRun.LIVE).exists():
                    time.sleep(0.005)
                run.refresh_from_db()
                start, end = map(float, times.read_text().split())
                times.write_text("")
                began = time.time()
                command = subprocess.run([sys.executable, "manage.py", "validate_node", node.name, "--mode", mode,
                                          "--wait", "--json"], cwd=REPO, env=dict(os.environ), capture_output=True)
                ended = time.time()
                command_s = ended - began
                c_start, c_end = map(float, times.read_text().split())
                if number == 0:
                    continue
                rows["request -> stored"].append(run.finished.timestamp() - requested)
                rows["agent"].append(end - start)
                rows["overhead"].append(run.finished.timestamp() - requested - (end - start))
                rows["validate_node --wait"].append(command_s)
                rows["validate_node overhead"].append(command_s - (c_end - c_start))
                assert command.returncode in (0, 1), command.stderr[-2000:]
                waited = ValidationRun.objects.get(id=json.loads(command.stdout)["run"])
                rows["  start -> request"].append(waited.created.timestamp() - began)
                rows["  stored -> exit"].append(ended - waited.finished.timestamp())
            print("%s, %d runs (%s), min / median / max s:" % (mode, args.rounds, run.status))
            for name, values in rows.items():
                print("  %-24s %s" % (name, spread(values)))
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        finally:
            os.killpg(worker.pid, 9) if worker.poll() is None else None
            worker.wait()
        redis.terminate()
        redis.wait()


if __name__ == "__main__":
    main()
