"""The hooks: what the lower apps' signals turn into (deliveries), and one attempt at a delivery."""

import logging
import random
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from cudaweb.common import dispatch
from cudaweb.common.broker import BROKER_ERRORS, PUBLISH_RETRY
from cudaweb.hooks import kubernetes, payloads, slurm, webhook
from cudaweb.hooks.errors import Permanent, Transient
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes import crypto
from cudaweb.nodes.models import Node
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import AuthFailed, TransportError
from cudaweb.validation.gpus import runs_gpus
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)
Kind, Event, Status = HookDelivery.Kind, HookDelivery.Event, HookDelivery.Status
DELIVER = "cudaweb.hooks.tasks.deliver"


def delivery_create(*, kind, event, payload, node=None, run=None, url=""):
    """Keep the delivery, and queue its task once the caller's transaction commits (never sent from a web
    request itself). A webhook's URL is its secret: kept encrypted, shown as scheme and host."""
    delivery = HookDelivery.objects.create(kind=kind, event=event, payload=payload, node=node, run=run,
                                           target=webhook.shown(url) if url else "",
                                           secret=crypto.encrypt(url) if url else "")
    transaction.on_commit(lambda: delivery_enqueue(delivery_id=delivery.id), robust=True)
    return delivery


def delivery_enqueue(*, delivery_id, countdown=None):
    try:
        dispatch.task(DELIVER).apply_async(args=[delivery_id], countdown=countdown, retry=True,
                                           retry_policy=PUBLISH_RETRY)
    except BROKER_ERRORS as exc:
        # The row stays PENDING with the reason; the run or decision it tells of is not undone for a webhook.
        HookDelivery.objects.filter(id=delivery_id).update(last_error="could not be queued (the sweep tries again): %s"
                                                           % exc, touched=timezone.now())
        log.error("hook delivery %s could not be queued: %s", delivery_id, exc)


def _webhook(event, node, run, cause, root_cause=None):
    if settings.CUDAWEB_WEBHOOK_URL:
        # the URL is the secret: read from the settings when sent, kept here only as scheme and host
        delivery_create(kind=Kind.WEBHOOK, event=event, node=node, run=run, url=settings.CUDAWEB_WEBHOOK_URL,
                        payload=payloads.message(event=event, node_name=node.name, run=run, cause=cause,
                                                 root_cause=root_cause))


def on_run_finished(sender, run_id, status, **kwargs):
    """Receiver of validation.signals.run_finished: a webhook for a run that failed (or never reached the node)."""
    if not settings.CUDAWEB_WEBHOOK_URL or status not in settings.CUDAWEB_WEBHOOK_RUN_STATUSES:
        return
    run = ValidationRun.objects.select_related("node").get(id=run_id)
    cause = payloads.root_cause_data(run)
    _webhook(Event.RUN_FAILED, run.node, run, payloads.cause_line(cause, run), cause)


HEALTH_STATUS = {ValidationRun.Status.PASSED: "True", ValidationRun.Status.WARNED: "True",
                 ValidationRun.Status.FAILED: "False"}  # any other end (unreachable, timed out...): "Unknown"


def kubernetes_health(run):
    """What the Kubernetes node is told of `run`: GPUHealthy's status, reason (the root cause's signature, else
    the run's state) and message (the root cause), and each GPU's event."""
    cause = payloads.root_cause_data(run)
    status = HEALTH_STATUS.get(run.status, "Unknown")
    if cause is None:
        reason, message = "ValidationPassed", "cudaweb run %s passed (%s)" % (run.id, run.mode)
    else:
        reason = (cause.get("signatures") or [None])[0] or (cause["check"] or run.status)
        message = payloads.cause_line(cause, run)
    gpus = [{"index": gpu.index, "uuid": gpu.uuid, "healthy": gpu.healthy,
             "reason": gpu.failing[0] or reason if not gpu.healthy else "GPUValidated",
             "message": message if not gpu.healthy else "no failing check of run %s holds against it" % run.id}
            for gpu in runs_gpus(run_ids=[run.id]).get(run.id, ())]
    return {"status": status, "reason": reason, "message": message, "gpus": gpus, "key": run.id.hex[:12]}


