"""1,000 stand-in nodes watched at 60 s by one Celery worker (concurrency 1) and the real beat, on PostgreSQL and an
embedded Redis: is any look later than its interval + 10 %, and what does a look cost the dashboard (database
queries, CPU, the queue)? The nodes answer a recorded real watch report at once (bench/watch_scale_worker.py), so
the figures are the dashboard's own.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cudaweb_i30loop_bench python3 bench/watch_scale.py \\
        --nodes 1000 --interval 60 --minutes 10

`--ssh 16` instead watches 16 simulated hosts (tests/simcluster.py: network namespaces with Debian's sshd; needs
root; run it under `flock /tmp/cudaweb-heavy.lock`) over real SSH, each host's "agent" printing the recorded watch
report: the looks go through the kept sessions, and the credential's audit records count the connections made.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _database_exists(url):
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS %s" % name)  # a fresh one each time: nothing left from a run before
        conn.execute("CREATE DATABASE %s" % name)


def _cpu_s(pid):
    """CPU seconds of a process and its children (the prefork pool) so far."""
    import psutil

    process = psutil.Process(pid)
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _ssh_nodes(count, scratch):
    """`count` simulated hosts (tests/simcluster.py), each a node whose agent prints the recorded watch report and
    appends the moment of the look (keyed by the host's address) to the looks file."""
    import uuid

    from django.utils import timezone

    from cudaweb.nodes.models import HostKey, Node, SSHCredential
    from tests import simcluster
    from tests.health.standin import watch_report

    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(count, tag)
    report = scratch / "watch.json"
    report.write_text(json.dumps(watch_report()))
    agent = scratch / "agent"
    agent.write_text("#!/bin/sh\necho \"$(echo $SSH_CONNECTION | cut -d' ' -f3) $(date +%%s.%%N)\" >> %s\ncat %s\n" % (
        os.environ["WATCH_SCALE_LOOKS"], report))
    agent.chmod(0o755)
    credential = SSHCredential(name="watch-%s" % tag)
    credential.set_private_key(user_key.read_text())
    credential.save()
    nodes = []
    for host in hosts:
        node = Node.objects.create(name="watch-%s" % host["name"], address=host["address"], username="root",
                                   credential=credential, python_path=str(agent), labels=["bench"],
                                   status=Node.Status.READY)
        HostKey.objects.create(node=node, key_type=host["host_key"][0], key_base64=host["host_key"][1],
                               fingerprint_sha256="sim", accepted_at=timezone.now())
        nodes.append(node)
    return tag, nodes


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--ssh", type=int, default=0, help="watch this many simulated SSH hosts instead")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database (it is dropped and made again)")
    _database_exists(url)
    from cudaweb.embedded import free_port, start_redis

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-watch-scale-"))
    redis_port = free_port()
    redis = start_redis(redis_port, scratch)
    os.environ.update(REDIS_URL="redis://127.0.0.1:%d/0" % redis_port, DJANGO_SETTINGS_MODULE="cudaweb.settings",
                      WATCH_SCALE_LOOKS=str(scratch / "looks.txt"), WATCH_SCALE_STATS=str(scratch / "tasks.jsonl"),
                      CUDAWEB_WATCH_INTERVAL_S=str(args.interval))
    os.environ.setdefault("SECRET_KEY", "bench-only")
    if not os.environ.get("CUDAWEB_CREDENTIAL_KEY"):
        from cryptography.fernet import Fernet

        os.environ["CUDAWEB_CREDENTIAL_KEY"] = Fernet.generate_key().decode()
    import django

    django.setup()
    from datetime import timedelta

    import redis as redis_client
    from django.core.management import call_command
    from django.utils import timezone

    from cudaweb.health.models import HealthEvent, LoopPolicy, NodeLoop
    from cudaweb.nodes.models import Node

    call_command("migrate", verbosity=0)
    LoopPolicy.objects.create(label="bench", mode="act", ladder=[], interval_s=args.interval)
    tag = None
    if args.ssh:
        tag, nodes = _ssh_nodes(args.ssh, scratch)
        os.environ["WATCH_SCALE_SSH"] = "1"
    else:
        nodes = Node.objects.bulk_create([Node(name="watch-%04d" % i, transport=Node.Transport.LOCAL,
                                               address="127.0.0.1", labels=["bench"], status=Node.Status.READY)
                                          for i in range(args.nodes)])
    now = timezone.now()
    # a fleet watched for a while: its slots spread over one interval (not all due in the first second)
    NodeLoop.objects.bulk_create([NodeLoop(node=node, next_watch_at=now + timedelta(
        seconds=args.interval * i / args.nodes)) for i, node in enumerate(nodes)])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "bench.watch_scale_worker", "worker", "-l",
                               "WARNING", "--concurrency", "1", "-n", "watchscale@%h", "--without-gossip",
                               "--without-mingle"], cwd=REPO, env=env, start_new_session=True)
    beat = subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "beat", "-l", "WARNING",
                             "--schedule", str(scratch / "beat")], cwd=REPO, env=env, start_new_session=True)
    queue = redis_client.Redis(port=redis_port)
    depths = []
    started = time.time()
    cpu_before = (_cpu_s(worker.pid), _cpu_s(beat.pid))
    try:
        while time.time() - started < args.minutes * 60:
            depths.append(queue.llen("celery"))
            time.sleep(1)
        cpu_after = (_cpu_s(worker.pid), _cpu_s(beat.pid))
    finally:
        for process in (beat, worker):
            process.terminate()
        for process in (beat, worker):
            process.wait(timeout=60)
        redis.terminate()
        redis.wait()
        if tag:
            from tests import simcluster

            simcluster.down(tag)

    looks = defaultdict(list)
    for line in (scratch / "looks.txt").read_text().splitlines():
        name, moment = line.split()
        looks[name].append(float(moment))
    gaps = [b - a for times in looks.values() for a, b in zip(times, times[1:])]
    tasks = [json.loads(line) for line in (scratch / "tasks.jsonl").read_text().splitlines()]
    by_task = defaultdict(list)
    for task in tasks:
        by_task[task["task"]].append(task)
    total_looks = sum(len(times) for times in looks.values())
    seconds = args.minutes * 60
    print("watch_scale: %d nodes, interval %d s, %.1f min, one worker (concurrency 1), beat tick %s s" % (
        len(nodes), args.interval, args.minutes, os.environ.get("CUDAWEB_WATCH_TICK_S", "2")))
    print("looks: %d (%.1f/s; expected %.1f/s); nodes looked at: %d" % (
        total_looks, total_looks / seconds, len(nodes) / args.interval, len(looks)))
    print("gap between two looks of a node: median %.2f s, p99 %.2f s, max %.2f s; over interval + 10 %% (%.0f s): "
          "%d of %d" % (statistics.median(gaps), _pct(gaps, 0.99), max(gaps), args.interval * 1.1,
                        sum(1 for g in gaps if g > args.interval * 1.1), len(gaps)))
    for name, rows in sorted(by_task.items()):
        print("task %-12s n=%6d queries median %d max %d; CPU ms median %.2f p99 %.2f; wall ms median %.2f p99 "
              "%.2f" % (name, len(rows), statistics.median(r["queries"] for r in rows),
                        max(r["queries"] for r in rows), 1000 * statistics.median(r["cpu_s"] for r in rows),
                        1000 * _pct([r["cpu_s"] for r in rows], 0.99),
                        1000 * statistics.median(r["wall_s"] for r in rows),
                        1000 * _pct([r["wall_s"] for r in rows], 0.99)))
    worker_cpu, beat_cpu = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    print("CPU: worker %.1f s (%.1f %% of one core; %.2f ms a look), beat %.1f s" % (
        worker_cpu, 100 * worker_cpu / seconds, 1000 * worker_cpu / max(1, total_looks), beat_cpu))
    print("queue depth (sampled each second): median %d, max %d" % (statistics.median(depths), max(depths)))
    print("events kept: %d (open %d)" % (HealthEvent.objects.count(), HealthEvent.objects.filter(open=True).count()))
    if args.ssh:
        from cudaweb.accounts.models import AuditEvent

        print("SSH connections made (credential.used): %d for %d looks of %d hosts" % (
            AuditEvent.objects.filter(action="credential.used").count(), total_looks, len(nodes)))


if __name__ == "__main__":
    main()
