"""`manage.py accept_host_key NODE --fingerprint SHA256:...`: reads the key a real sshd presents (on loopback), as the
node page's "Connect and show the host key" does, and accepts it only when it has the fingerprint given; a different
key is refused naming both, and nothing is accepted. (cudaweb/remote/management/commands/accept_host_key.py)"""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import HostKey, Node
from cudaweb.nodes.services import HostKeyConflict
from cudaweb.remote.known_hosts import host_key_accept_presented
from tests.conftest import user_with_role
from tests.services import free_port

pytestmark = pytest.mark.django_db


def _node(sshd, port=None):
    return Node.objects.create(name="gpu-k01", address="127.0.0.1", port=port or sshd.port, username="root",
                               transport=Node.Transport.SSH)


def accept(*args):
    out = StringIO()
    call_command("accept_host_key", *args, stdout=out)
    return out.getvalue()


def test_the_key_the_node_presents_is_accepted_when_it_has_the_fingerprint_given(sshd, django_user_model):
    node = _node(sshd)
    user_with_role(django_user_model, "alice", "admin")
    out = accept("gpu-k01", "--fingerprint", sshd.fingerprint(), "--as", "alice")
    assert out.strip() == "gpu-k01 accepted ssh-ed25519 %s" % sshd.fingerprint()
    key = HostKey.objects.get(node=node)
    assert (key.key_type, key.key_base64) == sshd.public_key("host_key") and key.accepted
    assert key.accepted_by.username == "alice"
    node.refresh_from_db()
    assert node.status == Node.Status.READY and node.can_validate
    events = {e.action: e for e in AuditEvent.objects.filter(object_repr="gpu-k01")}
    assert events["host_key.fetched"].actor_name == "alice"
    assert events["host_key.accepted"].detail == {"key_type": "ssh-ed25519", "fingerprint": sshd.fingerprint(),
                                                  "via": "manage.py accept_host_key"}
    assert accept("gpu-k01", "--fingerprint", sshd.fingerprint()).startswith("gpu-k01 already accepted")


def test_another_fingerprint_is_refused_naming_both_and_nothing_is_accepted(sshd):
    node = _node(sshd)
    wrong = sshd.fingerprint("other_key")
    with pytest.raises(CommandError) as refused:
        accept("gpu-k01", "--fingerprint", wrong)
    assert refused.value.returncode == 2
    assert "gpu-k01 presented ssh-ed25519 %s, not %s: nothing was accepted" % (sshd.fingerprint(), wrong) in str(
        refused.value)
    assert not HostKey.objects.get(node=node).accepted  # kept for review, as the page's fetch keeps it
    assert not AuditEvent.objects.filter(action="host_key.accepted").exists()


def test_a_node_with_another_accepted_key_is_not_changed(sshd):
    node = _node(sshd)
    accept("gpu-k01", "--fingerprint", sshd.fingerprint())
    with pytest.raises(HostKeyConflict, match="another accepted host key"):
        host_key_accept_presented(node=node, fingerprint=sshd.fingerprint("other_key"), via="test")
    with pytest.raises(CommandError, match="another accepted host key"):
        accept("gpu-k01", "--fingerprint", sshd.fingerprint("other_key"))


def test_bad_input_exits_2_and_an_unreachable_node_exits_3(sshd):
    _node(sshd, port=free_port())
    for args, said in ((("nope", "--fingerprint", sshd.fingerprint()), "no SSH node named 'nope'"),
                       (("gpu-k01", "--fingerprint", "MD5:00:11"), "is not a SHA256 fingerprint")):
        with pytest.raises(CommandError, match=said) as refused:
            accept(*args)
        assert refused.value.returncode == 2
    with pytest.raises(CommandError, match="no SSH host key could be read") as unreachable:
        accept("gpu-k01", "--fingerprint", sshd.fingerprint())
    assert unreachable.value.returncode == 3
