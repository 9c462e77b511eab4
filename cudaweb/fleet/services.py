"""Writes for nodes, credentials and host keys."""

import hashlib
import json
import sys

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cudaweb.fleet.models import AcceptanceRecord, HostKey, Node, SSHCredential
from cudaweb.validation.transports import ssh


@transaction.atomic
def node_create(*, name, address, port, username, python_path="python3", labels=(), private_key=None, key_path="",
                credential=None, created_by=None):
    """Register an SSH node, storing its private key encrypted (or a key path on the worker)."""
    if credential is None and (private_key or key_path):
        credential = SSHCredential(name="key for %s" % name, key_path=key_path, created_by=created_by)
        if private_key:
            ssh.load_private_key(private_key)  # refuse what paramiko cannot read, before storing it
            credential.set_private_key(private_key)
        credential.save()
    return Node.objects.create(name=name, address=address, port=port, username=username, python_path=python_path,
                               labels=list(labels), credential=credential, transport=Node.Transport.SSH)


def node_register_local(*, name="localhost", python_path=None):
    """The dashboard's own host as a node (transport local), ready to validate with one click."""
    node, _ = Node.objects.get_or_create(
        name=name,
        defaults={"transport": Node.Transport.LOCAL, "address": "127.0.0.1", "python_path": python_path or sys.executable,
                  "status": Node.Status.READY, "labels": ["local"]},
    )
    return node


def host_key_fetch(*, node):
    """First contact: record the host key the node presents, unaccepted, for an operator to review.

    An accepted key is never replaced here; a different key shows up as a mismatch when a run connects.
    """
    key_type, key_base64, fingerprint = ssh.fetch_host_key(node.address, node.port,
                                                            settings.CUDAWEB_SSH_CONNECT_TIMEOUT)
    existing = HostKey.objects.filter(node=node).first()
    if existing and existing.accepted:
        return existing
    host_key, _ = HostKey.objects.update_or_create(
        node=node, defaults={"key_type": key_type, "key_base64": key_base64, "fingerprint_sha256": fingerprint})
    return host_key


def host_key_accept(*, node, user):
    host_key = node.host_key
    host_key.accepted_by = user
    host_key.accepted_at = timezone.now()
    host_key.save(update_fields=["accepted_by", "accepted_at"])
    if node.status == Node.Status.NEW:
        node.status = Node.Status.READY
        node.save(update_fields=["status"])
    return host_key


def _canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


@transaction.atomic
def acceptance_decide(*, node, run, decision, user, note=""):
    """Record an operator's accept / quarantine decision with a snapshot of the evidence; update the node."""
    from cudaweb.drift.services import baseline_pin
    from cudaweb.validation.models import ValidationRun

    if run.node_id != node.id or run.status not in ValidationRun.VERDICT_STATUSES:
        raise ValueError("the decision must rest on a finished run of this node with a verdict")
    host_key = HostKey.objects.filter(node=node).first()
    evidence = {
        "node": {"id": str(node.id), "name": node.name, "address": node.address, "port": node.port,
                 "username": node.username, "labels": node.labels, "transport": node.transport},
        "host_key": None if host_key is None else {
            "type": host_key.key_type, "fingerprint_sha256": host_key.fingerprint_sha256,
            "accepted_by": str(host_key.accepted_by or ""), "accepted_at": host_key.accepted_at},
        "run": {"id": str(run.id), "mode": run.mode, "status": run.status, "verdict": run.verdict,
                "created": run.created, "started": run.started, "finished": run.finished,
                "agent_version": run.agent_version, "reason": run.reason},
        "report": run.report,
    }
    evidence = json.loads(_canonical(evidence))
    record = AcceptanceRecord.objects.create(
        node=node, run=run, decision=decision, note=note, decided_by=user, decided_at=timezone.now(),
        evidence=evidence, digest=hashlib.sha256(_canonical(evidence).encode()).hexdigest())
    if decision == AcceptanceRecord.Decision.QUARANTINED:
        Node.objects.filter(id=node.id).update(status=Node.Status.QUARANTINED)
    else:
        verdict_status = {"pass": Node.Status.PASSING, "warn": Node.Status.WARNING, "fail": Node.Status.FAILING}
        Node.objects.filter(id=node.id).update(status=verdict_status.get(run.verdict, Node.Status.READY))
        if node.baseline_id is None:  # the first accepted run is the node's baseline
            baseline_pin(node=node, run=run)
    return record


def acceptance_export(record):
    """The record as a JSON document: the decision, who, when, and the evidence with its digest."""
    return {"record": str(record.id), "decision": record.decision, "note": record.note,
            "decided_by": record.decided_by.get_username(), "decided_at": record.decided_at.isoformat(),
            "digest_sha256": record.digest, "evidence": record.evidence}
