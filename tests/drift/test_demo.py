"""The demo fleet (cudaweb/drift/demo.py, seed_demo): each node is a host of its own, with its hostname and GPUs
whose UUIDs no other node lists, so /metrics has every node's GPUs and the README's joins on UUID are one-to-one."""

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cudaweb.drift.demo import seed
from cudaweb.nodes.models import Node
from cudaweb.validation.gpus import NVIDIA_UUID
from cudaweb.validation.models import CheckResult
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db
GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)", re.M)


def test_the_seed_demo_fleet_has_no_gpu_uuid_under_two_nodes(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # the queue depth is not what this is about
    settings.CUDAWEB_METRICS_TOKEN = "m" * 40
    nodes = seed(nodes=50, runs_per_node=1)  # the README's seed_demo --nodes 50, one run each
    response = client.get("/metrics", **bearer("m" * 40))
    assert response.status_code == 200
    samples = [s for family in text_string_to_metric_families(response.content.decode()) for s in family.samples]
    assert [s.value for s in samples if s.name == "cudaweb_gpu_uuid_conflicts"] == [0]
    owners = {}
    for sample in samples:
        if sample.name == "cudaweb_gpu_health":
            owners.setdefault(sample.labels["UUID"].lower(), set()).add(sample.labels["node"])
    assert all(len(names) == 1 for names in owners.values())
    assert {name for names in owners.values() for name in names} == {node.name for node in nodes}  # all GPUs kept
    listings = CheckResult.objects.filter(check_id="driver.nvidia_smi").values_list("evidence", flat=True)
    uuids = [m.group(3) for evidence in listings for m in GPU_LINE.finditer(evidence)]
    assert len(uuids) == len(owners) and all(NVIDIA_UUID.fullmatch(uuid) for uuid in uuids)


def test_each_demo_node_reports_its_own_hostname():
    nodes = seed(nodes=4, runs_per_node=2, prefix="lab")
    for node in nodes:
        node.refresh_from_db()
        assert node.last_run.report["host"]["hostname"] == node.name
        nccl = node.last_run.checks.get(check_id="comm.nccl").evidence
        if "NCCL INFO" in nccl:  # the one-GPU template has no NCCL log lines
            assert re.findall(r"^([\w-]+):\d+:\d+ \[\d+\] NCCL INFO", nccl, re.M)[:1] == [node.name]


def test_the_same_seed_gives_the_same_uuids_and_two_prefixes_different_ones():
    def uuids(prefix):
        listings = CheckResult.objects.filter(check_id="driver.nvidia_smi", run__node__name__startswith=prefix)
        return sorted(m.group(3) for check in listings for m in GPU_LINE.finditer(check.evidence))
    seed(nodes=3, runs_per_node=1, prefix="a")
    seed(nodes=3, runs_per_node=1, prefix="b")
    first = uuids("a-")
    assert first and not set(first) & set(uuids("b-"))
    Node.objects.filter(name__startswith="a-").delete()
    seed(nodes=3, runs_per_node=1, prefix="a")
    assert uuids("a-") == first
