"""A node's way in: the transport a run uses, first contact for its host key, and SSH keys checked before they
are stored. The Django side of this package; the transports themselves are plain Python."""

import socket

from django.conf import settings
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.common import dbretry, dispatch
from cudaweb.nodes import addresses
from cudaweb.nodes import services as node_services
from cudaweb.nodes.keyfiles import KeyFileRefused
from cudaweb.nodes.models import HostKey, Node
from cudaweb.remote.transports import base, ssh
from cudaweb.remote.transports.local import LocalTransport
from cudaweb.remote.transports.ssh import SSHTransport

FETCH_HOST_KEY = "cudaweb.remote.tasks.fetch_host_key"


def reachable_address(address, port):
    """The address to connect to: checked (cudaweb.nodes.addresses), the name resolved once, every address it gives
    allowed (inside CUDAWEB_ALLOWED_NETWORKS, or, with none listed, none of this host's own or the link's), and the
    first of those returned: the connection goes to the IP that was checked, so a name that resolves differently a
    moment later (DNS rebinding) cannot lead it elsewhere, nor `localhost` to the worker's own services. Raises
    AddressRefused."""
    address = addresses.address_check(address)
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(address, port, proto=socket.IPPROTO_TCP)}
    except OSError as exc:
        raise addresses.AddressRefused("%s does not resolve: %s" % (address, exc)) from None
    outside = sorted(ip for ip in resolved if not addresses.ip_allowed(ip.split("%")[0]))
    if outside:
        raise addresses.AddressRefused("%s resolves to %s: %s" % (
            address, ", ".join(outside), addresses.refusal(outside[0]).split(" ", 2)[2]))
    return sorted(resolved)[0]


def transport_for(node, *, purpose="", on_behalf_of=None):
    """The transport that reaches `node`: local for the dashboard's own host, else SSH pinned to the accepted key.
    Each login with the node's stored SSH credential (the transport's connect, once the host proved the pinned key)
    goes to the audit log, with `purpose` (e.g. the run) and the user it serves; a node without an accepted key, or
    one that cannot be reached, writes none. Reading the accepted host key and writing the audit row ride over a
    dropped database connection (cudaweb.common.dbretry), for every caller."""
    return dbretry.retrying(_transport_for, node, purpose=purpose, on_behalf_of=on_behalf_of,
                            what="connection to %s%s" % (node.name, " (%s)" % purpose if purpose else ""))


def _transport_for(node, *, purpose, on_behalf_of):
    if node.is_local:
        return LocalTransport(settings.CUDAWEB_AGENT_CACHE_DIR, settings.CUDAWEB_OUTPUT_CAP)
    host_key = HostKey.objects.filter(node=node, accepted_at__isnull=False).first()
    credential = node.credential
    if credential is None:
        raise base.AuthFailed("node %s has no SSH credential" % node.name)
    try:
        address = reachable_address(node.address, node.port)
    except addresses.AddressRefused as exc:
        raise base.Unreachable(str(exc)) from None
    try:
        key_text = credential.private_key_text()
    except KeyFileRefused as exc:
        raise base.AuthFailed(str(exc)) from None

    def key_used(outcome):
        dbretry.retrying(audit.record, "credential.used", actor=on_behalf_of, obj=credential, node=node.name,
                         address="%s:%d" % (node.address, node.port), username=node.username, purpose=purpose,
                         outcome=outcome, what="audit of %s's credential" % node.name)

    return SSHTransport(
        address, node.port, node.username, key_text,
        (host_key.key_type, host_key.key_base64) if host_key else None,
        settings.CUDAWEB_SSH_CONNECT_TIMEOUT, settings.CUDAWEB_OUTPUT_CAP, on_key_used=key_used)


class QueueDown(Exception):
    """The task queue does not answer: nothing was asked of a worker."""


def host_key_request(*, node, user=None):
    """Ask a worker to read `node`'s host key (remote.tasks.fetch_host_key); the node page shows the key, or
    why it could not be read, when the worker is done. No connection is made from the web request."""
    Node.objects.filter(id=node.id).update(contact_requested=timezone.now(), contact_error="")
    try:
        dispatch.task(FETCH_HOST_KEY).apply_async(args=[str(node.id), user.pk if user else None], retry=False)
    except Exception as exc:  # kombu / redis errors: whatever the broker raised, nothing was queued
        Node.objects.filter(id=node.id).update(contact_requested=None)
        raise QueueDown("the task queue (Redis) does not answer: %s" % exc) from None


def host_key_fetch(*, node, on_behalf_of=None):
    """First contact: read the host key `node` presents and record it, unaccepted, for an operator to review.
    Runs in a worker (remote.tasks.fetch_host_key), never in a web request."""
    try:
        address = reachable_address(node.address, node.port)
    except addresses.AddressRefused as exc:
        raise base.Unreachable(str(exc)) from None
    try:
        key_type, key_base64, fingerprint = ssh.fetch_host_key(address, node.port,
                                                                settings.CUDAWEB_SSH_CONNECT_TIMEOUT)
    except base.Unreachable:
        # one message whatever the cause (refused, filtered, not SSH): the dashboard is no port scanner
        raise base.Unreachable(
            "no SSH host key could be read from %s:%d: nothing there answered as an SSH server. Check the address "
            "and port, that sshd runs on the node, and that a firewall lets this dashboard's workers reach it"
            % (node.address, node.port)) from None
    audit.record("host_key.fetched", actor=on_behalf_of, obj=node, address="%s:%d" % (node.address, node.port),
                 key_type=key_type, fingerprint=fingerprint)
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
