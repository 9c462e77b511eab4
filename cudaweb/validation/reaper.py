"""Runs nobody is working on: a RUNNING run whose worker died, a PENDING run the queue lost. Each ends with a reason
or runs again; none stays live for good. Called by the worker's own reaper thread and by beat."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from cudaweb.common import dbretry
from cudaweb.validation import queue, report_spool, reports
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish, run_store_report, task_budget_s

log = logging.getLogger(__name__)
Status = ValidationRun.Status
MAX_ENQUEUES = 2
MAX_ENQUEUES_AFTER_WORKER_DEATH = 5  # a worker killed while it held the run's message, again
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


# A kept report is stored on a run still waiting for it, or on one ended meanwhile by a reaper that judged it lost
# (the report is what the agent measured: the truth of the run). A run ended any other way keeps what it has.
STORABLE = (Status.RUNNING, Status.DASHBOARD_ERROR, Status.INTERRUPTED)
STORED_NOTE = " (stored by the reaper: the database was away when the run ended)"


def reports_sweep(*, min_age_s=SPOOL_MIN_AGE_S):
    """Store the reports this host's workers kept but could not store (the database was away longer than their
    retries), each with its check rows, then those kept only in their run's column (a DASHBOARD_ERROR whose worker's
    host may never come back). One report that cannot be stored is set aside (quarantined, named in the log and on its
    run) and the others go on. Returns how many were stored."""
    waiting = [(run_id, age_s) for run_id, age_s in report_spool.reports_waiting() if age_s >= min_age_s]
    stored = 0
    if waiting:
        statuses = dict(ValidationRun.objects.filter(id__in=[run_id for run_id, _ in waiting]).values_list(
            "id", "status"))  # one query: the file names are the spool's index, nothing is parsed for a done run
        for run_id, _ in waiting:
            with report_spool.report_claimed(run_id=run_id) as claimed:
                if not claimed:
                    continue
                if statuses.get(run_id) not in STORABLE:
                    report_spool.report_drop(run_id=run_id)  # stored, or the run ended otherwise (or is gone)
                    continue
                stored += _kept_report_store(run_id)
    return stored + _column_reports_store(min_age_s=min_age_s)


def _kept_report_store(run_id):
    """Store one kept report this reaper holds; 1 if it did. A database away raises (the next sweep tries again);
    anything else sets the report aside for good."""
    run = ValidationRun.objects.filter(id=run_id).only("id", "node_id", "status", "report").first()
    if run is None or run.status not in STORABLE:
        report_spool.report_drop(run_id=run_id)
        return 0
    try:
        report = report_spool.report_read(run_id=run_id)
    except (OSError, ValueError) as exc:  # truncated, not JSON: set aside once, never an error every pass
        moved = report_spool.report_quarantine(run_id=run_id, why=exc)
        if run.status == Status.DASHBOARD_ERROR and isinstance(run.report, dict):
            return _column_report_store(run, note=" (stored by the reaper from the run's own copy: the spool's, %s, "
                                        "was unreadable)" % moved)
        run_finish(run=run, status=Status.DASHBOARD_ERROR, from_statuses=STORABLE,
                   reason="the agent's report was kept in the worker's spool, but the file cannot be read (%s); it "
                          "is set aside in %s" % (exc, moved))
        return 0
    problem = reports.report_problem(report)
    if problem:  # kept by a worker that did not check it (an older version), or altered since: the agent's error
        moved = report_spool.report_quarantine(run_id=run_id, why=problem)
        run_finish(run=run, status=Status.AGENT_ERROR, from_statuses=STORABLE,
                   reason="%s; the kept report is set aside in %s" % (problem, moved))
        return 0
    try:
        run_store_report(run=run, report=report, from_statuses=STORABLE, reason_note=STORED_NOTE)
    except dbretry.RETRYABLE:
        raise  # the database is away again: the next sweep tries
    except Exception as exc:  # this report cannot be stored: set it aside and go on with the others
        moved = report_spool.report_quarantine(run_id=run_id, why="%s: %s" % (type(exc).__name__, exc))
        log.exception("kept report of run %s could not be stored; set aside in %s", run_id, moved)
        _unstorable(run, report, exc, moved)
        return 0
    log.warning("run %s: its kept report is stored", run_id)
    report_spool.report_drop(run_id=run_id)
    return 1


def _unstorable(run, report, error, moved):
    """End a run whose report the database refuses DASHBOARD_ERROR, with the report in its column if the database
    takes even that, and say where the file is."""
    reason = "the dashboard could not store the agent's report (%s: %s); it is set aside in %s" % (
        type(error).__name__, str(error)[:500], moved)
    try:
        run_finish(run=run, status=Status.DASHBOARD_ERROR, report=report, from_statuses=STORABLE,
                   reason=reason + " and kept with the run")
    except dbretry.RETRYABLE:
        raise
    except Exception:  # the report itself is what the database refuses
        log.exception("run %s: not even the run's own copy of the report can be written", run.id)
        run_finish(run=run, status=Status.DASHBOARD_ERROR, from_statuses=STORABLE, reason=reason)


def _column_reports_store(*, min_age_s):
    """Store the reports kept only in their run's column (report_unstored): a worker gave up with the database away,
    and its host (and spool) may never come back. Safe beside that host's own reaper: a store is done once."""
    stored = 0
    waiting = ValidationRun.objects.filter(status=Status.DASHBOARD_ERROR, report_unstored=True,
                                           finished__lt=timezone.now() - timedelta(seconds=min_age_s))
    for run in waiting.only("id", "node_id", "status", "report")[:100]:
        stored += _column_report_store(run, note=STORED_NOTE)
    return stored


