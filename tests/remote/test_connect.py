"""The audit row of a node's SSH credential (cudaweb/remote/connect.py) is written when the credential is used: at a
login to a host that proved its pinned key (a real sshd on loopback), never for a node without an accepted key, nor
for one whose host presents another key."""

import pytest
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import HostKey, Node, SSHCredential
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import AuthFailed, HostKeyMismatch, HostKeyUnknown

pytestmark = pytest.mark.django_db


def node_at(sshd, name, *, key="user_key", host_key="host_key", accepted=True):
    """A node reached at the test sshd with `key`, its host key recorded as `host_key` (accepted or not)."""
    credential = SSHCredential(name="cred-" + name)
    credential.set_private_key(sshd.private_key(key))
    credential.save()
    node = Node.objects.create(name=name, address="127.0.0.1", port=sshd.port, username="root", credential=credential)
    key_type, key_base64 = sshd.public_key(host_key)
    HostKey.objects.create(node=node, key_type=key_type, key_base64=key_base64, fingerprint_sha256="x",
                           accepted_at=timezone.now() if accepted else None)
    return node


def used():
    return AuditEvent.objects.filter(action="credential.used")


def test_looks_at_a_node_whose_host_key_is_not_accepted_record_no_use_of_its_credential(sshd):
    node = node_at(sshd, "not-accepted", accepted=False)
    for _ in range(3):  # a look of the loop each time
        with pytest.raises(HostKeyUnknown):
            with transport_for(node, purpose="watch"):
                pass
    assert not used().exists()


def test_a_host_presenting_another_key_than_the_pinned_one_gets_no_credential(sshd):
    node = node_at(sshd, "other-host-key", host_key="other_key")
    with pytest.raises(HostKeyMismatch):
        with transport_for(node, purpose="watch"):
            pass
    assert not used().exists()


def test_a_login_records_one_use_naming_the_user_the_credential_and_the_purpose(sshd, admin_user):
    node = node_at(sshd, "logs-in")
    transport = transport_for(node, purpose="run 7", on_behalf_of=admin_user)
    assert not used().exists()  # built, not yet connected
    with transport:
        assert transport.run_command(["true"]).exit_status == 0
        assert transport.run_command(["true"]).exit_status == 0  # more commands, the same login
    (event,) = used()
    assert (event.actor, event.object_type, event.object_id) == (admin_user, "nodes.sshcredential",
                                                                 str(node.credential_id))
    assert event.detail == {"node": "logs-in", "address": "127.0.0.1:%d" % sshd.port, "username": "root",
                            "purpose": "run 7", "outcome": "logged in"}


def test_a_key_the_host_refuses_is_recorded_as_used_and_refused(sshd):
    node = node_at(sshd, "wrong-key", key="other_key")
    with pytest.raises(AuthFailed):
        with transport_for(node, purpose="run 8"):
            pass
    (event,) = used()
    assert event.detail["outcome"] == "refused"