def on_run_finished_kubernetes(sender, run_id, status, **kwargs):
    """Receiver of validation.signals.run_finished: the node's GPUHealthy condition and per-GPU events, for a node
    that has a Kubernetes name (Node.kubernetes_name) when CUDAWEB_K8S_API is set (CUDAWEB_K8S_NODE_HEALTH=0: off)."""
    if not settings.CUDAWEB_K8S_API or not settings.CUDAWEB_K8S_NODE_HEALTH or status in ValidationRun.LIVE:
        return
    run = ValidationRun.objects.select_related("node").get(id=run_id)
    if not run.node.kubernetes_name:
        return
    delivery_create(kind=Kind.K8S_HEALTH, event=Event.RUN_FINISHED, node=run.node, run=run,
                    payload=dict(kubernetes_health(run), node_name=run.node.kubernetes_name))


def on_run_drifted(sender, run_id, node_id, **kwargs):
    """Receiver of validation.signals.run_drifted: a webhook naming what drifted."""
    if not settings.CUDAWEB_WEBHOOK_URL:
        return
    run = ValidationRun.objects.select_related("node").get(id=run_id)
    _webhook(Event.DRIFT, run.node, run, payloads.drift_summary(run))


def on_node_quarantined(sender, node_id, run_id, note="", **kwargs):
    """Receiver of nodes.signals.node_quarantined: a webhook, a Slurm drain, a Kubernetes cordon (those set up)."""
    node = Node.objects.get(id=node_id)
    run = ValidationRun.objects.get(id=run_id)
    data = payloads.root_cause_data(run)
    cause = payloads.cause_line(data, run) if data is not None else (note.strip() or "quarantined by an operator")
    slurm_name, kubernetes_name = node.scheduler_names
    with transaction.atomic():
        _webhook(Event.QUARANTINED, node, run, cause, data)
        if settings.CUDAWEB_SLURM_CONTROLLER:
            delivery_create(kind=Kind.SLURM_DRAIN, event=Event.QUARANTINED, node=node, run=run,
                            payload={"slurm_name": slurm_name, "argv": slurm.drain_argv(slurm_name, cause)})
        if settings.CUDAWEB_K8S_API:
            delivery_create(kind=Kind.K8S_CORDON, event=Event.QUARANTINED, node=node, run=run,
                            payload={"node_name": kubernetes_name, "reason": cause})


def on_node_accepted(sender, node_id, run_id, **kwargs):
    """Receiver of nodes.signals.node_accepted: undo a drain and a cordon that cudaweb set."""
    node = Node.objects.get(id=node_id)
    run = ValidationRun.objects.get(id=run_id)
    slurm_name, kubernetes_name = node.scheduler_names
    with transaction.atomic():
        if settings.CUDAWEB_SLURM_CONTROLLER:
            delivery_create(kind=Kind.SLURM_RESUME, event=Event.ACCEPTED, node=node, run=run,
                            payload={"slurm_name": slurm_name, "argv": slurm.resume_argv(slurm_name)})
        if settings.CUDAWEB_K8S_API:
            delivery_create(kind=Kind.K8S_UNCORDON, event=Event.ACCEPTED, node=node, run=run,
                            payload={"node_name": kubernetes_name})


def _slurm_transport():
    controller = Node.objects.select_related("credential").filter(name=settings.CUDAWEB_SLURM_CONTROLLER).first()
    if controller is None:
        raise Permanent("CUDAWEB_SLURM_CONTROLLER names no node: %r" % settings.CUDAWEB_SLURM_CONTROLLER)
    try:
        return transport_for(controller)  # SSH pinned to the controller's accepted host key, as for a validation
    except AuthFailed as exc:  # no credential, or its key cannot be read: a setup error, no retry helps
        raise Permanent("the Slurm controller %s: %s" % (controller.name, exc)) from None
    except TransportError as exc:  # an address refused by the settings, a name that does not resolve
        raise Transient("the Slurm controller %s: %s" % (controller.name, exc)) from None


