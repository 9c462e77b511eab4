"""64 simulated hosts validated at once (tests/simcluster.py, needs root): the dashboard's own cost per node.

Each host's "agent" sleeps AGENT_S seconds, then prints a real H200 report (a fake at the process level), so what
the run takes beyond AGENT_S is the dashboard's: queue, SSH connect and host key check, agent upload, parsing,
storing the report and its checks, drift and peers. For each worker concurrency it prints the wall time for all
hosts, the overhead per run (finished - started - AGENT_S: median and worst) and the rows written per run
(PostgreSQL's own counters).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cudaweb_bench python3 bench/scale_sim.py --hosts 64 --concurrency 4 8 16 32
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
REPORT = REPO / "tests" / "fixtures" / "real" / "h200-gpus2-standard.json"
AGENT_S = 1.0


def rows_written(connection):
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables")
        return cursor.fetchone()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 8, 16, 32])
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database")
    from cudaweb.embedded import free_port, start_redis

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-scale-"))
    redis_port = free_port()
    redis = start_redis(redis_port, scratch)
    os.environ.update(REDIS_URL="redis://127.0.0.1:%d/0" % redis_port, DJANGO_SETTINGS_MODULE="cudaweb.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    if not os.environ.get("CUDAWEB_CREDENTIAL_KEY"):
        from cryptography.fernet import Fernet

        os.environ["CUDAWEB_CREDENTIAL_KEY"] = Fernet.generate_key().decode()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from cudaweb.nodes.models import HostKey, Node, SSHCredential
    from cudaweb.validation.models import ValidationRun
    from cudaweb.validation.services import run_request
    from tests import simcluster

    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(args.hosts, tag)
    agent = scratch / "agent"
    agent.write_text("#!/bin/sh\nsleep %s\ncat %s\n" % (AGENT_S, REPORT))
    agent.chmod(0o755)
    Node.objects.filter(name__startswith="scale-").delete()
    credential = SSHCredential(name="scale-%s" % tag)
    credential.set_private_key(user_key.read_text())
    credential.save()
    nodes = []
    for host in hosts:
        node = Node.objects.create(name="scale-%s" % host["name"], address=host["address"], username="root",
                                   credential=credential, python_path=str(agent), status=Node.Status.READY)
        HostKey.objects.create(node=node, key_type=host["host_key"][0], key_base64=host["host_key"][1],
                               fingerprint_sha256="sim", accepted_at=timezone.now())
        nodes.append(node)
    try:
        for concurrency in args.concurrency:
            worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING",
                                       "--concurrency", str(concurrency), "-n", "scale%d@%%h" % concurrency,
                                       "--without-gossip", "--without-mingle"], cwd=REPO, env=dict(os.environ),
                                      start_new_session=True)
            time.sleep(3)
            before = rows_written(connection)
            started = time.monotonic()
            runs = [run_request(node=node, mode="standard") for node in nodes]
            while ValidationRun.objects.filter(id__in=[r.id for r in runs], status__in=ValidationRun.LIVE).exists():
                time.sleep(0.1)
            wall = time.monotonic() - started
            time.sleep(1)  # the statistics collector lags a little
            runs = list(ValidationRun.objects.filter(id__in=[r.id for r in runs]))
            overhead = [(r.finished - r.started).total_seconds() - AGENT_S for r in runs]
            states = {s: sum(1 for r in runs if r.status == s) for s in {r.status for r in runs}}
            print("concurrency %2d: %d hosts in %.1f s; overhead per run median %.2f s, worst %.2f s; rows written "
                  "per run %.0f; %s" % (concurrency, len(runs), wall, statistics.median(overhead), max(overhead),
                                        (rows_written(connection) - before) / len(runs), states), flush=True)
            worker.terminate()
            worker.wait(timeout=60)
    finally:
        simcluster.down(tag)
        redis.terminate()
        redis.wait()


if __name__ == "__main__":
    main()
