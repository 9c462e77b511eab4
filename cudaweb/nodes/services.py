"""Writes for nodes, credentials and host keys."""

import sys

from django.db import transaction
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.nodes import crypto, validators
from cudaweb.nodes.models import HostKey, Node, SSHCredential


@transaction.atomic
def node_create(*, name, address, port, username, python_path="python3", labels=(), private_key=None, key_path="",
                credential=None, created_by=None):
    """Register an SSH node, storing its private key encrypted (or a key path on the worker).

    The key's format is checked by the caller (cudaweb.remote.connect.ssh_node_create): parsing keys is SSH's
    business, one layer up. Raises validators.NodeFieldError for a name, address, port or user the rule refuses."""
    checked = validators.ssh_node_check(name=name, address=address, port=port, username=username)
    name, address, port, username = checked["name"], checked["address"], checked["port"], checked["username"]
    labels = validators.labels_clean(labels)
    if credential is None and (private_key or key_path):
        credential = SSHCredential(name="key for %s" % name, key_path=key_path, created_by=created_by)
        if private_key:
            credential.set_private_key(private_key)
        credential.save()
        audit.record("credential.created", actor=created_by, obj=credential, stored_key=bool(private_key),
                     key_path=key_path)
    node = Node.objects.create(name=name, address=address, port=port, username=username, python_path=python_path,
                               labels=list(labels), credential=credential, transport=Node.Transport.SSH)
    audit.record("node.created", actor=created_by, obj=node, address=address, port=port, username=username,
                 labels=list(labels), credential=str(credential) if credential else None)
    return node


CONNECTION_FIELDS = ("address", "port", "username", "python_path", "labels")


@transaction.atomic
def node_edit(*, node, changed_by, **values):
    """Change an SSH node's address, port, user, Python or labels (the node rule applies, validators). A new address
    or port is another host as far as SSH knows: the pinned host key is dropped and must be fetched and accepted
    again before any run (the node is New again). Audited with each field's old and new value."""
    wanted = {field: values[field] for field in CONNECTION_FIELDS if field in values}
    checked = validators.ssh_node_check(name=node.name, address=wanted.get("address", node.address),
                                        port=wanted.get("port", node.port),
                                        username=wanted.get("username", node.username))
    wanted.update(address=checked["address"], port=checked["port"], username=checked["username"])
    if "labels" in wanted:
        wanted["labels"] = validators.labels_clean(wanted["labels"])
    changes = {field: [getattr(node, field), value] for field, value in wanted.items() if getattr(node, field) != value}
    if not changes:
        return node, {}
    for field, (_, value) in changes.items():
        setattr(node, field, value)
    update = list(changes)
    key_dropped = "address" in changes or "port" in changes
    if key_dropped:
        HostKey.objects.filter(node=node).delete()
        node.status, node.contact_error = Node.Status.NEW, ""
        update += ["status", "contact_error"]
    node.save(update_fields=update)
    audit.record("node.changed", actor=changed_by, obj=node, via="edit page", changes=changes,
                 host_key_dropped=key_dropped)
    return node, changes


def node_register_local(*, name="localhost", python_path=None):
    """The dashboard's own host as a node (transport local), ready to validate with one click."""
    node, _ = Node.objects.get_or_create(
        name=name,
        defaults={"transport": Node.Transport.LOCAL, "address": "127.0.0.1", "python_path": python_path or sys.executable,
                  "status": Node.Status.READY, "labels": ["local"]},
    )
    return node


def host_key_record(*, node, key_type, key_base64, fingerprint):
    """First contact: keep the host key the node presented, unaccepted, for an operator to review.

    An accepted key is never replaced here; a different key shows up as a mismatch when a run connects.
    """
    existing = HostKey.objects.filter(node=node).first()
    if existing and existing.accepted:
        return existing
    host_key, _ = HostKey.objects.update_or_create(
        node=node, defaults={"key_type": key_type, "key_base64": key_base64, "fingerprint_sha256": fingerprint})
    return host_key


class HostKeyChanged(Exception):
    """The node's stored host key is no longer the one the operator was shown."""


def host_key_accept(*, node, user, fingerprint=None):
    """Accept the node's host key; with `fingerprint`, only if the stored key is still that one (a worker may
    have recorded another since the page was shown): one conditional update, no read-then-write race."""
    now = timezone.now()
    keys = HostKey.objects.filter(node=node)
    if fingerprint is not None:
        keys = keys.filter(fingerprint_sha256=fingerprint)
    if not keys.update(accepted_by=user, accepted_at=now):
        raise HostKeyChanged("the host key changed since the page was shown; review it again")
    host_key = HostKey.objects.get(node=node)
    audit.record("host_key.accepted", actor=user, obj=node, key_type=host_key.key_type,
                 fingerprint=host_key.fingerprint_sha256)
    if node.status == Node.Status.NEW:
        node.status = Node.Status.READY
        node.save(update_fields=["status"])
    return host_key


@transaction.atomic
def credentials_rotate():
    """Re-encrypt every stored private key with the newest credential key; returns how many. All or none: a key no
    configured key opens raises (ImproperlyConfigured) and the transaction keeps the old ciphertexts."""
    credentials = SSHCredential.objects.select_for_update().exclude(private_key_encrypted="")
    count = 0
    for credential in credentials:
        credential.private_key_encrypted = crypto.rotate(credential.private_key_encrypted)
        credential.save(update_fields=["private_key_encrypted"])
        count += 1
    return count
