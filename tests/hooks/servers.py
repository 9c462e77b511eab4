"""Real local HTTP(S) servers in a thread: a webhook receiver that fails on cue, and a Kubernetes API server's
node endpoints (GET and JSON-patch PATCH) that records every request."""

import copy
import datetime
import http.server
import ipaddress
import json
import ssl
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class _Server:
    def __init__(self, handler, ssl_context=None):
        self.requests = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.owner = self
        if ssl_context is not None:
            self.httpd.socket = ssl_context.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if ssl_context else "http"
        self.url = "%s://127.0.0.1:%d" % (scheme, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.received = threading.Condition()

    def record(self, entry):
        with self.received:
            self.requests.append(entry)
            self.received.notify_all()

    def wait_for(self, count, timeout=30):
        with self.received:
            return self.received.wait_for(lambda: len(self.requests) >= count, timeout)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status, document):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class WebhookReceiver(_Server):
    """Answers each POST with the next status of `statuses` (then 200) and keeps what it was sent."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        super().__init__(self._Handler)

    class _Handler(_Quiet):
        def do_POST(self):
            owner = self.server.owner
            status = owner.statuses.pop(0) if owner.statuses else 200
            owner.record({"path": self.path, "headers": dict(self.headers), "json": json.loads(self._body()),
                          "answered": status})
            self._answer(status, {"ok": status == 200})


def _apply_json_patch(document, operations):
    """RFC 6902, the operations cudaweb sends (test, add, remove) on object members; None when a test fails."""
    document = copy.deepcopy(document)
    for op in operations:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = document
        for part in parents:
            target = target[part]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                return None
        elif op["op"] == "add":
            target[last] = op["value"]
        elif op["op"] == "remove":
            del target[last]
        else:
            raise ValueError(op["op"])
    return document


def certificate_pair(directory):
    """A CA and a server certificate for 127.0.0.1 signed by it; returns (ca_file, cert_file, key_file)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cudaweb test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = (directory / "ca.pem", directory / "server.pem", directory / "server.key")
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return files


class FakeKubernetesNodes(_Server):
    """/api/v1/nodes/<name> over HTTPS with a bearer token: GET, and PATCH with application/json-patch+json applied
    as the API server applies it (a failed test answers 422, a changed resourceVersion with it)."""

    def __init__(self, directory, token, nodes):
        self.token = token
        self.nodes = nodes
        self.ca_file, cert_file, key_file = certificate_pair(directory)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        super().__init__(self._Handler, context)

    class _Handler(_Quiet):
        def _node(self):
            owner = self.server.owner
            if self.headers.get("Authorization") != "Bearer %s" % owner.token:
                self._answer(401, {"kind": "Status", "code": 401})
                return None, None
            name = self.path.rsplit("/", 1)[-1]
            if not self.path.startswith("/api/v1/nodes/") or name not in owner.nodes:
                self._answer(404, {"kind": "Status", "code": 404})
                return None, None
            return owner, name

        def do_GET(self):
            owner, name = self._node()
            if owner:
                owner.record({"method": "GET", "path": self.path})
                self._answer(200, owner.nodes[name])

        def do_PATCH(self):
            body = json.loads(self._body())
            owner, name = self._node()
            if not owner:
                return
            owner.record({"method": "PATCH", "path": self.path, "content_type": self.headers["Content-Type"],
                          "json": body})
            if self.headers["Content-Type"] != "application/json-patch+json":
                self._answer(415, {"kind": "Status", "code": 415})
                return
            patched = _apply_json_patch(owner.nodes[name], body)
            if patched is None:
                self._answer(422, {"kind": "Status", "code": 422, "reason": "Invalid", "message": "test failed"})
                return
            patched["metadata"]["resourceVersion"] = str(int(patched["metadata"]["resourceVersion"]) + 1)
            owner.nodes[name] = patched
            self._answer(200, patched)


def _strategic_merge_status(node, patch):
    """The part of a strategic merge patch the API server applies to a Node's status that cudaweb sends: conditions
    merged by their `type` (NodeStatus.conditions has patchMergeKey "type"), other fields replaced."""
    patched = copy.deepcopy(node)
    status = patched.setdefault("status", {})
    for key, value in (patch.get("status") or {}).items():
        if key != "conditions":
            status[key] = value
            continue
        conditions = status.setdefault("conditions", [])
        for condition in value:
            found = next((i for i, c in enumerate(conditions) if c.get("type") == condition.get("type")), None)
            if found is None:
                conditions.append(condition)
            else:
                conditions[found] = dict(conditions[found], **condition)
    return patched


class FakeKubernetesCluster(FakeKubernetesNodes):
    """FakeKubernetesNodes plus the node status subresource (PATCH /api/v1/nodes/<name>/status, strategic merge
    patch only) and core/v1 events (POST /api/v1/namespaces/<ns>/events: 409 for a name that exists)."""

    def __init__(self, directory, token, nodes):
        self.events = {}
        super().__init__(directory, token, nodes)

    class _Handler(FakeKubernetesNodes._Handler):
        def _authorised(self):
            if self.headers.get("Authorization") != "Bearer %s" % self.server.owner.token:
                self._answer(401, {"kind": "Status", "code": 401})
                return False
            return True

        def do_PATCH(self):
            if not self.path.endswith("/status"):
                return super().do_PATCH()
            body = json.loads(self._body())
            owner, name = self.server.owner, self.path[len("/api/v1/nodes/"):-len("/status")]
            if not self._authorised():
                return
            owner.record({"method": "PATCH", "path": self.path, "content_type": self.headers["Content-Type"],
                          "json": body})
            if name not in owner.nodes:
                return self._answer(404, {"kind": "Status", "code": 404})
            if self.headers["Content-Type"] != "application/strategic-merge-patch+json":
                return self._answer(415, {"kind": "Status", "code": 415})
            patched = _strategic_merge_status(owner.nodes[name], body)
            patched["metadata"]["resourceVersion"] = str(int(patched["metadata"]["resourceVersion"]) + 1)
            owner.nodes[name] = patched
            self._answer(200, patched)

        def do_POST(self):
            body = json.loads(self._body())
            owner = self.server.owner
            if not self._authorised():
                return
            owner.record({"method": "POST", "path": self.path, "json": body})
            namespace = self.path.split("/")[4] if self.path.startswith("/api/v1/namespaces/") else None
            if namespace is None or not self.path.endswith("/events") or body.get("kind") != "Event":
                return self._answer(404, {"kind": "Status", "code": 404})
            key = (namespace, body["metadata"]["name"])
            if key in owner.events:
                return self._answer(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
            owner.events[key] = body
            self._answer(201, body)
