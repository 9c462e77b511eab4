"""Editing a node (issue 29: admins had to delete and re-add it): address, port, user, Python and labels, by admins
only, audited with old and new values; a new address drops the host key, so it is confirmed again before any run;
the one address and label rule applies."""

import pytest
from django.urls import reverse
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import HostKey, Node
from cudaweb.nodes.services import node_create
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db
FORM = {"address": "198.18.0.5", "port": 22, "username": "ops", "python_path": "/opt/torch/bin/python",
        "labels": "rack-1"}


@pytest.fixture
def node():
    node = node_create(name="gpu-e", address="198.18.0.5", port=22, username="ops", private_key="k",
                       labels=["rack-1"])
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:old",
                           accepted_at=timezone.now())
    Node.objects.filter(id=node.id).update(status=Node.Status.READY)
    return Node.objects.get(id=node.id)


def test_python_and_labels_change_keeping_the_key_and_are_audited(operator_client, node):
    url = reverse("fleet:node_edit", args=[node.id])
    assert 'id="edit-node"' in operator_client.get(node.get_absolute_url()).content.decode()
    assert operator_client.post(url, dict(FORM, labels="rack-1, h200")).status_code == 302
    node.refresh_from_db()
    assert node.python_path == "/opt/torch/bin/python" and node.labels == ["rack-1", "h200"]
    assert HostKey.objects.filter(node=node, accepted_at__isnull=False).exists() and node.can_validate
    event = AuditEvent.objects.get(action="node.changed")
    assert event.detail["changes"]["python_path"] == ["python3", "/opt/torch/bin/python"]
    assert event.detail["host_key_dropped"] is False


def test_a_new_address_drops_the_host_key_until_it_is_confirmed_again(operator_client, node):
    response = operator_client.post(reverse("fleet:node_edit", args=[node.id]), dict(FORM, address="198.18.0.9"),
                                    follow=True)
    assert "the host key was dropped" in response.content.decode()
    node.refresh_from_db()
    assert node.address == "198.18.0.9" and not HostKey.objects.filter(node=node).exists()
    assert not node.can_validate and node.status == Node.Status.NEW
    event = AuditEvent.objects.get(action="node.changed")
    assert event.detail["changes"]["address"] == ["198.18.0.5", "198.18.0.9"] and event.detail["host_key_dropped"]


@pytest.mark.parametrize("field, value", [("address", "999.1.1.1"), ("port", 70000), ("username", "Ops;x"),
                                          ("labels", "x" * 100)])
def test_the_node_rule_applies(operator_client, node, field, value):
    response = operator_client.post(reverse("fleet:node_edit", args=[node.id]), dict(FORM, **{field: value}))
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not AuditEvent.objects.filter(action="node.changed").exists()


def test_only_admins_edit(client, node, django_user_model):
    client.force_login(user_with_role(django_user_model, "op", "operator"))
    assert client.get(reverse("fleet:node_edit", args=[node.id])).status_code == 403
    assert client.post(reverse("fleet:node_edit", args=[node.id]), dict(FORM, address="198.18.0.9")).status_code == 403
    assert 'id="edit-node"' not in client.get(node.get_absolute_url()).content.decode()
    node.refresh_from_db()
    assert node.address == "198.18.0.5"