def _column_report_store(run, *, note):
    try:
        if not isinstance(run.report, dict):
            raise ValueError("the run's column holds no report")
        run_store_report(run=run, report=run.report, from_statuses=(Status.DASHBOARD_ERROR,), reason_note=note)
    except dbretry.RETRYABLE:
        raise
    except Exception as exc:  # stays DASHBOARD_ERROR with its report shown; never tried again
        log.exception("run %s: the report kept with the run cannot be stored", run.id)
        ValidationRun.objects.filter(id=run.id).update(report_unstored=False)
        run_finish(run=run, status=Status.DASHBOARD_ERROR, report=run.report if isinstance(run.report, dict) else None,
                   from_statuses=(Status.DASHBOARD_ERROR,),
                   reason="the dashboard could not store the agent's report (%s: %s); it is kept with the run" % (
                       type(exc).__name__, str(exc)[:500]))
        return 0
    log.warning("run %s: the report kept with the run is stored", run.id)
    return 1


def runs_reap(*, now=None):
    """Store the reports kept while the database was away, then end or retry the runs nobody works on;
    {"stored": n, "interrupted": n, "requeued": n, "lost": n}. A RUNNING run is judged by its heartbeat only when
    the database has answered for a whole CUDAWEB_STALE_RUN_S (heartbeats cannot be written while it is away), and
    never while its worker holds its kept report (it is alive, storing it)."""
    now = now or timezone.now()
    counts = {"stored": reports_sweep(), "interrupted": 0, "requeued": 0, "lost": 0}
    cutoff = now - timedelta(seconds=settings.CUDAWEB_STALE_RUN_S)
    away_seen = dbretry.away_last_seen()
    if away_seen is not None and away_seen > cutoff:
        log.info("silent runs not judged: the database was away until %s", away_seen.isoformat())
    else:
        for run in ValidationRun.objects.filter(status=Status.RUNNING, heartbeat__lt=cutoff).only("id", "heartbeat"):
            if report_spool.report_held(run_id=run.id):
                continue  # its worker is storing its report now
            run_lost(run_id=run.id, reason="no sign of life from the worker since %s: the worker was killed or lost"
                     % run.heartbeat.isoformat())
            counts["interrupted"] += 1
    waiting = list(ValidationRun.objects.select_related("node").filter(
        status=Status.PENDING, created__lt=now - timedelta(seconds=settings.CUDAWEB_PENDING_CHECK_S)))
    if not waiting:
        return counts
    orphans = set()
    held = queue.broker_holds([run.id for run in waiting], dead_holders=orphans)
    for run in waiting:
        queued_at = run.enqueued or run.created
        if held is not None and str(run.id) in held:
            continue  # still in the queue: workers are busy, not lost
        if held is None and queued_at > now - timedelta(seconds=settings.CUDAWEB_PENDING_MAX_S):
            continue  # the broker cannot be asked: only a long wait says the task is lost
        # A message a dead worker took was not lost by the queue: it may be queued again a few more times.
        limit = MAX_ENQUEUES_AFTER_WORKER_DEATH if str(run.id) in orphans else MAX_ENQUEUES
        if run.enqueue_count < limit:
            try:
                queue.enqueue(run, task_budget_s(run))
                counts["requeued"] += 1
                log.warning("run %s was PENDING with no task %s: queued again", run.id,
                            "a live worker holds (its worker died holding it)" if str(run.id) in orphans
                            else "in the queue")
                continue
            except queue.BrokerUnavailable:
                pass  # ended below when the broker stays away
        if run.enqueue_count >= limit or held is None:
            counts["lost"] += run_finish(run=run, status=Status.INTERRUPTED, from_statuses=(Status.PENDING,),
                                         reason="queued %d time%s and never taken by a worker: the task queue "
                                                "lost it (Redis restarted?), the workers holding it died, or no "
                                                "worker is running" % (run.enqueue_count,
                                                                       "" if run.enqueue_count == 1 else "s"))
    return counts
