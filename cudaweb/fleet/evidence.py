"""The RMA evidence bundle of an acceptance or quarantine decision: one zip with the record (JSON, its digest), the
node's recent history (JSON) and the burn-in series as CSV where there are any (bundle_holds says which), for a
vendor ticket."""

import hashlib
import io
import json
import zipfile
from datetime import timedelta

from django.utils import timezone

from cudaweb.fleet.services import acceptance_export
from cudaweb.health.models import HealthEvent, LoopAction, Transition
from cudaweb.health.services import bundle_attach
from cudaweb.validation import burnin
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.selectors import node_flakiness

HISTORY_DAYS = 30
HISTORY_RUNS = 50
SERIES_RUNS = 5  # burn-in runs of the history whose series come along, besides the record's own
# the loop's rows in an rma bundle, the newest of each kind: what a node reported is bounded in the bundle too
BUNDLE_ROWS = 500


def _history(node, now):
    """The node's runs of the last HISTORY_DAYS days (at most HISTORY_RUNS, newest first), each with its checks that
    did not pass and the checks it ran twice."""
    runs = list(ValidationRun.objects.filter(node=node, created__gte=now - timedelta(days=HISTORY_DAYS))
                .defer("raw_output", "progress", "report").order_by("-created")[:HISTORY_RUNS])
    findings = {}
    for check in CheckResult.objects.filter(run__in=runs).exclude(status__in=("pass", "skip"), retry="").only(
            "run_id", "check_id", "layer", "status", "summary", "signatures", "retry"):
        findings.setdefault(check.run_id, []).append({
            "check": check.check_id, "layer": check.layer, "status": check.status, "summary": check.summary[:500],
            "signatures": check.signatures, "retry": check.retry})
    return runs, [{"run": str(run.id), "created": run.created.isoformat(), "mode": run.mode,
                   "burnin_seconds": run.burnin_seconds, "rests_on": burnin.describe(run.mode, run.burnin_seconds),
                   "trigger": run.trigger, "status": run.status, "verdict": run.verdict, "reason": run.reason[:1000],
                   "finished": run.finished.isoformat() if run.finished else None, "metrics": run.metrics,
                   "drifted": run.drifted, "findings": findings.get(run.id, [])} for run in runs]


def rma_bundle(record, *, now=None):
    """(file name, zip bytes): record.json (the record as exported, with its digest), history.json (the node's
    recent runs, its flaky count), burnin-series.csv (the record's run, when it has a series) and series/<run>.csv for
    the recent burn-in runs that have one, and MANIFEST.json with each file's sha256."""
    now = now or timezone.now()
    node = record.node
    runs, history = _history(node, now)
    files = {
        "record.json": json.dumps(acceptance_export(record), indent=2, sort_keys=True, default=str),
        "history.json": json.dumps({"node": node.name, "since": (now - timedelta(days=HISTORY_DAYS)).isoformat(),
                                    "flaky": node_flakiness(node, now=now), "runs": history},
                                   indent=2, sort_keys=True, default=str),
    }
    files.update(_series_files(record, runs))
    manifest = {"node": node.name, "record": str(record.id), "decision": record.decision,
                "rests_on": record_rests_on(record), "made": now.isoformat()}
    return "evidence-%s-%s.zip" % (node.name, record.id), _zipped(manifest, files)


def _series_files(record, runs):
    """{name: CSV}: burnin-series.csv when the record's run has a sustained-load series, series/<run>.csv for each
    of the SERIES_RUNS newest other burn-in runs of `runs` that has one."""
    files = {}
    own = burnin.report_series((record.evidence or {}).get("report"))
    if own:
        files["burnin-series.csv"] = burnin.series_csv(own)
    burnin_runs = [run.id for run in runs if burnin.is_burnin(run.mode) and run.id != record.run_id][:SERIES_RUNS]
    for run in ValidationRun.objects.filter(id__in=burnin_runs).only("id", "report"):
        samples = burnin.report_series(run.report)
        if samples:
            files["series/%s.csv" % run.id] = burnin.series_csv(samples)
    return files