def _kubernetes_client():
    token = settings.CUDAWEB_K8S_TOKEN
    if not token and settings.CUDAWEB_K8S_TOKEN_FILE:
        try:
            with open(settings.CUDAWEB_K8S_TOKEN_FILE) as fh:
                token = fh.read().strip()
        except OSError as exc:
            raise Transient("cannot read CUDAWEB_K8S_TOKEN_FILE: %s" % (exc.strerror or exc)) from None
    return kubernetes.Client(settings.CUDAWEB_K8S_API, token=token, ca_file=settings.CUDAWEB_K8S_CA_FILE or None)


def _send(delivery):
    """One try; returns the final status (DELIVERED or SKIPPED) and a note on it ("" or, for a Slurm drain or
    resume, whose drain it found and left alone), or raises Transient / Permanent."""
    payload, scontrol = delivery.payload, settings.CUDAWEB_SLURM_SCONTROL
    if delivery.kind == Kind.WEBHOOK:
        url = settings.CUDAWEB_WEBHOOK_URL
        if delivery.secret:
            try:
                url = crypto.decrypt(delivery.secret)
            except ImproperlyConfigured:  # the credential key was rotated away since: today's URL
                pass
        if not url:
            raise Permanent("no webhook URL (CUDAWEB_WEBHOOK_URL is not set)")
        webhook.post_json(url, payload)
    elif delivery.kind == Kind.SLURM_DRAIN:
        # Delivered even when someone else's drain was there and kept: the node is out of the scheduler's hands,
        # which is what the remediation's gate (a delivered drain) asks.
        return Status.DELIVERED, slurm.drain(_slurm_transport(), scontrol, payload["slurm_name"], payload["argv"],
                                             settings.CUDAWEB_SLURM_TIMEOUT_S)
    elif delivery.kind == Kind.SLURM_RESUME:
        note = slurm.resume(_slurm_transport(), scontrol, payload["slurm_name"], settings.CUDAWEB_SLURM_TIMEOUT_S)
        return (Status.SKIPPED if note else Status.DELIVERED), note
    elif delivery.kind == Kind.K8S_CORDON:
        kubernetes.cordon(_kubernetes_client(), payload["node_name"], payload["reason"])
    elif delivery.kind == Kind.K8S_HEALTH:
        kubernetes.report_health(_kubernetes_client(), payload["node_name"], status=payload["status"],
                                 reason=payload["reason"], message=payload["message"], gpus=payload["gpus"],
                                 key=payload["key"])
    elif delivery.kind == Kind.K8S_UNCORDON:
        if not kubernetes.uncordon(_kubernetes_client(), payload["node_name"]):
            return Status.SKIPPED, ""
    return Status.DELIVERED, ""


def backoff_s(attempt):
    """Seconds before try `attempt + 1`: exponential from CUDAWEB_HOOK_BACKOFF_S, capped, with jitter."""
    base = settings.CUDAWEB_HOOK_BACKOFF_S * 2 ** (attempt - 1)
    return min(base, settings.CUDAWEB_HOOK_BACKOFF_MAX_S) * random.uniform(0.75, 1.0)


def delivery_attempt(*, delivery_id):
    """Claim and make one try of a PENDING delivery. Returns None when done (delivered, skipped, failed for good,
    or not ours: the row is gone or another worker took this try), else the seconds to wait before the next try."""
    delivery = HookDelivery.objects.filter(id=delivery_id, status=Status.PENDING).first()
    if delivery is None:
        return None
    claimed = HookDelivery.objects.filter(id=delivery.id, status=Status.PENDING, attempts=delivery.attempts).update(
        attempts=F("attempts") + 1, touched=timezone.now())
    if not claimed:
        return None  # a redelivered task: another worker holds this try
    attempt = delivery.attempts + 1
    try:
        status, note = _send(delivery)
    except Transient as exc:
        if attempt < settings.CUDAWEB_HOOK_TRIES:
            HookDelivery.objects.filter(id=delivery.id).update(last_error="try %d: %s" % (attempt, exc))
            log.warning("hook %s %s, try %d of %d: %s", delivery.kind, delivery.id, attempt,
                        settings.CUDAWEB_HOOK_TRIES, exc)
            return backoff_s(attempt)
        return _finish(delivery, Status.FAILED, "gave up after %d tries: %s" % (attempt, exc))
    except Permanent as exc:
        return _finish(delivery, Status.FAILED, str(exc))
    except Exception as exc:  # a bug of ours, a time limit: the row must not stay PENDING for good
        log.exception("hook %s %s failed unexpectedly", delivery.kind, delivery.id)
        return _finish(delivery, Status.FAILED, "the dashboard failed while sending it: %s: %s" % (
            type(exc).__name__, exc))
    return _finish(delivery, status, note)  # the note of a delivered or skipped one: whose drain it left alone


