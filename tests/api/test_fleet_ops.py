"""The token API's fleet changes (cudaweb/api/fleet_ops.py): nodes added, changed and deleted and host keys accepted
by admins, acceptance decisions by operators, each through the page's own service and audited as the page is; errors
400 / 404 / 409 say what is wrong."""

import json
import subprocess

import pytest

from cudaweb.accounts.models import AuditEvent
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import HostKey, Node, SSHCredential
from cudaweb.validation.models import ValidationRun
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def host_key(tmp_path):
    """A real ed25519 host key: (type, base64, its SHA256 fingerprint as ssh-keygen prints it)."""
    path = tmp_path / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    kind, base64 = (tmp_path / "host_key.pub").read_text().split()[:2]
    printed = subprocess.run(["ssh-keygen", "-lf", str(path) + ".pub"], check=True, capture_output=True, text=True)
    return kind, base64, printed.stdout.split()[1]


@pytest.fixture
def user_key(tmp_path):
    path = tmp_path / "user_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.read_text()


def call(client, method, path, token, body=None):
    response = client.generic(method, "/api/v1/" + path, json.dumps(body or {}), content_type="application/json",
                              **bearer(token))
    return response.status_code, response.json()


def _audit(action):
    return list(AuditEvent.objects.filter(action=action).order_by("id"))  # oldest first


def test_an_admin_adds_changes_and_deletes_a_node_as_the_pages_do(client, token_for, user_key):
    admin = token_for("admin", "ada")
    status, body = call(client, "POST", "nodes/", admin, {
        "name": "gpu-0042", "address": "10.0.4.42", "username": "ops", "labels": ["rack-07", "h200"],
        "private_key": user_key, "python_path": "/opt/torch/bin/python"})
    assert status == 201, body
    assert (body["name"], body["status"], body["host_key_accepted"], body["labels"]) == (
        "gpu-0042", "new", False, ["rack-07", "h200"])
    node = Node.objects.get(name="gpu-0042")
    assert node.credential.private_key_text() == user_key and node.python_path == "/opt/torch/bin/python"
    assert [e.actor_name for e in _audit("node.created")] == ["ada"]
    assert call(client, "POST", "nodes/", admin, {"name": "gpu-0042", "address": "10.0.4.43", "username": "ops",
                                                  "credential": node.credential.name})[0] == 409

    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:x")
    status, body = call(client, "PATCH", "nodes/gpu-0042/", admin, {"labels": ["rack-08"]})
    assert status == 200 and body["changes"] == {"labels": [["rack-07", "h200"], ["rack-08"]]}
    status, body = call(client, "PATCH", "nodes/gpu-0042/", admin, {"address": "10.0.4.44"})
    assert status == 200 and body["changes"]["address"] == ["10.0.4.42", "10.0.4.44"]
    assert not HostKey.objects.filter(node=node).exists()  # another host as far as SSH knows, as on the edit page
    assert [e.detail["host_key_dropped"] for e in _audit("node.changed")] == [False, True]

    status, body = call(client, "DELETE", "nodes/gpu-0042/", admin)
    assert (status, body) == (200, {"name": "gpu-0042", "deleted": True})
    gone = _audit("node.deleted")
    assert [(e.actor_name, e.object_repr, e.object_id, e.detail) for e in gone] == [
        ("ada", "gpu-0042", str(node.id), {"via": "api"})]
    assert call(client, "DELETE", "nodes/gpu-0042/", admin)[0] == 404


def test_refusals_say_which_field_and_why(client, token_for, user_key):
    admin = token_for("admin")
    base = {"name": "gpu-0050", "address": "10.0.4.50", "username": "ops"}
    for body, status, said in (
            (dict(base), 400, "give either credential"),
            (dict(base, credential="no-such"), 400, "no stored credential named 'no-such'"),
            (dict(base, private_key="ssh-ed25519 AAAA"), 400, "private_key:"),
            (dict(base, address="-oProxyCommand=x", private_key=user_key), 400, "address:"),
            (dict(base, name="--force", private_key=user_key), 400, "name")):
        answer = call(client, "POST", "nodes/", admin, body)
        assert answer[0] == status and said in answer[1]["detail"], (body, answer)
    assert not Node.objects.exists() and not SSHCredential.objects.exists()
    assert call(client, "PATCH", "nodes/nope/", admin, {"port": 2222})[0] == 404
    Node.objects.create(name="gpu-0051", address="10.0.4.51", username="ops")
    assert call(client, "PATCH", "nodes/gpu-0051/", admin, {})[1]["detail"].startswith("nothing to change")
    assert "address:" in call(client, "PATCH", "nodes/gpu-0051/", admin, {"address": "a b"})[1]["detail"]


def test_roles_are_the_pages(client, token_for, user_key):
    operator = token_for("operator")
    assert call(client, "POST", "nodes/", operator, {"name": "n1", "address": "10.0.0.1", "username": "ops",
                                                     "private_key": user_key})[0] == 403
    Node.objects.create(name="n1", address="10.0.0.1", username="ops")
    assert call(client, "DELETE", "nodes/n1/", operator)[0] == 403
    assert call(client, "POST", "nodes/n1/host-key/accept/", operator, {"fingerprint": "SHA256:" + "A" * 43})[0] == 403
    assert call(client, "POST", "nodes/n1/decision/", token_for("viewer"),
                {"run": "00000000-0000-0000-0000-000000000000", "decision": "accepted"})[0] == 403


