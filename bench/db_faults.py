"""Bulk runs while the database blinks: is every report stored and does every run end?

Starts its own PostgreSQL cluster (tests/pgcluster.py: initdb / pg_ctl on a free port, never the machine's server),
its own Redis and a Celery worker, registers NODES local nodes whose "agent" waits AGENT_S seconds and prints a real
H200 report (tests/fixtures/real/h200-gpus2-standard.json), then requests all of them together ROUNDS times. In each
round, FAULT_AT_S seconds after the request, the database blinks:
  terminate  every connection to the database is ended (pg_terminate_backend), twice, TERMINATE_GAP_S apart; with
             --in-flight the second time is as soon as reports are being stored: the bench holds a lock on the check
             rows from the first time on, and ends the connections once stores wait on it (their transactions cut);
  restart    the server stops (fast shutdown) and starts again OUTAGE_S seconds later;
  alternate  terminate in odd rounds, restart in even ones;
  none       nothing (the same rounds without a fault, to compare);
  poison     no fault, but BAD_NODES more nodes print a real report with a headline figure no arithmetic survives
             (1.7e308 and an integer of 401 digits, in turn), with peers of their GPU model stored first;
  duplicate  no fault, but BAD_NODES more nodes print a real report naming one check twice;
  killed-twice  the server stops, the worker is killed (SIGKILL, its agents with it), a second worker starts and takes
             tasks whose claims wait on the database, is killed HOLD_S later, the server starts OUTAGE_S after it
             stopped and a third worker starts;
  outage     the server stops OUTAGE_S (e.g. 100 s against runs longer than that, the worker's CUDAWEB_STALE_RUN_S
             shorter than the outage: the reaper must not end live runs);
  full-spool the worker's spool is a tmpfs of one page (as root) and the server stops OUTAGE_S (past the retries);
  truncated-spool  the server stops OUTAGE_S (past the retries); each kept report whose run ended DASHBOARD_ERROR with
             its report in its column is truncated in the spool.
Prints per round the fault, the time until every run was terminal (a run INTERRUPTED is followed to its retry),
runs, stored, lost (a good report not stored), mislabelled (a bad report not AGENT_ERROR naming its field or check;
a good one ended otherwise than PASSED), live (still PENDING or RUNNING when the round ends: ROUND_TIMEOUT_S, 300 s
by default, "live after 5 min"), the states, the reports stored with all their
check rows (and of those, how many the reaper stored from a worker's spool: the database was away past the retries,
CUDAWEB_DB_RETRY_S), the retried writes the worker logged and the runs' retries; then the totals. The environment
reaches the worker (e.g. CUDAWEB_DB_RETRY_S=3 CUDAWEB_REAP_EVERY_S=2 for outages longer than the retries).

    python3 bench/db_faults.py --rounds 20 --nodes 40 --fault alternate --outage-s 30
    python3 bench/db_faults.py --rounds 10 --nodes 8 --fault poison --bad-nodes 4
    CUDAWEB_STALE_RUN_S=60 python3 bench/db_faults.py --rounds 10 --nodes 6 --fault outage --agent-s 150 \
        --fault-at-s 20 --outage-s 92
"""

import argparse
import collections
import json
import os
import signal
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
FAULTS = ("terminate", "restart", "alternate", "none", "poison", "duplicate", "killed-twice", "outage", "full-spool",
          "truncated-spool")
OUTAGES = ("restart", "outage", "full-spool", "truncated-spool")  # the server away OUTAGE_S


def _arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--agent-s", type=float, default=4.0, help="how long each agent works before it reports")
    parser.add_argument("--fault", choices=FAULTS, default="alternate")
    parser.add_argument("--bad-nodes", type=int, default=4, help="poison, duplicate: nodes printing a bad report")
    parser.add_argument("--hold-s", type=float, default=5.0, help="killed-twice: how long the second worker lives")
    parser.add_argument("--fault-at-s", type=float, default=5.0, help="seconds after the request")
    parser.add_argument("--terminate-gap-s", type=float, default=5.0)
    parser.add_argument("--in-flight", action="store_true",
                        help="terminate: end the connections the second time while reports are being stored")
    parser.add_argument("--outage-s", type=float, default=10.0, help="how long a restart keeps the server away")
    parser.add_argument("--round-timeout-s", type=float, default=300.0, help="runs live then are counted live")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON: every round's figures")
    return parser.parse_args(argv)


def _fault_of(args, number):
    if args.fault == "alternate":
        return "terminate" if number % 2 else "restart"
    return args.fault


