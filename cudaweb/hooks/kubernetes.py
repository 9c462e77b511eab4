"""Cordon + taint a node through the Kubernetes API server's REST API (plain HTTPS, standard library), and undo it.

Each change is one JSON patch (RFC 6902) that first tests the node's resourceVersion, so a node changed between
our read and our write is not overwritten (the API server answers 409 or 422; the delivery tries again). Only what
cudaweb did is undone: the annotation `cudaweb.io/cordoned` says whether the cordon was ours."""

import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from cudaweb.hooks.errors import Permanent, Transient

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

    def _request(self, method, path, body=None, content_type="application/json"):
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


def cordon_patch(node, reason):
    """The JSON patch that cordons `node` (a Node object as the API returns it) and adds cudaweb's taint."""
    spec, metadata = node.get("spec") or {}, node.get("metadata") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_KEY]
    taints.append({"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"})
    annotations = dict(metadata.get("annotations") or {})
    if not spec.get("unschedulable"):
        annotations[CORDONED] = "true"  # ours to undo; a node someone cordoned before stays cordoned
    annotations[REASON] = reason[:1000]
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
