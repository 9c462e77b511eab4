"""Bulk runs while the database blinks: is every report stored and does every run end?

Starts its own PostgreSQL cluster (tests/pgcluster.py: initdb / pg_ctl on a free port, never the machine's server),
its own Redis and a Celery worker, registers NODES local nodes whose "agent" waits AGENT_S seconds and prints a real
H200 report (tests/fixtures/real/h200-gpus2-standard.json), then requests all of them together ROUNDS times. In each
round, FAULT_AT_S seconds after the request, the database blinks:
  terminate  every connection to the database is ended (pg_terminate_backend), twice, TERMINATE_GAP_S apart;
  restart    the server stops (fast shutdown) and starts again OUTAGE_S seconds later;
  alternate  terminate in odd rounds, restart in even ones;
  none       nothing (the same rounds without a fault, to compare).
Prints per round the fault, the time until every run was terminal, the states, the reports stored with all their
check rows (and of those, how many the reaper stored from a worker's spool: the database was away past the retries,
CUDAWEB_DB_RETRY_S), the retried writes the worker logged and the runs' retries; then the totals. The environment
reaches the worker (e.g. CUDAWEB_DB_RETRY_S=3 CUDAWEB_REAP_EVERY_S=2 for outages longer than the retries).

    python3 bench/db_faults.py --rounds 20 --nodes 40 --fault alternate --outage-s 30
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
REPORT = REPO / "tests" / "fixtures" / "real" / "h200-gpus2-standard.json"
DATABASE = "cudaweb_faults"


def _arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--agent-s", type=float, default=4.0, help="how long each agent works before it reports")
    parser.add_argument("--fault", choices=("terminate", "restart", "alternate", "none"), default="alternate")
    parser.add_argument("--fault-at-s", type=float, default=5.0, help="seconds after the request")
    parser.add_argument("--terminate-gap-s", type=float, default=5.0)
    parser.add_argument("--outage-s", type=float, default=10.0, help="how long a restart keeps the server away")
    parser.add_argument("--round-timeout-s", type=float, default=400.0)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON: every round's figures")
    return parser.parse_args(argv)


def _fault_of(args, number):
    if args.fault == "alternate":
        return "terminate" if number % 2 else "restart"
    return args.fault


def _blink(cluster, fault, args, done):
    """The fault, from its own thread so that the round's clock keeps running; `done` gets what it did."""
    if fault == "none":
        done.append("nothing")
        return
    time.sleep(args.fault_at_s)
    if fault == "terminate":
        first = cluster.terminate(DATABASE)
        time.sleep(args.terminate_gap_s)
        done.append("terminated %d then %d connections" % (first, cluster.terminate(DATABASE)))
    else:
        started = time.monotonic()
        cluster.restart(down_s=args.outage_s)
        done.append("restarted, away %.1f s" % (time.monotonic() - started))


def _riding_over(query):
    """Run a read of this process's own, waiting on a new connection while the database is away."""
    from django.db import DatabaseError, InterfaceError, OperationalError, connection

    while True:
        try:
            return query()
        except (OperationalError, InterfaceError):
            try:
                connection.close()
            except DatabaseError:
                connection.connection = None
            time.sleep(0.5)


def _errors_of(log, keep=8):
    """The worker's ERROR records of a round, each with the last line of its traceback (the exception), as
    "<record> | <exception>"; "reaping failed" while the database is away is left out (the reaper tries again)."""
    found, lines = [], log.decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if "ERROR/" not in line or "reaping failed" in line:
            continue
        tail = next((lines[j] for j in range(i + 1, min(i + 80, len(lines))) if "/ForkPoolWorker" in lines[j]
                     or "/MainProcess]" in lines[j]), None)
        block = lines[i + 1:lines.index(tail, i + 1) if tail else min(i + 80, len(lines))]
        exceptions = [b for b in block if b and not b.startswith((" ", "Traceback", "The above", "During"))]
        found.append(line.split("] ", 1)[-1][:300] + (" | " + exceptions[-1][:300] if exceptions else ""))
    return found[:keep]


