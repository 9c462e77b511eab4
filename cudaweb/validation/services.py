"""The life of a validation run: request, claim, execute over a transport, store, finish, reap."""

import json
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.nodes.models import Node
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports import base
from cudaweb.validation import queue
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
    (base.HostSetupError, Status.AGENT_ERROR),  # the node's SSH setup cannot take the agent: its reason names the fix
)


def agent_budget_s(node, mode):
    return node.agent_timeout_s or settings.CUDAWEB_AGENT_TIMEOUT[mode]


def run_request(*, node, mode=ValidationRun.Mode.QUICK, requested_by=None, trigger=ValidationRun.Trigger.MANUAL,
                batch=None):
    """Queue a validation of `node`, or return the run it already has live (one live run per node: a double
    click, a bulk request over a schedule). Raises queue.BrokerUnavailable, keeping nothing, when the task queue
    does not answer."""
    (run,) = runs_request(nodes=[node], mode=mode, requested_by=requested_by, trigger=trigger, batch=batch)
    return run


def runs_request(*, nodes, mode, requested_by=None, trigger=ValidationRun.Trigger.BULK, batch=None):
    """Queue a validation of each node, in one go for a rack: one query for the live runs, one insert (a node
    another request took meanwhile is skipped by the one-live-run rule), the tasks published over one broker
    connection once the transaction commits, one update. Nodes with a live run answer with it. Raises
    queue.BrokerUnavailable, keeping none of the new runs, when the task queue does not answer."""
    nodes = list(nodes)
    live = {run.node_id: run for run in ValidationRun.objects.filter(node__in=nodes, status__in=ValidationRun.LIVE)}
    fresh = [ValidationRun(node=node, mode=mode, requested_by=requested_by, trigger=trigger, batch=batch)
             for node in nodes if node.id not in live]
    with transaction.atomic():
        ValidationRun.objects.bulk_create(fresh, ignore_conflicts=True)  # a node another request just took
    created = set(ValidationRun.objects.filter(id__in=[r.id for r in fresh]).values_list("id", flat=True))
    fresh = [run for run in fresh if run.id in created]
    for run in ValidationRun.objects.filter(node__in=nodes, status__in=ValidationRun.LIVE).exclude(id__in=created):
        live.setdefault(run.node_id, run)
    transaction.on_commit(lambda: _enqueue_or_forget(fresh, mode))  # at once, outside a transaction
    by_node = {run.node_id: run for run in fresh}
    by_node.update(live)
    _audit_request(nodes, fresh, live, mode=mode, requested_by=requested_by, trigger=trigger, batch=batch)
    return [by_node[node.id] for node in nodes if node.id in by_node]


def _audit_request(nodes, fresh, live, *, mode, requested_by, trigger, batch):
    """A person's request goes to the audit log (one event for a bulk request); beat's scheduled runs do not."""
    if trigger == ValidationRun.Trigger.SCHEDULED or not nodes:
        return
    detail = {"mode": mode, "trigger": trigger, "queued": len(fresh), "already_live": len(live)}
    if len(nodes) == 1:
        run = fresh[0] if fresh else live.get(nodes[0].id)
        audit.record("validation.requested", actor=requested_by, obj=nodes[0],
                     run=str(run.id) if run else None, **detail)
    else:
        audit.record("validation.bulk_requested", actor=requested_by, batch=batch, nodes=len(nodes),
                     names=[node.name for node in nodes[:50]], **detail)


def _enqueue_or_forget(runs, mode):
    try:
        if queue.fanout_wanted(len(runs)):
            queue.enqueue_fanout(runs)  # a worker publishes the runs' tasks (runs_enqueue)
        else:
            queue.enqueue_many([(run, agent_budget_s(run.node, mode)) for run in runs])
    except queue.BrokerUnavailable:
        ValidationRun.objects.filter(id__in=[r.id for r in runs], status=Status.PENDING).delete()  # none kept
        raise


def runs_enqueue(*, run_ids):
    """The worker's half of a fan-out: publish the tasks of those runs still PENDING and not yet queued (a
    redelivered fan-out message queues nothing twice). Returns how many were queued."""
    runs = list(ValidationRun.objects.select_related("node").filter(
        id__in=run_ids, status=Status.PENDING, enqueued__isnull=True))
    queue.enqueue_many([(run, agent_budget_s(run.node, run.mode)) for run in runs])
    return len(runs)


