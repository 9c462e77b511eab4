"""Bulk validation at once, many times, on PostgreSQL: are all reports kept and does every run end?

Starts its own Redis and a Celery worker (concurrency 8), registers NODES local nodes whose "agent" prints a real
H200 report (tests/fixtures/real/h200-gpus2-standard.json, as a fake interpreter at the process level), then
requests all of them together ROUNDS times and waits. Prints per round the wall time and the states, and at the
end the runs whose report was lost and the runs left PENDING or RUNNING.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cudaweb_bench python3 bench/bulk_rounds.py --rounds 100 --nodes 40
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
REPORT = REPO / "tests" / "fixtures" / "real" / "h200-gpus2-standard.json"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database (the race this measures needs concurrent writers)")
    from cudaweb.embedded import free_port, start_redis

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-bulk-"))
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
    from cudaweb.validation.models import CheckResult, ValidationRun
    from cudaweb.validation.services import run_request

    agent = scratch / "agent-prints-a-real-report"
    agent.write_text("#!/bin/sh\ncat %s\n" % REPORT)
    agent.chmod(0o755)
    Node.objects.filter(name__startswith="bulk-").delete()
    nodes = [Node.objects.create(name="bulk-%03d" % i, transport=Node.Transport.LOCAL, python_path=str(agent))
             for i in range(args.nodes)]
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                               "--concurrency", str(args.concurrency), "-n", "bulk@%h", "--without-gossip",
                               "--without-mingle"], cwd=REPO, env=dict(os.environ), start_new_session=True)
    checks_per_report = len(__import__("json").loads(REPORT.read_text())["checks"])
    totals = collections.Counter()
    try:
        for number in range(1, args.rounds + 1):
            started = time.monotonic()
            runs = [run_request(node=node, mode="standard") for node in nodes]
            ids = [run.id for run in runs]
            deadline = time.monotonic() + 300
            while ValidationRun.objects.filter(id__in=ids, status__in=ValidationRun.LIVE).exists():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            states = collections.Counter(ValidationRun.objects.filter(id__in=ids).values_list("status", flat=True))
            kept = ValidationRun.objects.filter(id__in=ids, status=ValidationRun.Status.PASSED,
                                                report__isnull=False).count()
            rows = CheckResult.objects.filter(run_id__in=ids).count()
            totals.update(states)
            totals["reports kept"] += kept
            totals["check rows"] += rows
            print("round %3d: %5.2f s  %s  reports kept %d/%d  check rows %d/%d" % (
                number, time.monotonic() - started, dict(states), kept, len(ids), rows, len(ids) * checks_per_report),
                flush=True)
    finally:
        worker.terminate()  # a warm shutdown of the main process, then whatever is left of its group
        try:
            worker.wait(timeout=60)
        finally:
            os.killpg(worker.pid, 9) if worker.poll() is None else None
            worker.wait()
        redis.terminate()
        redis.wait()
    runs = args.rounds * args.nodes
    print("runs %d, reports kept %d, reports lost %d, left PENDING %d, left RUNNING %d, other states %s" % (
        runs, totals["reports kept"], runs - totals["reports kept"], totals["PENDING"], totals["RUNNING"],
        {k: v for k, v in totals.items() if k not in ("PASSED", "PENDING", "RUNNING", "reports kept",
                                                      "check rows")}))


if __name__ == "__main__":
    main()
