"""Kubernetes cordon + taint on quarantine, undone on acceptance, as JSON patches to the API server's REST API.

No Kubernetes API server can run here (Debian 12 ships kubectl only; k3s, kind and envtest's binaries are
downloads outside the package registries, kind needs Docker), so the server is a local HTTPS server with its own CA
that applies RFC 6902 patches to a Node document as the API server does, and checks the exact requests."""

import copy

import pytest
from django.test import TestCase

from cudaweb.fleet.services import acceptance_decide
from cudaweb.hooks import kubernetes
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from tests.drift.helpers import real_report, scaled, stored_run
from tests.hooks.servers import FakeKubernetesNodes

pytestmark = pytest.mark.django_db
TOKEN = "test-service-account-token"
NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "h200-node-7", "resourceVersion": "41", "labels": {"kubernetes.io/hostname": "h200-node-7"},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": "10.244.7.0/24",
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}


@pytest.fixture
def api(tmp_path, settings, eager_celery):
    server = FakeKubernetesNodes(tmp_path, TOKEN, {"h200-node-7": copy.deepcopy(NODE)})
    settings.CUDAWEB_K8S_API, settings.CUDAWEB_K8S_TOKEN = server.url, TOKEN
    settings.CUDAWEB_K8S_CA_FILE = str(server.ca_file)
    settings.CUDAWEB_HOOK_BACKOFF_S = 0.01
    settings.CUDAWEB_K8S_NODE_HEALTH = False  # the cordon's requests alone (test_kubernetes_health.py: the rest)
    yield server
    server.close()


@pytest.fixture
def gpu_node():
    return Node.objects.create(name="gpu-0007", kubernetes_name="h200-node-7", transport=Node.Transport.LOCAL)


def decide(node, run, decision, user):
    with TestCase.captureOnCommitCallbacks(execute=True):
        acceptance_decide(node=node, run=run, decision=decision, user=user)


def test_quarantine_cordons_and_taints_and_acceptance_undoes_it(api, gpu_node, admin_user):
    decide(gpu_node, stored_run(gpu_node, scaled(real_report(), statuses={"driver.gpu_health": "fail"})),
           "quarantined", admin_user)
    get, patch = api.requests
    assert get == {"method": "GET", "path": "/api/v1/nodes/h200-node-7"}
    assert patch["method"] == "PATCH" and patch["content_type"] == "application/json-patch+json"
    reason = HookDelivery.objects.get(kind="k8s_cordon").payload["reason"]
    assert reason.startswith("L1 driver.gpu_health: ")
    assert patch["json"] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "add", "path": "/spec/taints", "value": [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            {"key": "cudaweb.io/quarantined", "value": "true", "effect": "NoSchedule"}]},
        {"op": "add", "path": "/metadata/annotations", "value": {
            "node.alpha.kubernetes.io/ttl": "0", "cudaweb.io/cordoned": "true",
            "cudaweb.io/quarantine-reason": reason}},
    ]
    assert api.nodes["h200-node-7"]["spec"]["unschedulable"] is True

    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    assert api.requests[3]["json"] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "add", "path": "/spec/unschedulable", "value": False},
        {"op": "add", "path": "/spec/taints", "value": [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {"op": "remove", "path": "/metadata/annotations/cudaweb.io~1cordoned"},
        {"op": "remove", "path": "/metadata/annotations/cudaweb.io~1quarantine-reason"},
    ]
    restored = api.nodes["h200-node-7"]
    assert restored["spec"] == dict(NODE["spec"], unschedulable=False)
    assert restored["metadata"]["annotations"] == NODE["metadata"]["annotations"]
    assert list(HookDelivery.objects.values_list("status", flat=True)) == ["delivered", "delivered"]


def test_a_node_cordoned_before_stays_cordoned_after_acceptance(api, gpu_node, admin_user):
    api.nodes["h200-node-7"]["spec"]["unschedulable"] = True  # an admin's cordon, before cudaweb's
    decide(gpu_node, stored_run(gpu_node, real_report()), "quarantined", admin_user)
    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    node = api.nodes["h200-node-7"]
    assert node["spec"]["unschedulable"] is True and node["spec"]["taints"] == NODE["spec"]["taints"]


def test_a_node_changed_between_read_and_write_is_read_again(api, gpu_node, admin_user):
    original = api.nodes

    class ChangedOnce(dict):
        reads = 0

        def __getitem__(self, key):
            node = dict.__getitem__(self, key)
            ChangedOnce.reads += 1
            if ChangedOnce.reads == 2:  # right after our first GET, someone else writes the node
                node["metadata"]["resourceVersion"] = "99"
            return node

    api.nodes = ChangedOnce(original)
    decide(gpu_node, stored_run(gpu_node, real_report()), "quarantined", admin_user)
    methods = [r["method"] for r in api.requests]
    assert methods == ["GET", "PATCH", "GET", "PATCH"]  # 422 on the stale test, then read again and patched
    delivery = HookDelivery.objects.get()
    assert delivery.status == "delivered" and delivery.attempts == 2


def test_an_untrusted_certificate_is_not_tried_again(api, gpu_node, admin_user, settings):
    settings.CUDAWEB_K8S_CA_FILE = ""  # the system's CAs: our test CA is not among them
    decide(gpu_node, stored_run(gpu_node, real_report()), "quarantined", admin_user)
    delivery = HookDelivery.objects.get()
    assert delivery.status == "failed" and delivery.attempts == 1 and "not trusted" in delivery.last_error
    assert api.requests == []


def test_a_wrong_token_is_a_permanent_failure(api, gpu_node, admin_user, settings):
    settings.CUDAWEB_K8S_TOKEN = "wrong"
    decide(gpu_node, stored_run(gpu_node, real_report()), "quarantined", admin_user)
    delivery = HookDelivery.objects.get()
    assert delivery.status == "failed" and "401" in delivery.last_error


def test_nothing_of_ours_means_nothing_to_undo():
    assert kubernetes.uncordon_patch(NODE) is None


def test_the_quarantine_reason_annotation_is_one_clean_line(api, gpu_node, admin_user):
    from tests.hooks.test_outbound import HOSTILE, assert_clean

    report = scaled(real_report(), statuses={"driver.gpu_health": "fail"})
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health")["summary"] = HOSTILE
    decide(gpu_node, stored_run(gpu_node, report), "quarantined", admin_user)
    reason = api.nodes["h200-node-7"]["metadata"]["annotations"]["cudaweb.io/quarantine-reason"]
    assert reason.startswith("L1 driver.gpu_health: GPU 1 fell off the bus *gpu-a05* is ready")
    assert_clean(reason)
