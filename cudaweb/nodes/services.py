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


class NodeInUse(Exception):
    """The node cannot be deleted now: a run is live on it, or records that are kept name it."""


def node_delete(*, node, deleted_by=None, via):
    """Delete a node with its runs and events, audited as node.deleted (as the admin's delete is) with `via`.
    NodeInUse while a run is live, or once an acceptance record names it (evidence that is kept: PROTECT)."""
    from django.db.models import ProtectedError

    if node.runs.filter(status__in=("PENDING", "RUNNING")).exists():  # the one-live-run rule's statuses
        raise NodeInUse("node %s has a run in progress; delete it once the run has ended" % node.name)
    gone = audit.Snapshot.of(node)
    try:
        with transaction.atomic():
            node.delete()
            audit.record("node.deleted", actor=deleted_by, obj=gone, via=via)
    except ProtectedError:
        raise NodeInUse("node %s has acceptance records (evidence that is kept); it cannot be deleted"
                        % node.name) from None


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


def host_key_accept(*, node, user, fingerprint=None, via=None):
    """Accept the node's host key; with `fingerprint`, only if the stored key is still that one (a worker may
    have recorded another since the page was shown): one conditional update, no read-then-write race. `via` names
    the way in other than the page (a command, the API, a known_hosts file) in the audit row."""
    now = timezone.now()
    keys = HostKey.objects.filter(node=node)
    if fingerprint is not None:
        keys = keys.filter(fingerprint_sha256=fingerprint)
    if not keys.update(accepted_by=user, accepted_at=now):
        raise HostKeyChanged("the host key changed since the page was shown; review it again")
    host_key = HostKey.objects.get(node=node)
    audit.record("host_key.accepted", actor=user, obj=node, key_type=host_key.key_type,
                 fingerprint=host_key.fingerprint_sha256, **({"via": via} if via else {}))
    if node.status == Node.Status.NEW:
        node.status = Node.Status.READY
        node.save(update_fields=["status"])
    return host_key


def ssh_credential_store(*, name, private_key, created_by=None, via):
    """A private key stored encrypted under `name` (a checked key: cudaweb.remote.connect.private_key_check), audited
    as credential.created; the credential of that name when it holds this very key already. ValueError when the
    name holds another key (a credential is never replaced from a command line)."""
    existing = SSHCredential.objects.filter(name=name).first()
    if existing is not None:
        if existing.private_key_encrypted and existing.private_key_text() == private_key:
            return existing
        raise ValueError("a credential named %r exists with another key; choose another name" % name)
    credential = SSHCredential(name=name, created_by=created_by)
    credential.set_private_key(private_key)
    credential.save()
    audit.record("credential.created", actor=created_by, obj=credential, stored_key=True, key_path="", via=via)
    return credential


class HostKeyConflict(Exception):
    """The node has another accepted host key than the one offered: nothing is replaced silently."""


@transaction.atomic
def host_key_pin(*, node, key_type, key_base64, fingerprint, user, via):
    """Pin a host key the operator vouches for (a known_hosts file, ssh-keyscan output checked against their
    fingerprints, a fingerprint given for the key the node presents) exactly as accepting it on the page pins it:
    the node's one HostKey row, accepted by `user`, audited as host_key.accepted with `via`. Returns (host key,
    True) when pinned now, (host key, False) when that very key was accepted already; raises HostKeyConflict when
    another key is accepted (an admin deletes it first, or edits the node's address)."""
    existing = HostKey.objects.select_for_update().filter(node=node).first()
    if existing is not None and existing.accepted:
        if (existing.key_type, existing.key_base64) == (key_type, key_base64):
            return existing, False
        raise HostKeyConflict("node %s has another accepted host key (%s %s); the one offered is %s %s: nothing "
                              "was changed" % (node.name, existing.key_type, existing.fingerprint_sha256, key_type,
                                               fingerprint))
    HostKey.objects.update_or_create(node=node, defaults={"key_type": key_type, "key_base64": key_base64,
                                                          "fingerprint_sha256": fingerprint})
    return host_key_accept(node=node, user=user, fingerprint=fingerprint, via=via), True


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
