"""`manage.py edit_node` and `delete_node`: the edit page's change (a new address drops the pinned host key) and the
admin's delete, by the same services and audited the same, from a command line; refusals exit 2."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import HostKey, Node
from cudaweb.validation.models import ValidationRun
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db


def command(*args):
    out = StringIO()
    call_command(*[str(a) for a in args], stdout=out)
    return out.getvalue()


def _node(name="gpu-e01"):
    node = Node.objects.create(name=name, address="10.0.5.1", username="ops", labels=["rack-05"])
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:x",
                           accepted_at=timezone.now())
    return node


def test_edit_node_changes_labels_and_a_new_address_drops_the_host_key(django_user_model):
    node = _node()
    user_with_role(django_user_model, "ada", "admin")
    assert command("edit_node", "gpu-e01", "--labels", "rack-06,h200", "--as", "ada").strip() == (
        "gpu-e01 labels: ['rack-05'] -> ['rack-06', 'h200']")
    assert HostKey.objects.filter(node=node).exists()
    out = command("edit_node", "gpu-e01", "--address", "10.0.5.2", "--as", "ada")
    assert "host key dropped" in out and not HostKey.objects.filter(node=node).exists()
    node.refresh_from_db()
    assert (node.address, node.labels, node.status) == ("10.0.5.2", ["rack-06", "h200"], Node.Status.NEW)
    changed = AuditEvent.objects.filter(action="node.changed").order_by("id")
    assert [(e.actor_name, e.detail["host_key_dropped"]) for e in changed] == [("ada", False), ("ada", True)]


def test_edit_node_refusals_exit_2():
    _node()
    for args, said in ((("nope", "--port", "2222"), "no SSH node named 'nope'"),
                       (("gpu-e01",), "nothing to change"),
                       (("gpu-e01", "--address=-oProxyCommand=x"), "--address:"),
                       (("gpu-e01", "--port", "0"), "--port:")):
        with pytest.raises(CommandError, match=said) as refused:
            command("edit_node", *args)
        assert refused.value.returncode == 2


def test_delete_node_is_audited_and_refused_while_a_run_is_live_or_a_decision_is_kept(django_user_model):
    admin = user_with_role(django_user_model, "ada", "admin")
    node = _node()
    live = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    with pytest.raises(CommandError, match="run in progress"):
        command("delete_node", "gpu-e01")
    ValidationRun.objects.filter(id=live.id).update(status=ValidationRun.Status.FAILED)
    AcceptanceRecord.objects.create(node=node, run=live, decision="quarantined", decided_by=admin,
                                    decided_at=timezone.now(), evidence={}, digest="0" * 64)
    with pytest.raises(CommandError, match="acceptance records") as refused:
        command("delete_node", "gpu-e01")
    assert refused.value.returncode == 2 and Node.objects.filter(name="gpu-e01").exists()
    other = _node("gpu-e02")
    assert command("delete_node", "gpu-e02", "--as", "ada").strip() == "gpu-e02 deleted"
    gone = AuditEvent.objects.get(action="node.deleted")
    assert (gone.actor_name, gone.object_repr, gone.object_id, gone.detail) == (
        "ada", "gpu-e02", str(other.id), {"via": "manage.py delete_node"})
    user_with_role(django_user_model, "olga", "operator")
    with pytest.raises(CommandError, match="olga does not have the admin role"):
        command("delete_node", "gpu-e01", "--as", "olga")
