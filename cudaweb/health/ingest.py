"""A watch report (agents/cudaprobe/schema.json, "mode": "watch") -> health events -> the state machine.

The report is host output: untrusted. Only the fields named here are read, each capped; a report that is not the
agent's schema is refused whole (ReportRefused), nothing stored."""

from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from cudaweb.common.dbretry import retrying
from cudaweb.health import machine, services, signatures
from cudaweb.health.models import EVIDENCE_CAP, SUMMARY_CAP, HealthEvent, NodeLoop
from cudaweb.validation.hostoutput import text_for_db

MAX_CHECKS = 200
MAX_FINDINGS = 500
MAX_COUNTERS = 1000
SEVERITY = {"fail": HealthEvent.Severity.FAIL, "warn": HealthEvent.Severity.WARN}


class ReportRefused(ValueError):
    """Not a watch report of the agent's schema."""


@dataclass
class Ingested:
    new: list = field(default_factory=list)
    grown: list = field(default_factory=list)
    closed: int = 0
    root_cause: str = ""
    transition: object = None


def _text(value, cap):
    return text_for_db(value if isinstance(value, str) else "")[:cap]


def _gpus(check):
    """The GPUs a finding names: `gpus` as a list of {"uuid": ...} objects or of UUID strings; [""] for the node."""
    found = []
    for item in check.get("gpus") or ():
        uuid = item.get("uuid") if isinstance(item, dict) else item
        if isinstance(uuid, str) and uuid and len(uuid) <= 64:
            found.append(text_for_db(uuid))
    return found or [""]


def findings(report):
    """[(check, gpu_uuid, signature, severity, summary, evidence)] of a report's checks that did not pass or that
    carry a signature. Raises ReportRefused."""
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
        names = [s for s in (check.get("signatures") or ()) if isinstance(s, str) and 0 < len(s) <= 64]
        status = check.get("status")
        if status not in SEVERITY and not names:
            continue
        severity = SEVERITY.get(status, HealthEvent.Severity.INFO)
        for name in names or ["%s_%s" % (check["id"][:40].replace(".", "_"), status)]:
            for gpu in _gpus(check):
                out.append((_text(check["id"], 64), gpu, text_for_db(name), severity,
                            _text(check.get("summary"), SUMMARY_CAP), _text(check.get("evidence"), EVIDENCE_CAP)))
    return out[:MAX_FINDINGS]


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


def _event_upsert(node, finding, now):
    """Grow the open event of this (GPU, check, signature), else open one. Returns (event, created)."""
    check, gpu, name, severity, summary, evidence = finding
    key = dict(node=node, gpu_uuid=gpu, check_id=check, signature=name, open=True)
    for _ in range(2):
        if HealthEvent.objects.filter(**key).update(count=F("count") + 1, last_seen=now, evidence=evidence,
                                                    summary=summary, severity=severity):
            return HealthEvent.objects.get(**key), False
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


def report_ingest(node, report, *, now=None):
    """Store a watch report's findings as events and hand the node's state machine what they mean: a hardware
    finding (the root cause among them), else a clean look. Application Xids and observations only add events.
    Returns an Ingested."""
    now = now or timezone.now()
    result = Ingested()
    seen = set()
    hardware = []
    with transaction.atomic():
        for finding in findings(report):
            event, created = _event_upsert(node, finding, now)
            (result.new if created else result.grown).append(event)
            seen.add(event.id)
            if event.klass == HealthEvent.Klass.HARDWARE:
                hardware.append(event)
        # what this look no longer shows is over: the next sighting opens a new event
        result.closed = HealthEvent.objects.filter(node=node, open=True).exclude(id__in=seen).update(open=False)
        counters = fabric_counters(report)
        if not NodeLoop.objects.filter(node=node).update(last_watch_at=now, watch_error="", watch_counters=counters):
            NodeLoop.objects.get_or_create(node=node, defaults={"last_watch_at": now, "watch_counters": counters})
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
    if result.new:
        from cudaweb.hooks.services import loop_webhook

        for event in result.new:
            if event.severity == HealthEvent.Severity.FAIL or event.klass == HealthEvent.Klass.HARDWARE:
                loop_webhook(event="health_event", node=node, headline="has a new %s event" % event.klass,
                             cause="%s %s%s: %s" % (event.check_id, event.signature,
                                                    " on GPU %s" % event.gpu_uuid if event.gpu_uuid else "",
                                                    event.summary))
    return result
