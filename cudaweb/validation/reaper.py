"""Runs nobody is working on: a RUNNING run whose worker died, a PENDING run the queue lost. Each ends with a reason
or runs again; none stays live for good. Called by the worker's own reaper thread and by beat."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from cudaweb.validation import dbretry, queue, report_spool
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish, run_store_report, task_budget_s

log = logging.getLogger(__name__)
Status = ValidationRun.Status
MAX_ENQUEUES = 2
SPOOL_MIN_AGE_S = 10  # a worker holds its kept report while it stores it (report_spool); this spares a fresh one too


def run_lost(*, run_id, reason):
    """A run whose worker died: INTERRUPTED with the reason, and run once more (linked to it) unless it was
    itself such a retry. Returns the retry, or None. The end and the retry are one transaction, tried again
    over a dropped connection."""
    found = dbretry.retrying(_run_lost_record, run_id=run_id, reason=reason, what="loss of run %s" % run_id)
    if found is None:
        return None
    run, retry = found
    try:
        queue.enqueue(retry, task_budget_s(retry))
    except queue.BrokerUnavailable as exc:
        run_finish(run=retry, status=Status.INTERRUPTED, reason="could not be queued again: %s" % exc,
                   from_statuses=(Status.PENDING,))
    return retry


@transaction.atomic
def _run_lost_record(*, run_id, reason):
    run = ValidationRun.objects.select_related("node").filter(id=run_id).first()
    if run is None or not run_finish(run=run, status=Status.INTERRUPTED, reason=reason):
        return None
    if run.retry_of_id is not None:
        return None
    return run, ValidationRun.objects.create(node=run.node, mode=run.mode, requested_by=run.requested_by,
                                             trigger=run.trigger, retry_of=run, burnin_seconds=run.burnin_seconds)


def reports_sweep(*, min_age_s=SPOOL_MIN_AGE_S):
    """Store the reports this host's workers kept but could not store (the database was away longer than their
    retries): each with its check rows, its run RUNNING or DASHBOARD_ERROR until then. Returns how many."""
    stored = 0
    for run_id, report, age_s in report_spool.reports_kept():
        if age_s < min_age_s:
            continue
        with report_spool.report_claimed(run_id=run_id) as claimed:
            if claimed:
                stored += _kept_report_store(run_id, report)
    return stored


def _kept_report_store(run_id, report):
    """Store one kept report this reaper holds; 1 if it did."""
    run = ValidationRun.objects.filter(id=run_id).only("id", "node_id", "status").first()
    if run is None or run.status not in (Status.RUNNING, Status.DASHBOARD_ERROR):
        report_spool.report_drop(run_id=run_id)  # stored, or the run ended otherwise
        return 0
    try:
        run_store_report(run=run, report=report, from_statuses=(Status.RUNNING, Status.DASHBOARD_ERROR),
                         reason_note=" (stored by the reaper: the database was away when the run ended)")
    except dbretry.RETRYABLE:
        raise  # the database is away again: the next sweep tries
    except (DatabaseError, KeyError, TypeError, ValueError) as exc:  # this report cannot be stored
        log.exception("kept report of run %s could not be stored; it stays with the run", run_id)
        run_finish(run=run, status=Status.DASHBOARD_ERROR, report=report,
                   reason="the dashboard could not store the agent's report (%s: %s); the report is kept" % (
                       type(exc).__name__, exc))
        report_spool.report_drop(run_id=run_id)
        return 0
    log.warning("run %s: its kept report is stored", run_id)
    report_spool.report_drop(run_id=run_id)
    return 1


def runs_reap(*, now=None):
    """Store the reports kept while the database was away, then end or retry the runs nobody works on;
    {"stored": n, "interrupted": n, "requeued": n, "lost": n}."""
    now = now or timezone.now()
    counts = {"stored": reports_sweep(), "interrupted": 0, "requeued": 0, "lost": 0}
    cutoff = now - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S)
    for run in ValidationRun.objects.filter(status=Status.RUNNING, heartbeat__lt=cutoff).only("id", "heartbeat"):
        run_lost(run_id=run.id, reason="no sign of life from the worker since %s: the worker was killed or lost" %
                 run.heartbeat.isoformat())
        counts["interrupted"] += 1
    waiting = list(ValidationRun.objects.select_related("node").filter(
        status=Status.PENDING, created__lt=now - timedelta(seconds=settings.CUDAWEB_PENDING_CHECK_S)))
    if not waiting:
        return counts
    held = queue.broker_holds([run.id for run in waiting])
    for run in waiting:
        queued_at = run.enqueued or run.created
        if held is not None and str(run.id) in held:
            continue  # still in the queue: workers are busy, not lost
        if held is None and queued_at > now - timedelta(seconds=settings.CUDAWEB_PENDING_MAX_S):
            continue  # the broker cannot be asked: only a long wait says the task is lost
        if run.enqueue_count < MAX_ENQUEUES:
            try:
                queue.enqueue(run, task_budget_s(run))
                counts["requeued"] += 1
                log.warning("run %s was PENDING with no task in the queue: queued again", run.id)
                continue
            except queue.BrokerUnavailable:
                pass  # ended below when the broker stays away
        if run.enqueue_count >= MAX_ENQUEUES or held is None:
            counts["lost"] += run_finish(run=run, status=Status.INTERRUPTED, from_statuses=(Status.PENDING,),
                                         reason="queued %d time(s) and never taken by a worker: the task queue lost "
                                                "it (Redis restarted?) or no worker is running" % run.enqueue_count)
    return counts
