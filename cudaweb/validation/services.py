"""The life of a validation run: request, claim, execute over a transport, store, finish, reap."""

import json
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from cudaweb.nodes.models import Node
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports import base
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.reports import ReportError, parse_report
from cudaweb.validation.signals import run_finished
from cudaweb.validation.statuses import node_status_of, run_status_of

log = logging.getLogger(__name__)
Status = ValidationRun.Status
PROGRESS_CAP = 400
TIMEOUT_EXIT_CODES = (124, 137)  # coreutils timeout: budget reached / killed after the grace period

ERROR_STATES = (
    (base.HostKeyMismatch, Status.HOST_KEY_MISMATCH),
    (base.HostKeyUnknown, Status.HOST_KEY_MISMATCH),
    (base.AuthFailed, Status.AUTH_FAILED),
    (base.Unreachable, Status.UNREACHABLE),
)


def agent_budget_s(node, mode):
    return node.agent_timeout_s or settings.CUDAWEB_AGENT_TIMEOUT[mode]


def run_request(*, node, mode=ValidationRun.Mode.QUICK, requested_by=None, trigger=ValidationRun.Trigger.MANUAL):
    """Create a PENDING run and enqueue it once the transaction commits."""
    from cudaweb.validation.tasks import execute_run

    run = ValidationRun.objects.create(node=node, mode=mode, requested_by=requested_by, trigger=trigger)
    budget = agent_budget_s(node, mode)
    transaction.on_commit(lambda: execute_run.apply_async(
        args=[str(run.id)], soft_time_limit=budget + 60, time_limit=budget + 120))
    return run


def run_claim(*, run_id):
    """PENDING -> RUNNING, exactly once: a redelivered task finds 0 rows and does nothing."""
    now = timezone.now()
    return ValidationRun.objects.filter(id=run_id, status=Status.PENDING).update(
        status=Status.RUNNING, started=now, heartbeat=now) == 1


def run_finish(*, run, status, reason="", raw_output=""):
    """Move a RUNNING run to a terminal state (only if it is still RUNNING), update its node and tell the apps
    above (signals.run_finished)."""
    now = timezone.now()
    updated = ValidationRun.objects.filter(id=run.id, status=Status.RUNNING).update(
        status=status, reason=reason[:10000], raw_output=raw_output[: settings.CUDAWEB_OUTPUT_CAP], finished=now)
    if not updated:
        return False
    node_status = node_status_of(status)
    if node_status:
        Node.objects.filter(id=run.node_id).exclude(status=Node.Status.QUARANTINED).update(status=node_status)
    run_finished.send(sender=ValidationRun, run_id=run.id, status=status)
    return True


def _progress_recorder(run):
    events = []

    def record(line):
        try:
            event = json.loads(line)
        except ValueError:
            return  # stray stderr text: kept in the capped stderr copy, not a progress event
        if not isinstance(event, dict) or "event" not in event:
            return
        events.append({k: event[k] for k in ("event", "id", "layer", "status", "summary", "title", "t", "verdict")
                       if k in event})
        ValidationRun.objects.filter(id=run.id).update(progress=events[-PROGRESS_CAP:], heartbeat=timezone.now())

    return record


@transaction.atomic
def run_store_report(*, run, report):
    """Keep the report and one CheckResult row per check; the verdict decides the terminal state."""
    status = run_status_of(report["verdict"])
    CheckResult.objects.bulk_create([
        CheckResult(run=run, position=i, check_id=c["id"], layer=c["layer"], title=c["title"], status=c["status"],
                    summary=c["summary"], duration_s=c["duration_s"], metrics=c["metrics"], evidence=c["evidence"],
                    signatures=c["signatures"], blocked_by=c["blocked_by"] or "")
        for i, c in enumerate(report["checks"])
    ])
    ValidationRun.objects.filter(id=run.id).update(report=report, agent_version=report["agent_version"],
                                                   verdict=report["verdict"])
    run_finish(run=run, status=status, reason="agent verdict: %s" % report["verdict"])
    return status


def run_execute(*, run_id):
    """Claim the run and carry it to a terminal state; every failure path is named and recorded."""
    if not run_claim(run_id=run_id):
        return None
    run = ValidationRun.objects.select_related("node", "node__credential").get(id=run_id)
    node = run.node
    budget = agent_budget_s(node, run.mode)
    agent_args = ["--mode", run.mode, "--json"]
    previous = (ValidationRun.objects.filter(node=node, status__in=ValidationRun.VERDICT_STATUSES,
                                             finished__lt=run.created).order_by("-finished").only("finished").first())
    if previous is not None:  # kernel-log Xid errors from before it are history, not a failure of this run
        agent_args += ["--since", previous.finished.isoformat()]
    payload, digest = bundle.build()
    try:
        with Heartbeat(run.id), transport_for(node) as transport:
            agent_path = transport.upload_agent(payload, digest)
            result = transport.run_agent(node.python_path, agent_path, agent_args, budget,
                                         on_stderr_line=_progress_recorder(run))
    except base.TimedOut as exc:
        run_finish(run=run, status=Status.TIMED_OUT, reason=str(exc), raw_output=exc.stdout + "\n" + exc.stderr)
        return Status.TIMED_OUT
    except base.TransportError as exc:
        status = next(state for cls, state in ERROR_STATES if isinstance(exc, cls))
        run_finish(run=run, status=status, reason=str(exc))
        return status
    if result.exit_status in TIMEOUT_EXIT_CODES:
        run_finish(run=run, status=Status.TIMED_OUT, reason="the agent ran past its %d s budget and was killed on "
                   "the host" % budget, raw_output=result.stdout + "\n" + result.stderr)
        return Status.TIMED_OUT
    try:
        report = parse_report(result.stdout)
    except ReportError as exc:
        reason = "%s (agent exit status %s%s)" % (exc, result.exit_status, ", output truncated" if result.truncated
                                                    else "")
        run_finish(run=run, status=Status.AGENT_ERROR, reason=reason,
                   raw_output=result.stdout + ("\n--- stderr ---\n" + result.stderr if result.stderr else ""))
        return Status.AGENT_ERROR
    return run_store_report(run=run, report=report)


def run_mark_timed_out(*, run_id, reason):
    run = ValidationRun.objects.filter(id=run_id).only("id", "node_id").first()
    return run is not None and run_finish(run=run, status=Status.TIMED_OUT, reason=reason)


def runs_reap_stale(*, now=None):
    """RUNNING runs whose worker went silent (killed, host lost) end as INTERRUPTED; returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S)
    stale = ValidationRun.objects.filter(status=Status.RUNNING, heartbeat__lt=cutoff)
    count = 0
    for run in stale.only("id", "node_id", "heartbeat"):
        count += run_finish(run=run, status=Status.INTERRUPTED, reason=(
            "no sign of life from the worker since %s: the worker was killed or lost" % run.heartbeat.isoformat()))
    return count


class Heartbeat:
    """Touch the run's heartbeat while a worker holds it, so the reaper can tell a live run from a lost one."""

    def __init__(self, run_id, every_s=15):
        self.run_id = run_id
        self.every_s = every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self):
        try:
            while not self.stop.wait(self.every_s):
                ValidationRun.objects.filter(id=self.run_id, status=Status.RUNNING).update(heartbeat=timezone.now())
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