def _blink(cluster, fault, args, done, workers):
    """The fault, from its own thread so that the round's clock keeps running; `done` gets what it did."""
    if fault in ("none", "poison", "duplicate"):
        done.append("nothing")
        return
    time.sleep(args.fault_at_s)
    if fault == "terminate" and args.in_flight:
        first = cluster.terminate(DATABASE)
        waiting, second = _terminate_in_flight(cluster, args)
        done.append("terminated %d then %d connections (%d storing a report)" % (first, second, waiting))
    elif fault == "terminate":
        first = cluster.terminate(DATABASE)
        time.sleep(args.terminate_gap_s)
        done.append("terminated %d then %d connections" % (first, cluster.terminate(DATABASE)))
    elif fault == "killed-twice":
        started = time.monotonic()
        cluster.stop()
        workers.kill()
        workers.start()  # answers a ping: it consumes, and takes tasks whose claims wait on the database
        time.sleep(args.hold_s)
        held = workers.unacked()
        workers.kill()
        time.sleep(max(0.0, args.outage_s - (time.monotonic() - started)))
        cluster.start()
        workers.start(wait=False)
        done.append("stopped, worker killed, a second killed holding %d messages, back after %.1f s" % (
            held, time.monotonic() - started))
    else:
        started = time.monotonic()
        cluster.restart(down_s=args.outage_s)
        done.append("restarted, away %.1f s" % (time.monotonic() - started))


def _terminate_in_flight(cluster, args):
    """Hold a lock that the check rows' INSERT waits on, so that the reports stored next are held inside their
    transactions; once up to CONCURRENCY of them wait (or AGENT_S + TERMINATE_GAP_S have passed), end every other
    connection and let go. A connection the server drops without warning between two writes is replaced quietly
    (CONN_HEALTH_CHECKS, the writes that drop it on failure); one cut in the middle of a store is the retry's work.
    Returns (stores that were waiting, connections ended)."""
    import psycopg
    from cudaweb.validation.models import CheckResult

    table = CheckResult._meta.db_table
    with psycopg.connect(cluster.url(DATABASE), connect_timeout=10) as holder:  # one transaction until the end
        holder.execute('LOCK TABLE "%s" IN SHARE MODE' % table)
        deadline = time.monotonic() + args.agent_s + args.terminate_gap_s
        with psycopg.connect(cluster.url(DATABASE), autocommit=True, connect_timeout=10) as looker:
            while True:  # a connection of its own: pg_stat_activity is read once per transaction
                waiting = looker.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                                         "wait_event_type = 'Lock' AND query LIKE %s",
                                         (DATABASE, '%INSERT INTO "' + table + '"%')).fetchone()[0]
                if waiting >= args.concurrency or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        ended = holder.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> pg_backend_pid()", (DATABASE,)).fetchone()[0]
        holder.rollback()
    return waiting, ended


class Workers:
    """The bench's Celery worker: started, killed (SIGKILL to its process group: its pool and agents too), started
    again, all writing to one log."""

    def __init__(self, args, log_path):
        self.args, self.log_path, self.popen = args, log_path, None

    def start(self, wait=True):
        from cudaweb.celery import app

        self.popen = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                                       "--concurrency", str(self.args.concurrency),
                                       "-n", "dbfaults-%d@%%h" % time.time_ns(),
                                       "--without-gossip", "--without-mingle"], cwd=REPO, env=dict(os.environ),
                                      start_new_session=True, stdout=open(self.log_path, "ab"),
                                      stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while wait and not app.control.ping(timeout=0.5):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                sys.exit("the worker did not start:\n" + self.log_path.read_text()[-3000:])

    def unacked(self):
        """Messages delivered to a worker and not acknowledged (Redis's `unacked` set)."""
        from cudaweb.validation import queue

        client = queue.broker_client()
        try:
            return client.hlen("unacked")
        finally:
            client.close()

    def kill(self):
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def stop(self):
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout=60)
        finally:
            if self.popen.poll() is None:
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


def _truncate_kept(stop, spool, done):
    """truncated-spool: cut each kept report whose run ended DASHBOARD_ERROR with its report in its column."""
    from cudaweb.validation.models import ValidationRun

    cut = set()
    while not stop.is_set():
        for path in spool.glob("*.json"):
            if path.stem in cut:
                continue
            try:
                if ValidationRun.objects.filter(id=path.stem, report_unstored=True).exists():
                    path.write_text(path.read_text()[:500])
                    cut.add(path.stem)
            except Exception:  # the database away, the file stored meanwhile: look again
                _connection_forget()
        time.sleep(0.1)
    done.append(len(cut))


