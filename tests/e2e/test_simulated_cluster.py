"""The dashboard against a simulated cluster (tests/simcluster.py): hosts in network namespaces reached over SSH,
some replaying recorded GPU faults, and link faults made for real between them and found by the pair test."""

import os
import shutil
import sys
import uuid

import pytest
from django.utils import timezone

from cudaweb.network.collective import GLOO_LINE_SHARE
from cudaweb.network.models import NetworkTest, PairResult
from cudaweb.network.services import network_test_request
from cudaweb.nodes.models import HostKey, Node, SSHCredential
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request
from tests import simcluster
from tests.agent.harness import FAKE_BIN, Scenario
from tests.conftest import wait_for_terminal
from tests.e2e.test_network import wait_done

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("iptables"),
                                 reason="network namespaces and iptables need root (make test installs iptables)")]


def _cluster(tmp_path, count):
    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(count, tag)
    credential = SSHCredential(name="sim-%s" % tag)
    credential.set_private_key(user_key.read_text())
    credential.save()
    nodes = []
    for host in hosts:
        scenario = Scenario(tmp_path / host["name"])  # each host replays the recorded H200 outputs
        python = tmp_path / ("python-%s" % host["name"])
        python.write_text("#!/bin/sh\nexport PATH=%s:$PATH FAKE_NVSMI_DIR=%s\nexec %s \"$@\"\n" % (
            FAKE_BIN, scenario.root, sys.executable))
        python.chmod(0o755)
        node = Node.objects.create(name=host["name"], address=host["address"], port=22, username="root",
                                   credential=credential, python_path=str(python), status=Node.Status.READY,
                                   pair_port_min=29600, pair_port_max=29699, network_interface="eth0")
        HostKey.objects.create(node=node, key_type=host["host_key"][0], key_base64=host["host_key"][1],
                               fingerprint_sha256="sim", accepted_at=timezone.now())
        nodes.append((node, host, scenario))
    return tag, nodes


@pytest.fixture
def cluster(tmp_path):
    tag, nodes = _cluster(tmp_path, 5)
    yield nodes
    simcluster.down(tag)


@pytest.fixture
def cluster8(tmp_path):
    tag, nodes = _cluster(tmp_path, 8)
    yield nodes
    simcluster.down(tag)


def test_a_rack_validated_at_once_over_ssh_with_a_replayed_gpu_fault(celery_worker, cluster):
    (faulty, _, scenario) = cluster[2]
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write("[ 4711.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n")
    runs = [run_request(node=node, mode="quick") for node, _, _ in cluster]
    runs = [wait_for_terminal(run, timeout=240) for run in runs]
    # no GPU here: every verdict is fail
    assert {run.status for run in runs} == {ValidationRun.Status.FAILED}, [(r.status, r.reason[:400]) for r in runs]
    assert all(run.report for run in runs)
    xid = {run.node.name: next(c for c in run.report["checks"] if c["id"] == "driver.xid") for run in runs}
    assert xid[faulty.name]["signatures"] == ["xid_critical", "gpu_fallen_off_bus"]
    assert all(x["status"] == "pass" for name, x in xid.items() if name != faulty.name)


def test_link_faults_between_hosts_are_found_and_named(celery_worker, cluster):
    (n0, _, _), (n1, h1, _), (n2, _, _), (n3, _, _), (n4, h4, _) = cluster
    simcluster.block_ports(h1, 29600, 29699)  # a firewall on sim1's pair ports: pairs where it listens fail
    Node.objects.filter(id=n3.id).update(network_interface="eth9")  # a wrong interface on sim3
    simcluster.link_down(h4)  # sim4 is cut off
    test = wait_done(network_test_request(nodes=[n0, n1, n2, n3, n4]), timeout=600)
    assert test.status == NetworkTest.Status.DONE
    pairs = {(p.node_a.name, p.node_b.name): p for p in test.pairs.select_related("node_a", "node_b")}
    assert len(pairs) == 10
    assert pairs[("sim0", "sim1")].status == PairResult.Status.PASS  # sim0 listens, sim1 connects: fine
    assert pairs[("sim0", "sim2")].status == PairResult.Status.PASS
    assert pairs[("sim1", "sim2")].failure.startswith("peer never answered"), pairs[("sim1", "sim2")].reason
    for other in ("sim0", "sim2"):
        assert pairs[(other, "sim3")].failure == "wrong interface", pairs[(other, "sim3")].reason
    # sim1 listens behind its firewall: sim3 meets that before its own interface is tried
    assert pairs[("sim1", "sim3")].failure.startswith("peer never answered")
    for other in ("sim0", "sim1", "sim2", "sim3"):
        assert pairs[(other, "sim4")].failure == "peer never came", pairs[(other, "sim4")].reason
    assert test.suspects == ["sim3", "sim4"]


def test_without_an_interface_gloo_picks_loopback_and_that_is_named(celery_worker, cluster):
    (n0, _, _), (n1, _, _) = cluster[:2]
    Node.objects.filter(id__in=[n0.id, n1.id]).update(network_interface="")
    test = wait_done(network_test_request(nodes=[n0, n1]))
    (pair,) = test.pairs.all()
    assert pair.failure == "wrong interface (loopback chosen)", pair.reason


@pytest.mark.parametrize("fault", ["slowed", "dropping"])
def test_the_allreduce_plan_names_the_one_slow_host_of_eight(celery_worker, cluster8, fault):
    """One all-reduce over 8 hosts, one host's link slowed to 100 Mbit/s (tc tbf) or dropping 20 % of what it sends
    and receives (iptables): the bisection names that host, in log2(8) + 1 rounds (+ 1 when a lossy round looked
    alike and ran again)."""
    slow_node, slow_host, _ = cluster8[5]
    if fault == "slowed":
        simcluster.slow_link(slow_host, "100mbit")
    else:
        simcluster.lossy_link(slow_host, 0.2)
    test = wait_done(network_test_request(nodes=[node for node, _, _ in cluster8], plan=NetworkTest.Plan.ALLREDUCE),
                     timeout=900)
    units = list(test.collectives.order_by("round", "id"))
    # the all-reduce over every host failed (a lossy link may drop a whole round): the test failed, whoever it names
    failed = units and units[0].status == "fail"
    assert test.status == (NetworkTest.Status.FAILED if failed else NetworkTest.Status.DONE), test.summary
    print("\n%s: %s" % (fault, test.summary))
    for unit in units:
        print("  round %d %-18s %-40s %-4s busbw %s GB/s (expected %s), 4 KiB %s us, %.1f s %s" % (
            unit.round, unit.role, ",".join(unit.members), unit.status, unit.busbw_gbs, unit.expected_gbs,
            unit.latency_us, unit.duration_s or 0, unit.failure))
    assert test.suspects == [slow_node.name], test.summary
    assert units[0].members == ["sim%d" % i for i in range(8)] and units[0].status in ("slow", "fail")
    # the veths say 10000 Mb/s: gloo should reach GLOO_LINE_SHARE of it (a unit that failed has no figures)
    assert {round(u.expected_gbs, 6) for u in units if u.status != "fail"} == {round(1.25 * GLOO_LINE_SHARE, 6)}
    assert max(u.round for u in units) + 1 <= 5
