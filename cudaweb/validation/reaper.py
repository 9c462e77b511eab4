"""Runs nobody is working on: a RUNNING run whose worker died, a PENDING run the queue lost. Each ends with a reason
or runs again; none stays live for good. Called by the worker's own reaper thread and by beat."""

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish, task_budget_s

log = logging.getLogger(__name__)
Status = ValidationRun.Status
MAX_ENQUEUES = 2


def run_lost(*, run_id, reason):
    """A run whose worker died: INTERRUPTED with the reason, and run once more (linked to it) unless it was
    itself such a retry. Returns the retry, or None."""
    run = ValidationRun.objects.select_related("node").filter(id=run_id).first()
    if run is None or not run_finish(run=run, status=Status.INTERRUPTED, reason=reason):
        return None
    if run.retry_of_id is not None:
        return None
    retry = ValidationRun.objects.create(node=run.node, mode=run.mode, requested_by=run.requested_by,
                                         trigger=run.trigger, retry_of=run, burnin_seconds=run.burnin_seconds)
    try:
        queue.enqueue(retry, task_budget_s(retry))
    except queue.BrokerUnavailable as exc:
        run_finish(run=retry, status=Status.INTERRUPTED, reason="could not be queued again: %s" % exc,
                   from_statuses=(Status.PENDING,))
    return retry


def runs_reap(*, now=None):
    """End or retry the runs nobody works on; {"interrupted": n, "requeued": n, "lost": n}."""
    now = now or timezone.now()
    counts = {"interrupted": 0, "requeued": 0, "lost": 0}
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
