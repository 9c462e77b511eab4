#!/usr/bin/env python
"""Server time and query count of the fleet page, a node page, a comparison page and run pages, at 10 and 1,000
nodes.

Usage: .venv/bin/python bench/fleet_pages.py [--nodes 10 1000] [--runs-per-node 100] [--repeat 20]
Each fleet size gets its own PostgreSQL database (<BENCH_DB_PREFIX>_<N>, default cudaweb_bench_<N>, on
127.0.0.1:5432, or BENCH_PG_URL's server), seeded once with `seed_demo` and reused. The pages are read by a user
in the operator role (the bulk request needs it; a user in no role gets 403 everywhere). Pages are rendered
in-process by Django's test client (no network), so the time printed is the server's: URL resolution, queries, template rendering.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
PREFIX = os.environ.get("BENCH_DB_PREFIX", "cudaweb_bench")


def ensure_database(name, nodes, runs):
    url = "%s/%s" % (PG, name)
    env = dict(os.environ, DATABASE_URL=url)
    subprocess.run(["psql", "%s/postgres" % PG, "-qc", "CREATE DATABASE %s" % name], capture_output=True)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run(manage + ["migrate", "-v0"], env=env, check=True)
    count = subprocess.run(manage + ["shell", "-c", "from cudaweb.nodes.models import Node; print(Node.objects.count())"],
                           env=env, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    count = count[0] if count else ""
    if count != str(nodes):
        subprocess.run(["psql", url, "-qc", "TRUNCATE nodes_node, validation_validationrun, drift_peerband CASCADE"],
                       check=True, capture_output=True)
        started = time.monotonic()
        subprocess.run(manage + ["seed_demo", "--nodes", str(nodes), "--runs-per-node", str(runs)], env=env,
                       check=True)
        print("  seeded %d nodes x %d runs in %.0f s" % (nodes, runs, time.monotonic() - started), flush=True)
    # the planner's statistics and the visibility map, as autovacuum keeps them on a live database (a freshly seeded
    # one has no statistics, and PostgreSQL then scans 3 million check rows for 50 runs' findings; nor a visibility
    # map, and the overview's per-day counts then read the table instead of run_created_status_idx alone)
    subprocess.run(["psql", url, "-qc", "VACUUM ANALYZE"], check=True, capture_output=True)
    return url


def measure(url, repeat, live=False):
    """Run in a child process per database: Django is configured once per process."""
    code = r'''
import statistics, sys, time
import django
django.setup()
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from cudaweb.accounts.roles import role_set
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
repeat = int(sys.argv[1])
user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_staff": True})
role_set(user=user, role="operator")
client = Client()
client.force_login(user)
node = Node.objects.order_by("name")[Node.objects.count() // 2]
runs = list(ValidationRun.objects.filter(node=node).order_by("created").values_list("id", flat=True))
pages = [("fleet page", reverse("fleet:node_list")),
         ("fleet page, filtered (failing L1)", reverse("fleet:node_list") + "?failing_layer=L1"),
         ("node page", node.get_absolute_url()),
         ("compare page (first vs latest run)", reverse("runs:compare", args=[runs[0], runs[-1]])),
         ("run page (the node's latest run)", reverse("runs:run_detail", args=[runs[-1]]))]
failing = Node.objects.filter(status="failing").exclude(last_run=None).order_by("name").first()
if failing is not None:
    pages.append(("run page (a failing node's latest run)", reverse("runs:run_detail", args=[failing.last_run_id])))
live = sys.argv[2] == "live"
statuses = dict(Node.objects.values_list("id", "status"))  # put back at the end: the database is reused
if live:  # every node with a run in progress, as during a rack-wide validation
    idle = Node.objects.exclude(runs__status__in=ValidationRun.LIVE)
    ValidationRun.objects.bulk_create([ValidationRun(node=n, status="RUNNING", mode="standard") for n in idle])
    print("%d runs live" % ValidationRun.objects.filter(status__in=ValidationRun.LIVE).count())
for name, url in pages:
    started = time.perf_counter()
    client.get(url)  # warm-up (the first render of a process: template compilation, root-cause playbook cache)
    cold = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    print("%-40s %4d queries  median %6.1f ms  p90 %6.1f ms  first %6.1f ms  (%d bytes)" % (
        name, len(queries), statistics.median(times), sorted(times)[int(0.9 * len(times)) - 1], cold,
        len(response.content)))
if live:  # a bulk request for every node: first take the live runs away, so each node gets a new one
    ValidationRun.objects.filter(status__in=ValidationRun.LIVE).delete()
    for node in Node.objects.all():  # one label for the whole fleet: how a rack-wide request is made
        if "bench-all" not in node.labels:
            Node.objects.filter(id=node.id).update(labels=node.labels + ["bench-all"])
    Node.objects.update(status="ready")
    from cudaweb.nodes.models import HostKey
    from django.utils import timezone
    HostKey.objects.bulk_create([HostKey(node=n, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="b",
                                         accepted_at=timezone.now()) for n in Node.objects.filter(host_key=None)])
    bench_keys = HostKey.objects.filter(fingerprint_sha256="b")
    started = time.perf_counter()
    response = client.post(reverse("fleet:nodes_validate"), {"label": "bench-all", "mode": "quick"})
    elapsed = time.perf_counter() - started
    assert response.status_code == 302, response.status_code
    print("bulk request for every node (label): %.2f s, %d runs queued" % (
        elapsed, ValidationRun.objects.filter(status="PENDING").count()))
    ValidationRun.objects.filter(status__in=ValidationRun.LIVE).delete()
    bench_keys.delete()
    for status in set(statuses.values()):
        Node.objects.filter(id__in=[n for n, s in statuses.items() if s == status]).update(status=status)
'''
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_ALLOWED_HOSTS="testserver",
               PYTHONWARNINGS="ignore")
    subprocess.run([sys.executable, "-c", code, str(repeat), "live" if live else "idle"], env=env, check=True,
                   cwd=ROOT)


def main():
    if "REDIS_URL" not in os.environ:  # the bulk request queues real tasks: into a Redis of our own
        sys.path.insert(0, str(ROOT))
        from cudaweb.embedded import free_port, start_redis

        import atexit
        import tempfile

        port = free_port()
        redis = start_redis(port, tempfile.mkdtemp(prefix="cudaweb-bench-redis-"))
        atexit.register(lambda: (redis.terminate(), redis.wait()))
        os.environ["REDIS_URL"] = "redis://127.0.0.1:%d/0" % port
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--runs-per-node", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--live", action="store_true", help="with a run in progress on every node, and time a "
                        "bulk request for every node (needs a Redis: REDIS_URL, default the embedded one started "
                        "here)")
    args = parser.parse_args()
    for nodes in args.nodes:
        print("== %d nodes x %d runs (PostgreSQL)" % (nodes, args.runs_per_node), flush=True)
        url = ensure_database("%s_%d" % (PREFIX, nodes), nodes, args.runs_per_node)
        measure(url, args.repeat, live=args.live)


if __name__ == "__main__":
    main()
