"""A node's way in: the transport a run uses, first contact for its host key, and SSH keys checked before they
are stored. The Django side of this package; the transports themselves are plain Python."""

from django.conf import settings

from cudaweb.accounts import audit
from cudaweb.nodes import services as node_services
from cudaweb.nodes.models import HostKey
from cudaweb.remote.transports import base, ssh
from cudaweb.remote.transports.local import LocalTransport
from cudaweb.remote.transports.ssh import SSHTransport


def transport_for(node, *, purpose="", on_behalf_of=None):
    """The transport that reaches `node`: local for the dashboard's own host, else SSH pinned to the accepted key.
    Using the node's stored SSH credential goes to the audit log, with `purpose` (e.g. the run) and the user it
    serves."""
    if node.is_local:
        return LocalTransport(settings.CUDAWEB_AGENT_CACHE_DIR, settings.CUDAWEB_OUTPUT_CAP)
    host_key = HostKey.objects.filter(node=node, accepted_at__isnull=False).first()
    if node.credential is None:
        raise base.AuthFailed("node %s has no SSH credential" % node.name)
    audit.record("credential.used", actor=on_behalf_of, obj=node.credential, node=node.name,
                 address="%s:%d" % (node.address, node.port), username=node.username, purpose=purpose)
    return SSHTransport(
        node.address, node.port, node.username, node.credential.private_key_text(),
        (host_key.key_type, host_key.key_base64) if host_key else None,
        settings.CUDAWEB_SSH_CONNECT_TIMEOUT, settings.CUDAWEB_OUTPUT_CAP)


def host_key_fetch(*, node):
    """First contact: read the host key `node` presents and record it, unaccepted, for an operator to review."""
    key_type, key_base64, fingerprint = ssh.fetch_host_key(node.address, node.port,
                                                            settings.CUDAWEB_SSH_CONNECT_TIMEOUT)
    audit.record("host_key.fetched", obj=node, address="%s:%d" % (node.address, node.port), key_type=key_type,
                 fingerprint=fingerprint)
    return node_services.host_key_record(node=node, key_type=key_type, key_base64=key_base64, fingerprint=fingerprint)


def private_key_check(text):
    """Raise AuthFailed unless paramiko can read `text` as an Ed25519, ECDSA or RSA private key."""
    ssh.load_private_key(text)


def ssh_node_create(*, private_key=None, **fields):
    """Register an SSH node (cudaweb.nodes.services.node_create), refusing a key paramiko cannot read before
    storing it."""
    if private_key:
        private_key_check(private_key)
    return node_services.node_create(private_key=private_key, **fields)
