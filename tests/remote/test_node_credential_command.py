"""`manage.py node_credential`: a node's own credential on the last line, the earlier one revoked; a label's nodes in
one command, a file per node (0600) or written onto each node by the dashboard (a root-only file where the health
command reads it by default), a node whose file could not be written keeping its old credential; and the API's
issue and revoke, for admins only. (cudaweb/remote/management/commands/node_credential.py, node_credential_install)"""

import io
import json
import os
import stat

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import Node, NodeCredential
from cudaweb.nodes.report_credentials import credential_digest, node_credential_find
from tests.api.conftest import bearer, token_for  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _node(name, labels=("rack-c",), transport=Node.Transport.LOCAL):
    return Node.objects.create(name=name, transport=transport, address="127.0.0.1", labels=list(labels))


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("node_credential", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_one_node_gets_a_credential_on_the_last_line_and_the_earlier_one_is_revoked():
    node = _node("gpu-c01")
    first = _run("gpu-c01")[0].splitlines()[-1]
    assert node_credential_find(first).node == node
    second = _run("gpu-c01")[0].splitlines()[-1]
    assert node_credential_find(first) is None and node_credential_find(second).node == node
    kept = NodeCredential.objects.get(node=node, revoked=None)
    assert kept.digest == credential_digest(second) and second not in json.dumps(list(
        NodeCredential.objects.values()), default=str)  # only its digest is kept
    assert AuditEvent.objects.filter(action="node_credential.issued").count() == 2
    assert "revoked" in _run("gpu-c01", "--revoke")[0] and node_credential_find(second) is None


def test_a_labels_nodes_get_a_file_each_readable_by_its_owner_only(tmp_path):
    for i in range(3):
        _node("gpu-r%d" % i)
    _node("gpu-elsewhere", labels=("rack-z",))
    out, _ = _run("--label", "rack-c", "--out-dir", str(tmp_path / "creds"))
    files = sorted(os.listdir(tmp_path / "creds"))
    assert files == ["gpu-r0.credential", "gpu-r1.credential", "gpu-r2.credential"]
    for name in files:
        path = tmp_path / "creds" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert node_credential_find(path.read_text().strip()).node.name == name.split(".")[0]
        assert path.read_text().strip() not in out  # the texts are in the files, not on the screen
    assert not NodeCredential.objects.filter(node__name="gpu-elsewhere").exists()


def test_the_dashboard_writes_each_credential_onto_its_node_root_only(tmp_path, settings):
    """Through the node's transport (here the local one: the dashboard's own host), as the health command's default
    path; the text goes on stdin, never on a command line."""
    settings.CUDAWEB_NODE_CREDENTIAL_PATH = str(tmp_path / "etc" / "cudaweb" / "node-credential")
    _node("gpu-i1")
    out, _ = _run("--label", "rack-c", "--install")
    written = tmp_path / "etc" / "cudaweb" / "node-credential"
    assert node_credential_find(written.read_text().strip()).node.name == "gpu-i1"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert "gpu-i1: written to gpu-i1:%s" % written in out
    assert AuditEvent.objects.filter(action="node_credential.installed").count() == 1


def test_a_node_whose_file_cannot_be_written_keeps_its_old_credential(tmp_path, settings):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    settings.CUDAWEB_NODE_CREDENTIAL_PATH = str(blocker / "node-credential")
    _node("gpu-i2")
    old = _run("gpu-i2")[0].splitlines()[-1]
    with pytest.raises(CommandError) as failed:
        _run("--label", "rack-c", "--install")
    assert "credentials unchanged: gpu-i2" in str(failed.value)
    assert node_credential_find(old).node.name == "gpu-i2"


def test_a_label_without_a_destination_or_an_unknown_node_is_a_usage_error():
    _node("gpu-u1")
    with pytest.raises(CommandError, match="--out-dir DIR and/or --install"):
        _run("--label", "rack-c")
    with pytest.raises(CommandError, match="no node 'nope'"):
        _run("nope")
    assert not NodeCredential.objects.exists()


def test_the_api_issues_and_revokes_a_nodes_credential_for_admins_only(client, token_for):
    _node("gpu-api-c")
    url = "/api/v1/nodes/gpu-api-c/credential/"
    assert client.post(url, **bearer(token_for("operator"))).status_code == 403
    admin = token_for("admin")
    issued = client.post(url, **bearer(admin))
    assert issued.status_code == 201, issued.content
    text = issued.json()["credential"]
    assert node_credential_find(text).node.name == "gpu-api-c" and issued.json()["revoked_earlier"] is False
    assert client.post(url, **bearer(admin)).json()["revoked_earlier"] is True
    assert node_credential_find(text) is None
    assert client.delete(url, **bearer(admin)).json() == {"node": "gpu-api-c", "revoked": True}
    assert not NodeCredential.objects.filter(node__name="gpu-api-c", revoked=None).exists()


def test_an_admin_issues_and_revokes_on_the_node_page_and_the_credential_is_shown_once(client, django_user_model):
    from tests.conftest import user_with_role

    node = _node("gpu-page-c")
    page = "/nodes/%s/" % node.id
    client.force_login(user_with_role(django_user_model, "ops-op", "operator"))
    assert 'id="credential-issue"' not in client.get(page).content.decode()
    assert client.post("/nodes/%s/credential/" % node.id, {"action": "issue"}).status_code == 403
    client.force_login(user_with_role(django_user_model, "ops-admin", "admin"))
    assert 'id="credential-none"' in client.get(page).content.decode()
    issued = client.post("/nodes/%s/credential/" % node.id, {"action": "issue"})
    assert issued.status_code == 200 and issued["Cache-Control"] == "no-store"
    text = issued.content.decode().split('id="credential-text">')[1].split("<")[0]
    credential = node_credential_find(text)
    assert credential.node == node
    shown = client.get(page).content.decode()
    assert credential.prefix in shown and text not in shown  # the prefix, never the text again
    assert client.post("/nodes/%s/credential/" % node.id, {"action": "revoke"}).status_code == 302
    assert node_credential_find(text) is None
