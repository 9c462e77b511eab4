"""A finished run tells Kubernetes the node's GPU health: the node condition GPUHealthy (strategic merge patch on
the Node's status subresource, merged by type so the kubelet's conditions stay) and one core/v1 Event per GPU.

No Kubernetes API server can be had here (see tests/hooks/test_kubernetes.py): the stand-in is the same local HTTPS
server with its own CA and token (tests/hooks/servers.py FakeKubernetesCluster), which applies the status patch as
the API server merges NodeStatus.conditions (patchMergeKey "type") and answers 409 for an event name that exists."""

import copy
import re

import pytest
from django.test import TestCase

from cudaweb.hooks import kubernetes
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.drift.helpers import real_report, scaled, stored_run
from tests.hooks.servers import FakeKubernetesCluster

pytestmark = pytest.mark.django_db
TOKEN = "test-service-account-token"
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": "2026-12-01T08:00:00Z", "lastTransitionTime": "2026-11-20T08:00:00Z"}
NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "h200-node-7", "uid": "5f0c6a1e-8d51-4c2e-9b1e-3f2d7c1a0b9e", "resourceVersion": "41"},
        "spec": {}, "status": {"conditions": [READY]}}
GPU_LINE = re.compile(r"^GPU (\d+): .+? \(UUID: (\S+)\)", re.M)


@pytest.fixture
def api(tmp_path, settings, eager_celery):
    server = FakeKubernetesCluster(tmp_path, TOKEN, {"h200-node-7": copy.deepcopy(NODE)})
    settings.CUDAWEB_K8S_API, settings.CUDAWEB_K8S_TOKEN = server.url, TOKEN
    settings.CUDAWEB_K8S_CA_FILE = str(server.ca_file)
    settings.CUDAWEB_HOOK_BACKOFF_S = 0.01
    yield server
    server.close()


@pytest.fixture
def gpu_node():
    return Node.objects.create(name="gpu-0007", kubernetes_name="h200-node-7", transport=Node.Transport.LOCAL)


def _gpu1_off_the_bus():
    report = scaled(real_report("h200-gpus2-full.json"), statuses={"driver.gpu_health": "fail"})
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health").update(
        summary="GPU 1 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"])
    return report


def _condition(api):
    conditions = api.nodes["h200-node-7"]["status"]["conditions"]
    return next(c for c in conditions if c["type"] == "GPUHealthy"), conditions


def test_a_failed_run_sets_gpuhealthy_false_and_one_event_per_gpu(api, gpu_node):
    report = _gpu1_off_the_bus()
    run = stored_run(gpu_node, report)
    assert HookDelivery.objects.get(kind="k8s_health", run=run).status == "delivered"
    patch = next(r for r in api.requests if r["method"] == "PATCH")
    assert patch["path"] == "/api/v1/nodes/h200-node-7/status"
    assert patch["content_type"] == "application/strategic-merge-patch+json"
    condition, conditions = _condition(api)
    assert conditions[0] == READY  # the kubelet's condition, untouched
    assert (condition["status"], condition["reason"]) == ("False", "gpu_fallen_off_bus")
    assert condition["message"].startswith("L1 driver.gpu_health") and "GPU 1 fell off the bus" in condition["message"]
    assert condition["lastTransitionTime"] == condition["lastHeartbeatTime"]
    uuids = dict(GPU_LINE.findall(next(c for c in report["checks"] if c["id"] == "driver.nvidia_smi")["evidence"]))
    events = {event["message"].split(":")[0]: event for event in api.events.values()}
    assert set(events) == {"GPU %s (%s)" % (index, uuid) for index, uuid in uuids.items()}
    bad, good = events["GPU 1 (%s)" % uuids["1"]], events["GPU 0 (%s)" % uuids["0"]]
    assert (bad["type"], bad["reason"]) == ("Warning", "gpu_fallen_off_bus")
    assert (good["type"], good["reason"]) == ("Normal", "GPUValidated")
    assert bad["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "h200-node-7",
                                     "uid": NODE["metadata"]["uid"]}
    assert {key[0] for key in api.events} == {"default"}