def run_claim(*, run_id):
    """PENDING -> RUNNING, exactly once: a redelivered task finds 0 rows and does nothing."""
    now = timezone.now()
    return ValidationRun.objects.filter(id=run_id, status=Status.PENDING).update(
        status=Status.RUNNING, started=now, heartbeat=now) == 1


def run_finish(*, run, status, reason="", raw_output="", from_statuses=(Status.RUNNING,)):
    """Move a live run to a terminal state (only if it is still in one of `from_statuses`), update its node and
    tell the apps above (signals.run_finished)."""
    now = timezone.now()
    updated = ValidationRun.objects.filter(id=run.id, status__in=from_statuses).update(
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
    run = ValidationRun.objects.select_related("node", "node__credential", "requested_by").get(id=run_id)
    node = run.node
    budget = agent_budget_s(node, run.mode)
    agent_args = ["--mode", run.mode, "--json", "--exit-with-stdin"]  # the agent stops when its worker is gone
    previous = (ValidationRun.objects.filter(node=node, status__in=ValidationRun.VERDICT_STATUSES,
                                             finished__lt=run.created).order_by("-finished").only("finished").first())
    if previous is not None:  # kernel-log Xid errors from before it are history, not a failure of this run
        agent_args += ["--since", previous.finished.isoformat()]
    payload, digest = bundle.build()
    try:
        with Heartbeat(run.id), transport_for(node, purpose="run %s" % run.id,
                                              on_behalf_of=run.requested_by) as transport:
            agent_path = transport.upload_agent(payload, digest)
            result = transport.run_agent(node.python_path, agent_path, agent_args, budget, env=node.agent_env(),
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
    try:
        return run_store_report(run=run, report=report)
    except DatabaseError as exc:  # our failure, not the agent's: keep the report for a look, name the cause
        log.exception("run %s: storing the report failed", run_id)
        run_finish(run=run, status=Status.DASHBOARD_ERROR, raw_output=result.stdout,
                   reason="the dashboard could not store the agent's report (%s: %s); the report is kept below" % (
                       type(exc).__name__, exc))
        return Status.DASHBOARD_ERROR


def run_mark_timed_out(*, run_id, reason):
    run = ValidationRun.objects.filter(id=run_id).only("id", "node_id").first()
    return run is not None and run_finish(run=run, status=Status.TIMED_OUT, reason=reason)


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
                try:
                    ValidationRun.objects.filter(id=self.run_id, status=Status.RUNNING).update(
                        heartbeat=timezone.now())
                except DatabaseError as exc:  # a dropped connection: reconnect on the next beat, never stop
                    log.warning("heartbeat of run %s not written: %s", self.run_id, exc)
                    connection.close()
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def runs_prune(*, older_than_days, keep_last=10, now=None, nodes_per_batch=200):
    """Delete finished runs (their check rows go with them) older than `older_than_days`, keeping each node's
    `keep_last` newest runs, its baseline and last run, and every run an acceptance record rests on. Works through
    the nodes a batch at a time, so memory stays bounded however long the history. Returns how many runs went."""
    now = now or timezone.now()
    protected = (set(Node.objects.exclude(baseline=None).values_list("baseline", flat=True))
                 | set(Node.objects.exclude(last_run=None).values_list("last_run", flat=True)))
    node_ids = list(Node.objects.order_by("id").values_list("id", flat=True))
    deleted = 0
    for start in range(0, len(node_ids), nodes_per_batch):
        # Ranked over all of a node's runs first: a window sees only the rows its own query's filters leave.
        beyond_newest = ValidationRun.objects.filter(node_id__in=node_ids[start:start + nodes_per_batch]).annotate(
            newest=Window(RowNumber(), partition_by=[F("node_id")], order_by=F("created").desc())
        ).filter(newest__gt=keep_last).values_list("id", flat=True)
        doomed = (ValidationRun.objects.filter(id__in=list(beyond_newest),
                                               created__lt=now - timedelta(days=older_than_days))
                  .exclude(status__in=ValidationRun.LIVE).exclude(acceptance_records__isnull=False))
        ids = [run_id for run_id in doomed.values_list("id", flat=True) if run_id not in protected]
        if ids:
            deleted += ValidationRun.objects.filter(id__in=ids).delete()[1].get("validation.ValidationRun", 0)
    return deleted