def test_a_node_with_a_live_run_or_a_kept_decision_is_not_deleted(client, token_for, admin_user):
    admin = token_for("admin")
    node = Node.objects.create(name="gpu-0060", transport=Node.Transport.LOCAL)
    live = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    assert "run in progress" in call(client, "DELETE", "nodes/gpu-0060/", admin)[1]["detail"]
    ValidationRun.objects.filter(id=live.id).update(status=ValidationRun.Status.FAILED)
    AcceptanceRecord.objects.create(node=node, run=live, decision="quarantined", decided_by=admin_user,
                                    decided_at=live.created, evidence={}, digest="0" * 64)
    status, body = call(client, "DELETE", "nodes/gpu-0060/", admin)
    assert status == 409 and "acceptance records" in body["detail"]
    assert Node.objects.filter(name="gpu-0060").exists() and not _audit("node.deleted")


def test_a_host_key_given_with_its_fingerprint_is_pinned_as_the_page_pins_it(client, token_for, host_key):
    kind, base64, fingerprint = host_key
    admin = token_for("admin", "ada")
    node = Node.objects.create(name="gpu-0070", address="10.0.4.70", port=2222, username="ops")
    wrong = "SHA256:" + "B" * 43
    status, body = call(client, "POST", "nodes/gpu-0070/host-key/accept/", admin,
                        {"fingerprint": wrong, "key": "%s %s" % (kind, base64)})
    assert status == 409 and "refused" in body["detail"] and fingerprint in body["detail"]
    assert not HostKey.objects.exists()
    status, body = call(client, "POST", "nodes/gpu-0070/host-key/accept/", admin,
                        {"fingerprint": fingerprint, "key": "[10.0.4.70]:2222 %s %s comment" % (kind, base64)})
    assert (status, body) == (200, {"node": "gpu-0070", "key_type": kind, "fingerprint": fingerprint,
                                    "accepted_now": True})
    pinned = HostKey.objects.get(node=node)
    assert (pinned.key_base64, pinned.accepted_by.username) == (base64, "ada")
    node.refresh_from_db()
    assert node.status == Node.Status.READY
    assert [(e.actor_name, e.detail) for e in _audit("host_key.accepted")] == [
        ("ada", {"key_type": kind, "fingerprint": fingerprint, "via": "api"})]
    assert call(client, "POST", "nodes/gpu-0070/host-key/accept/", admin,
                {"fingerprint": fingerprint})[1]["accepted_now"] is False
    assert call(client, "POST", "nodes/gpu-0070/host-key/accept/", admin, {"fingerprint": wrong})[0] == 409


def test_the_key_a_worker_read_is_accepted_only_with_its_fingerprint(client, token_for, host_key):
    kind, base64, fingerprint = host_key
    admin = token_for("admin")
    node = Node.objects.create(name="gpu-0071", address="10.0.4.71", username="ops")
    answer = call(client, "POST", "nodes/gpu-0071/host-key/accept/", admin, {"fingerprint": fingerprint})
    assert answer[0] == 409 and "no host key was read" in answer[1]["detail"]
    HostKey.objects.create(node=node, key_type=kind, key_base64=base64, fingerprint_sha256=fingerprint)
    answer = call(client, "POST", "nodes/gpu-0071/host-key/accept/", admin, {"fingerprint": "SHA256:" + "C" * 43})
    assert answer[0] == 409 and "nothing was accepted" in answer[1]["detail"]
    assert not HostKey.objects.get(node=node).accepted
    assert call(client, "POST", "nodes/gpu-0071/host-key/accept/", admin, {"fingerprint": fingerprint})[0] == 200
    assert HostKey.objects.get(node=node).accepted
    assert call(client, "POST", "nodes/nope/host-key/accept/", admin, {"fingerprint": fingerprint})[0] == 404


def test_an_operator_decides_on_the_newest_run_as_the_onboarding_page_does(client, token_for):
    operator = token_for("operator", "olga")
    node = Node.objects.create(name="gpu-0080", transport=Node.Transport.LOCAL)
    older = stored_run(node, real_report())
    newest = stored_run(node, real_report())
    assert newest.status == ValidationRun.Status.PASSED
    status, body = call(client, "POST", "nodes/gpu-0080/decision/", operator,
                        {"run": str(older.id), "decision": "accepted"})
    assert status == 409 and str(newest.id) in body["detail"]
    other = Node.objects.create(name="gpu-0081", transport=Node.Transport.LOCAL)
    assert call(client, "POST", "nodes/gpu-0081/decision/", operator,
                {"run": str(newest.id), "decision": "accepted"})[0] == 404
    status, body = call(client, "POST", "nodes/gpu-0080/decision/", operator,
                        {"run": str(newest.id), "decision": "quarantined", "note": "fans loud"})
    assert status == 201 and body["decision"] == "quarantined" and body["run"] == str(newest.id)
    record = AcceptanceRecord.objects.get(id=body["record"])
    assert (record.decided_by.username, record.note, record.digest) == ("olga", "fans loud", body["digest"])
    node.refresh_from_db()
    assert node.status == Node.Status.QUARANTINED
    assert [(e.actor_name, e.detail["run"]) for e in _audit("node.quarantined")] == [("olga", str(newest.id))]
    failed = ValidationRun.objects.create(node=other, status=ValidationRun.Status.FAILED, verdict="fail")
    answer = call(client, "POST", "nodes/gpu-0081/decision/", operator, {"run": str(failed.id), "decision": "accepted"})
    assert answer[0] == 409 and "needs a reason in the note" in answer[1]["detail"]