def test_last_transition_time_moves_only_when_the_status_does(api, gpu_node):
    api.nodes["h200-node-7"]["status"]["conditions"].append(
        {"type": "GPUHealthy", "status": "False", "reason": "gpu_fallen_off_bus", "message": "earlier",
         "lastHeartbeatTime": "2026-11-01T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"})
    stored_run(gpu_node, real_report("h200-gpus2-full.json"))
    passed, _ = _condition(api)
    assert (passed["status"], passed["reason"]) == ("True", "ValidationPassed")
    assert passed["lastTransitionTime"] != "2026-11-01T00:00:00Z"
    api.nodes["h200-node-7"]["status"]["conditions"][-1]["lastTransitionTime"] = "2026-11-30T00:00:00Z"
    stored_run(gpu_node, real_report("h200-gpus2-full.json"))
    again, conditions = _condition(api)
    assert again["status"] == "True" and again["lastTransitionTime"] == "2026-11-30T00:00:00Z"
    assert [c["type"] for c in conditions] == ["Ready", "GPUHealthy"]  # one GPUHealthy, merged by type


def test_a_delivery_tried_again_adds_no_second_event(api, gpu_node):
    run = stored_run(gpu_node, _gpu1_off_the_bus())
    delivery = HookDelivery.objects.get(kind="k8s_health", run=run)
    before = dict(api.events)
    payload = delivery.payload
    kubernetes.report_health(kubernetes.Client(api.url, token=TOKEN, ca_file=str(api.ca_file)), "h200-node-7",
                             status=payload["status"], reason=payload["reason"], message=payload["message"],
                             gpus=payload["gpus"], key=payload["key"])
    assert api.events == before and len(before) == 2
    assert [r["method"] for r in api.requests].count("POST") == 4  # both tries posted; the second got 409s


def test_a_run_that_never_reached_the_node_is_unknown(api, gpu_node):
    run = ValidationRun.objects.create(node=gpu_node, status=ValidationRun.Status.RUNNING)
    with TestCase.captureOnCommitCallbacks(execute=True):
        run_finish(run=run, status=ValidationRun.Status.UNREACHABLE, reason="ssh: connection refused")
    condition, _ = _condition(api)
    assert (condition["status"], condition["reason"]) == ("Unknown", "UNREACHABLE")
    assert "connection refused" in condition["message"] and not api.events


def test_a_node_without_a_kubernetes_name_is_not_reported(api):
    stored_run(Node.objects.create(name="not-in-k8s", transport=Node.Transport.LOCAL), real_report())
    assert not HookDelivery.objects.filter(kind="k8s_health").exists() and api.requests == []


def test_reasons_are_single_words():
    assert kubernetes.condition_reason("made up\nby a host: {x}") == "made_up_by_a_host___x"
    assert kubernetes.condition_reason("") == "Unknown"


def test_the_setting_turns_it_off(api, gpu_node, settings):
    settings.CUDAWEB_K8S_NODE_HEALTH = False
    stored_run(gpu_node, real_report())
    assert not HookDelivery.objects.filter(kind="k8s_health").exists() and api.requests == []


def test_a_summary_with_controls_reaches_the_condition_and_the_events_as_one_clean_line(api, gpu_node):
    from tests.hooks.test_outbound import HOSTILE, assert_clean

    report = _gpu1_off_the_bus()
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health")["summary"] = HOSTILE
    stored_run(gpu_node, report)
    condition, _ = _condition(api)
    messages = [condition["message"]] + [event["message"] for event in api.events.values()]
    assert len(messages) == 3 and "GPU 1 fell off the bus *gpu-a05* is ready" in condition["message"]
    for message in messages:
        assert_clean(message)