def deliveries_sweep(*, older_than_s=None):
    """Queue again the PENDING deliveries that no task holds any more (Redis was down when they were made, or
    their task was lost): those untouched for longer than the longest backoff. Returns how many."""
    older_than_s = older_than_s or settings.CUDAWEB_HOOK_BACKOFF_MAX_S * 2
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    stale = list(HookDelivery.objects.filter(status=Status.PENDING, touched__lt=cutoff).values_list("id", flat=True))
    for delivery_id in stale:
        HookDelivery.objects.filter(id=delivery_id).update(touched=timezone.now())
        delivery_enqueue(delivery_id=delivery_id)
    return len(stale)


def _finish(delivery, status, error):
    HookDelivery.objects.filter(id=delivery.id).update(status=status, last_error=error[:5000], finished=timezone.now())
    if status == Status.FAILED:
        log.error("hook %s %s for %s failed: %s", delivery.kind, delivery.id, delivery.node_id, error)
    return None


# ------------------------------------------------------------------------------------------- the loop's calls
# cudaweb.health sits above hooks (docs/adr/0004-one-way-layers.md) and calls these directly.

def loop_webhook(*, event, node, headline, cause):
    """A webhook for the loop (event: health_event, node_state, breaker_open), when one is configured."""
    if settings.CUDAWEB_WEBHOOK_URL:
        url = settings.CUDAWEB_BASE_URL.rstrip("/") + node.get_absolute_url()
        delivery_create(kind=Kind.WEBHOOK, event=event, node=node, url=settings.CUDAWEB_WEBHOOK_URL,
                        payload=payloads.loop_message(event=event, node_name=node.name, headline=headline,
                                                      cause=cause[:payloads.CAUSE_CAP], url=url))


def node_drain(*, node, cause):
    """The loop quarantined `node`: a Slurm drain (reason "cudaweb: ...") and a Kubernetes cordon, those set up;
    as an operator's quarantine does, without a run."""
    slurm_name, kubernetes_name = node.scheduler_names
    cause = " ".join(cause.split())[:payloads.CAUSE_CAP]
    with transaction.atomic():
        if settings.CUDAWEB_SLURM_CONTROLLER:
            delivery_create(kind=Kind.SLURM_DRAIN, event=Event.QUARANTINED, node=node,
                            payload={"slurm_name": slurm_name, "argv": slurm.drain_argv(slurm_name, cause)})
        if settings.CUDAWEB_K8S_API:
            delivery_create(kind=Kind.K8S_CORDON, event=Event.QUARANTINED, node=node,
                            payload={"node_name": kubernetes_name, "reason": cause})


def node_resume(*, node):
    """The loop returned `node` to ready: undo cudaweb's drain and cordon only (slurm.resume leaves a drain whose
    reason is not cudaweb's; kubernetes.uncordon a cordon that was not ours)."""
    slurm_name, kubernetes_name = node.scheduler_names
    with transaction.atomic():
        if settings.CUDAWEB_SLURM_CONTROLLER:
            delivery_create(kind=Kind.SLURM_RESUME, event=Event.ACCEPTED, node=node,
                            payload={"slurm_name": slurm_name, "argv": slurm.resume_argv(slurm_name)})
        if settings.CUDAWEB_K8S_API:
            delivery_create(kind=Kind.K8S_UNCORDON, event=Event.ACCEPTED, node=node,
                            payload={"node_name": kubernetes_name})
