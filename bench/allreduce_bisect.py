#!/usr/bin/env python
"""The allreduce plan on the simulated cluster: N hosts in network namespaces (tests/simcluster.py, root), one
host's link slowed (tc tbf) or dropping packets (iptables statistic); prints N, the fault, the rounds, the time and
whom the bisection named.

Usage (root): .venv/bin/python bench/allreduce_bisect.py [--nodes 8 16] [--faults slowed dropping]
It uses its own PostgreSQL database (cudaweb_bench_allreduce on 127.0.0.1:5432, or BENCH_PG_URL's server) and runs
the plan in-process (the service a worker calls), each host running the real agent over SSH.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
sys.path.insert(0, str(ROOT))


def setup():
    url = "%s/cudaweb_bench_allreduce" % PG
    subprocess.run(["psql", "%s/postgres" % PG, "-qc", "CREATE DATABASE cudaweb_bench_allreduce"], capture_output=True)
    os.environ.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="tests.settings")
    os.environ.setdefault("CUDAWEB_PAIR_TIMEOUT_S", "60")  # 16 agents starting at once on a small host take a while
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def one(count, fault, workdir):
    from django.utils import timezone

    from cudaweb.network import collective
    from cudaweb.network.models import NetworkTest
    from cudaweb.nodes.models import HostKey, Node, SSHCredential
    from tests import simcluster
    from tests.agent.harness import FAKE_BIN, Scenario

    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(count, tag)
    try:
        credential = SSHCredential(name="bench-%s" % tag)
        credential.set_private_key(user_key.read_text())
        credential.save()
        nodes = []
        for host in hosts:
            scenario = Scenario(Path(workdir) / tag / host["name"])
            python = Path(workdir) / tag / ("python-%s" % host["name"])
            python.write_text("#!/bin/sh\nexport PATH=%s:$PATH FAKE_NVSMI_DIR=%s\nexec %s \"$@\"\n" % (
                FAKE_BIN, scenario.root, sys.executable))
            python.chmod(0o755)
            node = Node.objects.create(name="%s-%s" % (tag, host["name"]), address=host["address"], username="root",
                                       credential=credential, python_path=str(python), status=Node.Status.READY,
                                       network_interface="eth0")
            HostKey.objects.create(node=node, key_type=host["host_key"][0], key_base64=host["host_key"][1],
                                   fingerprint_sha256="sim", accepted_at=timezone.now())
            nodes.append(node)
        victim = count - 3
        if fault == "slowed":
            simcluster.slow_link(hosts[victim], "100mbit")
        elif fault == "dropping":
            simcluster.lossy_link(hosts[victim], 0.2)
        test = NetworkTest.objects.create(plan=NetworkTest.Plan.ALLREDUCE, status=NetworkTest.Status.RUNNING)
        test.nodes.set(nodes)
        started = time.monotonic()
        collective.network_test_allreduce(test=test)
        seconds = time.monotonic() - started
        test.refresh_from_db()
        rounds = max(c.round for c in test.collectives.all()) + 1
        full = test.collectives.get(round=0)
        named = ",".join(s.replace("%s-" % tag, "") for s in test.suspects) or "-"
        expected = "sim%d" % victim if fault != "none" else "-"
        print("N=%-3d fault=%-9s rounds=%d time=%4.0f s  round 0: %s busbw %s GB/s of %s, 4 KiB %s us  named=%s%s"
              % (count, fault, rounds, seconds, full.status, full.busbw_gbs, full.expected_gbs,
                 round(full.latency_us) if full.latency_us else "-", named,
                 "" if named == expected else "  (expected %s)" % expected), flush=True)
    finally:
        simcluster.down(tag)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[8])
    parser.add_argument("--faults", nargs="+", default=["slowed", "dropping"],
                        choices=("slowed", "dropping", "none"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("network namespaces need root")
    setup()
    with tempfile.TemporaryDirectory(prefix="cudaweb-bench-allreduce-") as workdir:
        for count in args.nodes:
            for fault in args.faults:
                one(count, fault, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
