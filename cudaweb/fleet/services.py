"""Writes of the onboarding pages: an operator's accept / quarantine decision on a new node."""

import hashlib
import json

from django.db import IntegrityError, transaction
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.drift.services import baseline_pin
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import HostKey, Node
from cudaweb.nodes.signals import node_accepted, node_quarantined
from cudaweb.validation import burnin
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.statuses import node_status_of_verdict


def _canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


@transaction.atomic
def acceptance_decide(*, node, run, decision, user, note="", token=None):
    """Record an operator's accept / quarantine decision with a snapshot of the evidence; update the node; once
    committed, tell the apps above (nodes.signals.node_quarantined / node_accepted: hooks drain or resume it).
    `token` is the decision form's id: submitted twice (a double click, a resent form), it records one decision
    and the second call returns the first record."""
    if run.node_id != node.id or run.status not in ValidationRun.VERDICT_STATUSES:
        raise ValueError("the decision must rest on a finished run of this node with a verdict")
    if decision == AcceptanceRecord.Decision.ACCEPTED and run.status == ValidationRun.Status.FAILED \
            and not (note or "").strip():
        raise ValueError("this run FAILED: accepting the node anyway needs a reason in the note (it is kept on the "
                         "record)")
    if token is not None:
        try:
            with transaction.atomic():
                return _acceptance_record(node=node, run=run, decision=decision, user=user, note=note, token=token)
        except IntegrityError:  # this form was submitted already (a double click, or at the same moment)
            earlier = AcceptanceRecord.objects.get(token=token)
            if (earlier.node_id, earlier.run_id, earlier.decision) != (node.id, run.id, decision):
                raise ValueError("this form already recorded %s for %s; reload the page for a new decision" % (
                    earlier.get_decision_display().lower(), earlier.node.name)) from None
            return earlier
    return _acceptance_record(node=node, run=run, decision=decision, user=user, note=note, token=None)


def _acceptance_record(*, node, run, decision, user, note, token):
    host_key = HostKey.objects.filter(node=node).first()
    evidence = {
        "node": {"id": str(node.id), "name": node.name, "address": node.address, "port": node.port,
                 "username": node.username, "labels": node.labels, "transport": node.transport},
        "host_key": None if host_key is None else {
            "type": host_key.key_type, "fingerprint_sha256": host_key.fingerprint_sha256,
            "accepted_by": str(host_key.accepted_by or ""), "accepted_at": host_key.accepted_at},
        "run": {"id": str(run.id), "mode": run.mode, "status": run.status, "verdict": run.verdict,
                "created": run.created, "started": run.started, "finished": run.finished,
                "agent_version": run.agent_version, "reason": run.reason,
                # what the decision rests on: the mode and, in burn-in mode, how long the load lasted
                "burnin_seconds": run.burnin_seconds, "rests_on": burnin.describe(run.mode, run.burnin_seconds),
                "retry": {k: v for k, v in (run.retry or {}).items() if k != "report"}},
        "report": run.report,
    }
    evidence = json.loads(_canonical(evidence))
    record = AcceptanceRecord.objects.create(
        node=node, run=run, decision=decision, note=note, decided_by=user, decided_at=timezone.now(),
        evidence=evidence, digest=hashlib.sha256(_canonical(evidence).encode()).hexdigest(), token=token)
    audit.record("node.accepted" if decision == AcceptanceRecord.Decision.ACCEPTED else "node.quarantined",
                 actor=user, obj=node, record=str(record.id), run=str(run.id), verdict=run.verdict, note=note,
                 digest=record.digest)
    if decision == AcceptanceRecord.Decision.QUARANTINED:
        Node.objects.filter(id=node.id).update(status=Node.Status.QUARANTINED)
    else:
        Node.objects.filter(id=node.id).update(status=node_status_of_verdict(run.verdict, Node.Status.READY))
        if node.baseline_id is None:  # the first accepted run is the node's baseline (a FAILED one only with a reason)
            baseline_pin(node=node, run=run)
    signal = node_quarantined if decision == AcceptanceRecord.Decision.QUARANTINED else node_accepted
    transaction.on_commit(lambda: signal.send(sender=Node, node_id=node.id, run_id=run.id, note=note))
    return record


def acceptance_export(record):
    """The record as a JSON document: the decision, who, when, and the evidence with its digest."""
    return {"record": str(record.id), "decision": record.decision, "note": record.note,
            "decided_by": record.decided_by.get_username(), "decided_at": record.decided_at.isoformat(),
            "digest_sha256": record.digest, "evidence": record.evidence}