def main(argv=None):
    args = _arguments(argv)
    from cudaweb.embedded import free_port, start_redis
    from tests.pgcluster import Cluster

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-dbfaults-"))
    cluster = Cluster()
    cluster.create_database(DATABASE)
    redis_port = free_port()
    redis = start_redis(redis_port, scratch)
    os.environ.update(DATABASE_URL=cluster.url(DATABASE), REDIS_URL="redis://127.0.0.1:%d/0" % redis_port,
                      DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_AGENT_CACHE_DIR=str(scratch / "agent-cache"),
                      CUDAWEB_REPORT_SPOOL_DIR=str(scratch / "report-spool"))
    os.environ.setdefault("SECRET_KEY", "bench-only")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Count

    call_command("migrate", verbosity=0)
    from cudaweb.celery import app
    from cudaweb.nodes.models import Node
    from cudaweb.validation.models import CheckResult, ValidationRun
    from cudaweb.validation.services import runs_request

    agent = scratch / "agent-prints-a-real-report"
    agent.write_text("#!/bin/sh\nsleep %s\ncat %s\n" % (args.agent_s, REPORT))
    agent.chmod(0o755)
    nodes = [Node.objects.create(name="fault-%03d" % i, transport=Node.Transport.LOCAL, python_path=str(agent))
             for i in range(args.nodes)]
    worker_log = scratch / "worker.log"
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                               "--concurrency", str(args.concurrency), "-n", "dbfaults@%h", "--without-gossip",
                               "--without-mingle"], cwd=REPO, env=dict(os.environ), start_new_session=True,
                              stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            sys.exit("the worker did not start:\n" + worker_log.read_text()[-3000:])
    checks_per_report = len(json.loads(REPORT.read_text())["checks"])
    rounds, totals = [], collections.Counter()
    try:
        for number in range(1, args.rounds + 1):
            fault, done, log_start = _fault_of(args, number), [], worker_log.stat().st_size
            started = time.monotonic()
            ids = [run.id for run in runs_request(nodes=nodes, mode="standard")]
            blinker = threading.Thread(target=_blink, args=(cluster, fault, args, done))
            blinker.start()
            while time.monotonic() - started < args.round_timeout_s and _riding_over(
                    lambda: ValidationRun.objects.filter(id__in=ids, status__in=ValidationRun.LIVE).exists()):
                time.sleep(0.1)
            terminal_s = time.monotonic() - started
            blinker.join()
            states = _riding_over(lambda: collections.Counter(
                ValidationRun.objects.filter(id__in=ids).values_list("status", flat=True)))
            rows = _riding_over(lambda: dict(CheckResult.objects.filter(run_id__in=ids).values("run_id").annotate(
                n=Count("id")).values_list("run_id", "n")))
            stored = _riding_over(lambda: sum(1 for run_id in ValidationRun.objects.filter(
                id__in=ids, status=ValidationRun.Status.PASSED, report__isnull=False).values_list("id", flat=True)
                if rows.get(run_id) == checks_per_report))
            retries = _riding_over(lambda: ValidationRun.objects.filter(retry_of_id__in=ids).count())
            late = _riding_over(lambda: ValidationRun.objects.filter(id__in=ids,
                                                                     reason__contains="stored by the reaper").count())
            with open(worker_log, "rb") as fh:
                fh.seek(log_start)
                round_log = fh.read()
            retried_writes = round_log.count(b"trying again in")
            reasons = _riding_over(lambda: sorted(set(ValidationRun.objects.filter(id__in=ids).exclude(
                status=ValidationRun.Status.PASSED).values_list("reason", flat=True))))
            figures = {"round": number, "fault": fault, "did": done[0] if done else "", "terminal_s":
                       round(terminal_s, 2), "runs": len(ids), "stored": stored, "states": dict(states),
                       "retried_writes": retried_writes, "retries": retries, "stored_by_reaper": late,
                       "reasons": reasons, "worker_errors": _errors_of(round_log)}
            rounds.append(figures)
            totals.update(states)
            totals["stored"] += stored
            print("round %3d %-9s (%s): all terminal in %6.2f s  %s  reports stored %d/%d (by the reaper %d)  "
                  "writes retried %d  runs retried %d" % (number, fault, figures["did"], terminal_s, dict(states),
                                                          stored, len(ids), late, retried_writes, retries), flush=True)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        finally:
            os.killpg(worker.pid, 9) if worker.poll() is None else None
            worker.wait()
        redis.terminate()
        redis.wait()
        cluster.close()
    runs = args.rounds * args.nodes
    live = totals["PENDING"] + totals["RUNNING"]
    print("runs %d, reports stored %d, reports lost %d, left live %d, states %s, slowest round %.2f s" % (
        runs, totals["stored"], runs - totals["stored"], live,
        {k: v for k, v in totals.items() if k != "stored"}, max(r["terminal_s"] for r in rounds)), flush=True)
    if args.json:
        print(json.dumps({"rounds": rounds, "runs": runs, "stored": totals["stored"], "left_live": live}))


if __name__ == "__main__":
    main()
