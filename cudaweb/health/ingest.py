"""A watch report (agents/cudaprobe/schema.json, "mode": "watch") -> health events -> the state machine.

The report is host output: untrusted. Only the fields named here are read, each capped; a report that is not the
agent's schema is refused whole (ReportRefused), nothing stored."""

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.common.dbretry import retrying
from cudaweb.health import machine, services, signatures
from cudaweb.health.models import EVIDENCE_CAP, SUMMARY_CAP, HealthEvent, LoopAction, NodeLoop
from cudaweb.validation.hostoutput import text_for_db
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)
MAX_CHECKS = 200
MAX_SIGNATURES = 16  # a check's signatures, and the GPUs a finding names (8 GPUs, each split in at most 7 MIG parts)
MAX_GPUS = 64
MAX_COUNTERS = 1000
# NVIDIA's GPU and MIG UUIDs (nvidia-smi -L): anything else a report names is no GPU of ours to act on
GPU_UUID = re.compile(r"\A(GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
SEVERITY = {"fail": HealthEvent.Severity.FAIL, "warn": HealthEvent.Severity.WARN}
WATCH_LAYERS = ("L0", "L1")  # with the fabric checks: what a look runs, and what of a run the loop reads
JUDGED = (ValidationRun.Status.PASSED, ValidationRun.Status.WARNED, ValidationRun.Status.FAILED)


class ReportRefused(ValueError):
    """Not a watch report of the agent's schema."""


@dataclass
class Ingested:
    new: list = field(default_factory=list)
    grown: list = field(default_factory=list)
    closed: int = 0
    root_cause: str = ""
    transition: object = None
    dropped: int = 0  # findings past the report's cap, or new events past the node's cap a day


def _text(value, cap):
    return text_for_db(value if isinstance(value, str) else "")[:cap]


def _gpus(check):
    """The GPUs a finding names: `gpus` as a list of {"uuid": ...} objects or of UUID strings; [""] for the node.
    Only NVIDIA's UUID form names a GPU (an index or free text could point a reset at another GPU)."""
    found = []
    for item in check.get("gpus") or ():
        uuid = item.get("uuid") if isinstance(item, dict) else item
        if isinstance(uuid, str) and GPU_UUID.match(uuid) and uuid not in found:
            found.append(uuid)
    return found or [""]


def _signatures(check):
    """The signatures of a check a finding is made of: short strings, at most MAX_SIGNATURES."""
    return [s for s in (check.get("signatures") or ()) if isinstance(s, str) and 0 < len(s) <= 64][:MAX_SIGNATURES]


def findings(report, limit=None):
    """[(check, gpu_uuid, signature, severity, summary, evidence)] of a report's checks that did not pass or that
    carry a signature, the first `limit` of them in the report's order (layer order: the root cause first).
    Raises ReportRefused."""
    if not isinstance(report, dict) or not str(report.get("schema", "")).startswith("cudaprobe/"):
        raise ReportRefused("not a cudaprobe report (no \"schema\": \"cudaprobe/...\")")
    if report.get("mode") != "watch":
        raise ReportRefused("a watch report has \"mode\": \"watch\" (this one: %r)" % str(report.get("mode"))[:20])
    checks = report.get("checks")
    if not isinstance(checks, list) or len(checks) > MAX_CHECKS:
        raise ReportRefused("\"checks\" must be a list of at most %d checks" % MAX_CHECKS)
    out = []
    for check in checks:
        if not isinstance(check, dict) or not isinstance(check.get("id"), str):
            raise ReportRefused("every check is an object with an \"id\"")
        names = _signatures(check)
        status = check.get("status")
        if status not in SEVERITY and not names:
            continue
        severity = SEVERITY.get(status, HealthEvent.Severity.INFO)
        for name in names or ["%s_%s" % (check["id"][:40].replace(".", "_"), status)]:
            for gpu in _gpus(check)[:MAX_GPUS]:
                if limit is not None and len(out) >= limit:
                    return out
                out.append((_text(check["id"], 64), gpu, text_for_db(name), severity,
                            _text(check.get("summary"), SUMMARY_CAP), _text(check.get("evidence"), EVIDENCE_CAP)))
    return out


def findings_count(report):
    """How many findings a report holds (what findings() would give without a limit), counted without building them."""
    total = 0
    for check in report.get("checks") or ():
        names = _signatures(check)
        if check.get("status") in SEVERITY or names:
            total += max(1, len(names)) * len(_gpus(check)[:MAX_GPUS])
    return total


def fabric_counters(report):
    """{check id: {counter: value}} of a watch report's fabric checks that ran: the per-link and per-port error
    counters (their keys hold a '.'), zeros left out, as validation's fabric_previous keeps them for a run. The next
    look gets them as --fabric-previous, so that a counter that grew between two looks is named. Host output: only
    numbers under short keys are kept, at most MAX_COUNTERS."""
    found, kept = {}, 0
    for check in report.get("checks") or ():
        if not isinstance(check, dict) or not str(check.get("id", "")).startswith("fabric.") or \
                check.get("status") not in ("pass", "warn", "fail") or len(check["id"]) > 64:
            continue
        metrics = check.get("metrics") if isinstance(check.get("metrics"), dict) else {}
        counters = {}
        for key, value in metrics.items():
            if kept < MAX_COUNTERS and isinstance(key, str) and "." in key and len(key) <= 64 and \
                    isinstance(value, (int, float)) and not isinstance(value, bool) and value:
                counters[key] = value
                kept += 1
        found[check["id"]] = counters
    return found


class _NewEventRoom:
    """How many events a node may still open today (CUDAWEB_NODE_NEW_EVENTS_PER_DAY), counted once, and only when a
    report would open one: a node that comes and goes with made-up findings cannot grow the store without end."""

    def __init__(self, node, now):
        self.node, self.now, self.used, self._opened = node, now, 0, None

    def has_room(self):
        if self._opened is None:
            since = self.now - timedelta(days=1)
            self._opened = HealthEvent.objects.filter(node=self.node, last_seen__gte=since,
                                                      first_seen__gte=since).count()
        return self._opened + self.used < settings.CUDAWEB_NODE_NEW_EVENTS_PER_DAY


def _event_upsert(node, finding, now, *, may_open=lambda: True):
    """Grow the open event of this (GPU, check, signature), else open one (where `may_open()`). Returns (event,
    created); (None, False) when it would open one and may not."""
    check, gpu, name, severity, summary, evidence = finding
    key = dict(node=node, gpu_uuid=gpu, check_id=check, signature=name, open=True)
    for _ in range(2):
        if HealthEvent.objects.filter(**key).update(count=F("count") + 1, last_seen=now, evidence=evidence,
                                                    summary=summary, severity=severity):
            return HealthEvent.objects.get(**key), False
        if not may_open():
            return None, False
        try:
            with transaction.atomic():
                return HealthEvent.objects.create(first_seen=now, last_seen=now, severity=severity, summary=summary,
                                                  evidence=evidence, klass=signatures.event_class(name), **key), True
        except IntegrityError:  # another look of this node opened it a moment ago: grow that one
            continue
    raise RuntimeError("could not record the event %s of %s" % (name, node.name))


def _at_rest(node):
    """The node is ready, and ready in shadow mode too: a clean look has nothing for the machine to decide."""
    states = NodeLoop.objects.filter(node=node).values_list("state", "shadow_state").first()
    ready = machine.step(machine.Loop(state=machine.READY), machine.Stimulus(machine.LOOK, clean=True)).to is None
    return ready and states in (None, (machine.READY, machine.READY))


def report_ingest(node, report, *, now=None, source="look"):
    """Store a watch report's findings as events and hand the node's state machine what they mean: a hardware
    finding (the root cause among them), else a clean look. Application Xids and observations only add events.
    `source`: "look" (the dashboard's own look over SSH), "node" (the node's own report, with its credential) or
    "run" (a validation run's L0-L1 and fabric checks), for the audit log. What one report can store is bounded: CUDAWEB_NODE_REPORT_MAX_FINDINGS findings, and no new
    event past CUDAWEB_NODE_NEW_EVENTS_PER_DAY opened on the node in a day. Returns an Ingested."""
    now = now or timezone.now()
    result = Ingested()
    seen = set()
    hardware = []
    cap = settings.CUDAWEB_NODE_REPORT_MAX_FINDINGS
    kept = findings(report, limit=cap)
    result.dropped = findings_count(report) - len(kept)
    with transaction.atomic():
        room = _NewEventRoom(node, now)
        for finding in kept:
            event, created = _event_upsert(node, finding, now, may_open=room.has_room)
            if event is None:
                result.dropped += 1
                continue
            room.used += created
            (result.new if created else result.grown).append(event)
            seen.add(event.id)
            if event.klass == HealthEvent.Klass.HARDWARE:
                hardware.append(event)
        # what this look no longer shows is over: the next sighting opens a new event
        result.closed = HealthEvent.objects.filter(node=node, open=True).exclude(id__in=seen).update(open=False)
        counters = fabric_counters(report)
        if not NodeLoop.objects.filter(node=node).update(last_watch_at=now, watch_error="", watch_counters=counters):
            NodeLoop.objects.get_or_create(node=node, defaults={"last_watch_at": now, "watch_counters": counters})
        if result.new or result.closed:
            audit.record("node.report", obj=node, source=source, closed=result.closed, dropped=result.dropped,
                         opened=["%s %s%s" % (e.check_id, e.signature, " GPU %s" % e.gpu_uuid if e.gpu_uuid else "")
                                 for e in result.new[:20]], opened_count=len(result.new))
    result.root_cause = signatures.root_cause([e.signature for e in hardware])
    if not result.root_cause and _at_rest(node):
        return result  # a clean look at a ready node: the machine has nothing to decide (most looks, at scale)
    # the decision is one transaction, tried again whole over a dropped database connection (a look's events are
    # kept already: a blink here costs no event, and the decision is the same on its second try)
    if result.root_cause:
        cause_event = next(e for e in hardware if e.signature == result.root_cause)
        result.transition = retrying(services.apply, node,
                                     machine.Stimulus(machine.FINDING, signature=result.root_cause),
                                     event=cause_event, now=now, what="loop decision for %s" % node.name)
    else:
        result.transition = retrying(services.apply, node, machine.Stimulus(machine.LOOK, clean=True), now=now,
                                     what="loop decision for %s" % node.name)
    if source != "run":  # a run's failure has its own webhook (run_failed): one message for one fault
        _webhook_new_events(node, result.new)
    return result


def _webhook_new_events(node, new):
    """One webhook per node per look: its new failing or hardware events together (a report of many findings is
    one message, not one each)."""
    told = [e for e in new if e.severity == HealthEvent.Severity.FAIL or e.klass == HealthEvent.Klass.HARDWARE]
    if not told:
        return
    from cudaweb.hooks.services import loop_webhook

    lines = ["%s %s%s: %s" % (e.check_id, e.signature, " on GPU %s" % e.gpu_uuid if e.gpu_uuid else "", e.summary)
             for e in told[:10]]
    more = " (and %d more)" % (len(told) - 10) if len(told) > 10 else ""
    klasses = sorted({e.klass for e in told})
    loop_webhook(event="health_event", node=node,
                 headline="has %s new %s event%s" % (len(told), " and ".join(klasses), "" if len(told) == 1 else "s"),
                 cause="; ".join(lines) + more)


def run_as_look(report):
    """The part of a run's report a look would have: its L0-L1 and fabric checks, as a watch report."""
    checks = [c for c in (report.get("checks") or ()) if isinstance(c, dict) and (
        c.get("layer") in WATCH_LAYERS or str(c.get("id", "")).startswith("fabric."))]
    return {"schema": report.get("schema"), "mode": "watch", "checks": checks}


def on_run_finished(sender, run_id, status, **kwargs):
    """Receiver of validation.signals.run_finished: a run's hardware findings are a look's for the loop (a scheduled
    or an operator's run that fails at L1 with an Xid 79 makes the node suspect, as a look would), once the run's end
    has committed. A re-validation rung's own run is not: its verdict is the rung's outcome."""
    if status not in JUDGED or LoopAction.objects.filter(run_id=run_id).exists():
        return
    run = ValidationRun.objects.select_related("node").only("report", "node").get(id=run_id)
    if not isinstance(run.report, dict):
        return
    transaction.on_commit(lambda: _run_ingest(run.node, run_as_look(run.report)), robust=True)


def _run_ingest(node, look):
    try:
        report_ingest(node, look, source="run")
    except ReportRefused as exc:
        log.warning("the run of %s gave the loop nothing to read: %s", node.name, exc)