def bundle_holds(record, *, now=None):
    """What rma_bundle(record) holds, in words, for the link to it: a run without burn-in has no series, and the
    link must not promise one."""
    now = now or timezone.now()
    runs = list(ValidationRun.objects.filter(node=record.node, created__gte=now - timedelta(days=HISTORY_DAYS))
                .only("id", "mode").order_by("-created")[:HISTORY_RUNS])  # the runs _history puts in the bundle
    series = _series_files(record, runs)
    parts = ["this record", "the node's last %d days" % HISTORY_DAYS]
    if "burnin-series.csv" in series:
        parts.append("this run's burn-in series as CSV")
    earlier = len(series) - ("burnin-series.csv" in series)
    if earlier:
        parts.append("the series of %d earlier burn-in run%s as CSV" % (earlier, "" if earlier == 1 else "s"))
    holds = ", ".join(parts)
    if "burnin-series.csv" not in series:
        rests_on = record_rests_on(record)
        holds += ("; no burn-in series: its report has none" if rests_on.startswith("full + burn-in")
                  else "; no burn-in series: a %s run has none" % (rests_on or "non-burn-in"))
    return holds


def _zipped(manifest, files):
    """The bundle's bytes: MANIFEST.json (`manifest` with each file's sha256) and the files, by name."""
    manifest = dict(manifest, files={name: hashlib.sha256(text.encode()).hexdigest()
                                     for name, text in sorted(files.items())})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("MANIFEST.json", json.dumps(manifest, indent=2, sort_keys=True))
        for name, text in sorted(files.items()):
            bundle.writestr(name, text)
    return buffer.getvalue()


def record_rests_on(record):
    """"full + burn-in 30 min", "standard", ...: the mode (and burn-in length) the decision's run used."""
    run = (record.evidence or {}).get("run") or {}
    return run.get("rests_on") or burnin.describe(run.get("mode", ""), run.get("burnin_seconds"))


def _newest(rows, field):
    """The newest BUNDLE_ROWS of `rows` by `field`, oldest first."""
    return reversed(list(rows.order_by("-" + field, "-id")[:BUNDLE_ROWS]))


def loop_rma_bundle(transition, *, now=None):
    """(file name, zip bytes) for a node the loop (or an operator) sent to rma: MANIFEST.json, loop.json (the
    transitions, rungs and events of the last HISTORY_DAYS days) and history.json (its runs, as rma_bundle)."""
    now = now or timezone.now()
    node = transition.node
    since = now - timedelta(days=HISTORY_DAYS)
    runs, history = _history(node, now)
    loop = {
        "node": node.name, "state": transition.to_state, "root_cause": transition.root_cause, "why": transition.why,
        "transitions": [{"at": t.at, "from": t.from_state, "to": t.to_state, "by": t.by, "why": t.why,
                         "effects": t.effects, "event": t.event_id, "run": str(t.run_id) if t.run_id else None}
                        for t in _newest(Transition.objects.filter(node=node, shadow=False, at__gte=since), "at")],
        "actions": [{"kind": a.kind, "status": a.status, "outcome": a.outcome, "gpu": a.gpu_uuid,
                     "run": str(a.run_id) if a.run_id else None, "created": a.created, "finished": a.finished}
                    for a in _newest(LoopAction.objects.filter(node=node, created__gte=since), "created")],
        "events": [{"gpu": e.gpu_uuid, "check": e.check_id, "signature": e.signature, "class": e.klass,
                    "severity": e.severity, "first_seen": e.first_seen, "last_seen": e.last_seen, "count": e.count,
                    "summary": e.summary, "evidence": e.evidence}
                   for e in _newest(HealthEvent.objects.filter(node=node, last_seen__gte=since), "first_seen")],
    }
    files = {
        "loop.json": json.dumps(loop, indent=2, sort_keys=True, default=str),
        "history.json": json.dumps({"node": node.name, "since": since.isoformat(),
                                    "flaky": node_flakiness(node, now=now), "runs": history},
                                   indent=2, sort_keys=True, default=str),
    }
    manifest = {"node": node.name, "transition": transition.id, "decision": "rma", "made": now.isoformat()}
    return "evidence-%s-rma-%d.zip" % (node.name, transition.id), _zipped(manifest, files)


def on_node_sent_to_rma(sender, node_id, transition_id, **kwargs):
    """Receiver of health.signals.node_sent_to_rma: attach the bundle to the rma transition (once)."""
    transition = Transition.objects.select_related("node").get(id=transition_id)
    name, data = loop_rma_bundle(transition)
    bundle_attach(transition=transition, name=name, data=data)