def _connection_forget():
    from django.db import DatabaseError, connection

    try:
        connection.close()
    except DatabaseError:
        connection.connection = None


def _bad_report(kind, number):
    """A real report made bad: a headline figure no arithmetic survives, or a check named twice."""
    report = json.loads(REPORT.read_text())
    if kind == "duplicate":
        report["checks"].append(dict(report["checks"][2]))
        return json.dumps(report), report["checks"][2]["id"]
    check = next(c for c in report["checks"] if "matmul_bf16_tflops" in c["metrics"])
    check["metrics"]["matmul_bf16_tflops"] = 123456.5
    figure = "1.7e308" if number % 2 else "1" + "0" * 400
    return json.dumps(report).replace("123456.5", figure, 1), "matmul_bf16_tflops"


def _chain_ends(ids):
    """{run id: the run it ended as} following each INTERRUPTED run to its retry."""
    from cudaweb.validation.models import ValidationRun

    ends = {run_id: run_id for run_id in ids}
    while True:
        retried = dict(ValidationRun.objects.filter(retry_of_id__in=list(ends.values())).values_list("retry_of_id",
                                                                                                     "id"))
        if not retried:
            return ends
        ends = {run_id: retried.get(end, end) for run_id, end in ends.items()}


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
    spool = scratch / "report-spool"
    mounted = False
    if args.fault == "full-spool":
        spool.mkdir()
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs",
                                                str(spool)]).returncode != 0:
            sys.exit("full-spool mounts a tmpfs of one page on the spool: run it as root")
        mounted = True
    cluster = Cluster()
    cluster.create_database(DATABASE)
    redis_port = free_port()
    redis = start_redis(redis_port, scratch)
    os.environ.update(DATABASE_URL=cluster.url(DATABASE), REDIS_URL="redis://127.0.0.1:%d/0" % redis_port,
                      DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_AGENT_CACHE_DIR=str(scratch / "agent-cache"),
                      CUDAWEB_REPORT_SPOOL_DIR=str(spool))
    os.environ.setdefault("SECRET_KEY", "bench-only")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Count, Q

    call_command("migrate", verbosity=0)
    from cudaweb.nodes.models import Node
    from cudaweb.validation.models import CheckResult, ValidationRun
    from cudaweb.validation.services import runs_request

    agent = scratch / "agent-prints-a-real-report"
    agent.write_text("#!/bin/sh\nsleep %s\ncat %s\n" % (args.agent_s, REPORT))
    agent.chmod(0o755)
    nodes = [Node.objects.create(name="fault-%03d" % i, transport=Node.Transport.LOCAL, python_path=str(agent))
             for i in range(args.nodes)]
    bad = {}  # node id -> what its run's reason must name
    if args.fault in ("poison", "duplicate"):
        for i in range(args.bad_nodes):
            text, named = _bad_report(args.fault, i)
            (scratch / ("bad-%d.json" % i)).write_text(text)
            script = scratch / ("agent-prints-a-bad-report-%d" % i)
            script.write_text("#!/bin/sh\nsleep %s\ncat %s\n" % (args.agent_s, scratch / ("bad-%d.json" % i)))
            script.chmod(0o755)
            node = Node.objects.create(name="bad-%03d" % i, transport=Node.Transport.LOCAL, python_path=str(script))
            bad[node.id] = named
    worker_log = scratch / "worker.log"
    workers = Workers(args, worker_log)
    workers.start()
    checks_per_report = len(json.loads(REPORT.read_text())["checks"])
    rounds, totals = [], collections.Counter()
    try:
        if bad:  # peers of the bad nodes' GPU model stored first: drift then compares their figures
            ids = [run.id for run in runs_request(nodes=nodes, mode="standard")]
            while ValidationRun.objects.filter(id__in=ids, status__in=ValidationRun.LIVE).exists():
                time.sleep(0.2)
        everyone = nodes + list(Node.objects.filter(id__in=list(bad)))
        for number in range(1, args.rounds + 1):
            fault, done, log_start = _fault_of(args, number), [], worker_log.stat().st_size
            started = time.monotonic()
            requested = runs_request(nodes=everyone, mode="standard")
            ids = [run.id for run in requested]
            expected_bad = {run.id: bad[run.node_id] for run in requested if run.node_id in bad}
            blinker = threading.Thread(target=_blink, args=(cluster, fault, args, done, workers))
            blinker.start()
            stop_cutting, cut = threading.Event(), []
            cutter = threading.Thread(target=_truncate_kept, args=(stop_cutting, spool, cut))
            if fault == "truncated-spool":
                cutter.start()
            while time.monotonic() - started < args.round_timeout_s and _riding_over(  # a report a reaper is to
                    lambda: ValidationRun.objects.filter(id__in=list(_chain_ends(ids).values())).filter(  # store too
                        Q(status__in=ValidationRun.LIVE) | Q(report_unstored=True)).exists()):
                time.sleep(0.2)
            terminal_s = time.monotonic() - started
            blinker.join()
            if cutter.is_alive():
                stop_cutting.set()
                cutter.join()
            ends = _riding_over(lambda: _chain_ends(ids))
            finals = _riding_over(lambda: {run.id: run for run in ValidationRun.objects.filter(
                id__in=list(ends.values())).only("id", "status", "reason", "report")})
            states = collections.Counter(finals[ends[run_id]].status for run_id in ids)
            rows = _riding_over(lambda: dict(CheckResult.objects.filter(run_id__in=list(ends.values())).values(
                "run_id").annotate(n=Count("id")).values_list("run_id", "n")))
            good = [run_id for run_id in ids if run_id not in expected_bad]
            live = sum(1 for run_id in ids if finals[ends[run_id]].status in ValidationRun.LIVE)
            stored = sum(1 for run_id in good if finals[ends[run_id]].status == ValidationRun.Status.PASSED
                         and finals[ends[run_id]].report and rows.get(ends[run_id]) == checks_per_report)
            lost = sum(1 for run_id in good if finals[ends[run_id]].status not in ValidationRun.LIVE) - stored
            mislabelled = sum(1 for run_id, named in expected_bad.items() if not (
                finals[ends[run_id]].status == ValidationRun.Status.AGENT_ERROR
                and named in finals[ends[run_id]].reason))
            retries = sum(1 for run_id in ids if ends[run_id] != run_id)
            late = sum(1 for run in finals.values() if "stored by the reaper" in run.reason)
            with open(worker_log, "rb") as fh:
                fh.seek(log_start)
                round_log = fh.read()
            retried_writes = round_log.count(b"trying again in")
            requeued = round_log.count(b"queued again")
            spool_refused = round_log.count(b"could not take the report")
            reasons = sorted({run.reason[:300] for run in finals.values() if run.status != ValidationRun.Status.PASSED})
            figures = {"round": number, "fault": fault, "did": done[0] if done else "", "terminal_s":
                       round(terminal_s, 2), "runs": len(ids), "stored": stored, "lost": lost,
                       "mislabelled": mislabelled, "live": live, "bad_runs": len(expected_bad), "states": dict(states),
                       "retried_writes": retried_writes, "retries": retries, "stored_by_reaper": late,
                       "requeued": requeued, "spool_refused": spool_refused,
                       "truncated": cut[0] if cut else 0, "reasons": reasons, "worker_errors": _errors_of(round_log)}
            rounds.append(figures)
            totals.update(states)
            totals.update(runs=len(ids), stored=stored, lost=lost, mislabelled=mislabelled, live=live)
            print("round %3d %-9s (%s): all terminal in %6.2f s  %s  runs %d stored %d/%d lost %d mislabelled %d "
                  "live %d (by the reaper %d)  writes retried %d  runs retried %d  requeued %d%s" % (
                      number, fault, figures["did"], terminal_s, dict(states), len(ids), stored, len(good), lost,
                      mislabelled, live, late, retried_writes, retries, requeued,
                      "  truncated %d" % figures["truncated"] if fault == "truncated-spool" else
                      "  spool refused %d" % spool_refused if fault == "full-spool" else ""), flush=True)
    finally:
        workers.stop()
        redis.terminate()
        redis.wait()
        cluster.close()
        if mounted:
            subprocess.run(["umount", str(spool)])
    live = totals["live"]
    print("fault %s, rounds %d: runs %d, stored %d, lost %d, mislabelled %d, live after %.0f s %d; states %s, "
          "slowest round %.2f s" % (args.fault, args.rounds, totals["runs"], totals["stored"], totals["lost"],
                                    totals["mislabelled"], args.round_timeout_s, live,
                                    {k: v for k, v in totals.items() if k.isupper()},
                                    max(r["terminal_s"] for r in rounds)), flush=True)
    if args.json:
        print(json.dumps({"rounds": rounds, "runs": totals["runs"], "stored": totals["stored"], "lost": totals["lost"],
                          "mislabelled": totals["mislabelled"], "left_live": live}))


if __name__ == "__main__":
    main()
