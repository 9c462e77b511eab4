"""Cordon + taint a node through the Kubernetes API server's REST API (plain HTTPS, standard library), and undo it;
and report the node's GPU health there: the node condition GPUHealthy and one core/v1 Event per GPU.

Each cordon change is one JSON patch (RFC 6902) that first tests the node's resourceVersion, so a node changed
between our read and our write is not overwritten (the API server answers 409 or 422; the delivery tries again).
Only what cudaweb did is undone: the annotation `cudaweb.io/cordoned` says whether the cordon was ours.

The condition is a strategic merge patch on the node's status subresource: conditions merge by their `type`, so the
kubelet's own (Ready, MemoryPressure...) are left as they are; lastTransitionTime moves only when the status does.
Events are created under a name made from the run and the GPU, so a delivery tried again finds its event there (409)
instead of adding a second one."""

import json
import re
from datetime import datetime, timezone
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from cudaweb.hooks import outbound
from cudaweb.hooks.errors import Permanent, Transient

CONDITION = "GPUHealthy"
EVENT_NAMESPACE = "default"  # where the kubelet puts a Node's events, and so where `kubectl describe node` looks
EVENT_SOURCE = "cudaweb"
MESSAGE_CAP = 1024
ANNOTATION_CAP = 1000
REASON_CAP = 128
NOT_IN_REASON = re.compile(r"[^A-Za-z0-9_]")  # a condition's reason is a CamelCase-like word (no spaces)
TAINT_KEY = "cudaweb.io/quarantined"
CORDONED = "cudaweb.io/cordoned"  # "true" when the cordon was cudaweb's, so acceptance uncordons only then
REASON = "cudaweb.io/quarantine-reason"


def _pointer(key):
    return key.replace("~", "~0").replace("/", "~1")


class Client:
    def __init__(self, api_url, token="", ca_file=None, timeout_s=10):
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if api_url.startswith("https") else None
        self.timeout_s = timeout_s

    def _request(self, method, path, body=None, content_type="application/json", exists_ok=False):
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer %s" % self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.api_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            if exc.code == 409 and exists_ok:
                return {}  # created by an earlier try of this delivery
            text = exc.read(500).decode("utf-8", "replace")
            # 409/422: the node changed under us (the patch's test failed); 429/5xx: the API server is busy.
            error = Transient if exc.code in (409, 422, 429) or exc.code >= 500 else Permanent
            raise error("%s %s answered %s: %s" % (method, path, exc.code, text))
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                raise Permanent("the API server's certificate is not trusted: %s" % exc.reason)
            raise Transient("%s: %s" % (self.api_url, exc.reason))
        except (socket.timeout, ConnectionError) as exc:
            raise Transient("%s: %s" % (self.api_url, exc))

    def node(self, name):
        return self._request("GET", "/api/v1/nodes/%s" % urllib.parse.quote(name, safe=""))

    def patch_node(self, name, operations):
        return self._request("PATCH", "/api/v1/nodes/%s" % urllib.parse.quote(name, safe=""), operations,
                             "application/json-patch+json")


    def patch_node_status(self, name, patch):
        return self._request("PATCH", "/api/v1/nodes/%s/status" % urllib.parse.quote(name, safe=""), patch,
                             "application/strategic-merge-patch+json")

    def create_event(self, event):
        return self._request("POST", "/api/v1/namespaces/%s/events" % EVENT_NAMESPACE, event, exists_ok=True)


def rfc3339(moment):
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition_reason(text):
    """A condition or event reason from a signature or a state: "gpu_fallen_off_bus", "UNREACHABLE"."""
    return NOT_IN_REASON.sub("_", str(text or ""))[:REASON_CAP].strip("_") or "Unknown"


def health_condition(node, *, status, reason, message, now):
    """The GPUHealthy condition for `node` (as the API returns it): lastTransitionTime kept while the status holds."""
    previous = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION),
                    None)
    moved = previous is None or previous.get("status") != status or not previous.get("lastTransitionTime")
    return {"type": CONDITION, "status": status, "reason": condition_reason(reason),
            "message": outbound.kubernetes_text(message, MESSAGE_CAP), "lastHeartbeatTime": rfc3339(now),
            "lastTransitionTime": rfc3339(now) if moved else previous["lastTransitionTime"]}


def gpu_event(node, *, key, gpu, now):
    """A core/v1 Event on the Node for one GPU; `gpu`: {index, uuid, healthy, reason, message}."""
    metadata = node.get("metadata") or {}
    name = metadata.get("name", "")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "%s.cudaweb-%s-gpu%d" % (name, key, gpu["index"]), "namespace": EVENT_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": metadata.get("uid", "")},
            "reason": condition_reason(gpu["reason"]), "type": "Normal" if gpu["healthy"] else "Warning",
            "message": outbound.kubernetes_text("GPU %d (%s): %s" % (gpu["index"], gpu["uuid"], gpu["message"]),
                                                MESSAGE_CAP),
            "source": {"component": EVENT_SOURCE}, "reportingComponent": EVENT_SOURCE,
            "firstTimestamp": rfc3339(now), "lastTimestamp": rfc3339(now), "count": 1}


def report_health(client, name, *, status, reason, message, gpus, key, now=None):
    """Set the node's GPUHealthy condition, then post one Event per GPU (`key` names this report's events)."""
    now = now or datetime.now(timezone.utc)
    node = client.node(name)
    client.patch_node_status(name, {"status": {"conditions": [
        health_condition(node, status=status, reason=reason, message=message, now=now)]}})
    for gpu in gpus:
        client.create_event(gpu_event(node, key=key, gpu=gpu, now=now))


def cordon_patch(node, reason):
    """The JSON patch that cordons `node` (a Node object as the API returns it) and adds cudaweb's taint."""
    spec, metadata = node.get("spec") or {}, node.get("metadata") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_KEY]
    taints.append({"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"})
    annotations = dict(metadata.get("annotations") or {})
    if not spec.get("unschedulable"):
        annotations[CORDONED] = "true"  # ours to undo; a node someone cordoned before stays cordoned
    annotations[REASON] = outbound.kubernetes_text(reason, ANNOTATION_CAP)
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": metadata.get("resourceVersion")},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "add", "path": "/spec/taints", "value": taints},
        {"op": "add", "path": "/metadata/annotations", "value": annotations},
    ]


def uncordon_patch(node):
    """The JSON patch that removes cudaweb's taint, and the cordon if cudaweb set it; None when nothing is ours."""
    spec, metadata = node.get("spec") or {}, node.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    taints = spec.get("taints") or []
    ours = [t for t in taints if t.get("key") == TAINT_KEY]
    cordoned_by_us = annotations.get(CORDONED) == "true"
    if not ours and not cordoned_by_us and REASON not in annotations:
        return None
    operations = [{"op": "test", "path": "/metadata/resourceVersion", "value": metadata.get("resourceVersion")}]
    if cordoned_by_us:
        operations.append({"op": "add", "path": "/spec/unschedulable", "value": False})
    if ours:
        operations.append({"op": "add", "path": "/spec/taints", "value": [t for t in taints if t not in ours]})
    for key in (CORDONED, REASON):
        if key in annotations:
            operations.append({"op": "remove", "path": "/metadata/annotations/%s" % _pointer(key)})
    return operations


def cordon(client, name, reason):
    client.patch_node(name, cordon_patch(client.node(name), reason))


def uncordon(client, name):
    """Undo cudaweb's cordon and taint; returns whether there was anything to undo."""
    operations = uncordon_patch(client.node(name))
    if operations is None:
        return False
    client.patch_node(name, operations)
    return True
