"""Celery tasks: thin wrappers that take ids and call the services."""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready

from cudaweb.validation import services

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=False)
def execute_run(run_id):
    try:
        status = services.run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        services.run_mark_timed_out(run_id=run_id, reason="the worker's soft time limit ended the run")
        return "TIMED_OUT"
    except Exception as exc:
        # A bug must not leave the run RUNNING: record it, then let Celery log the traceback.
        log.exception("run %s failed unexpectedly", run_id)
        from cudaweb.validation.models import ValidationRun

        run = ValidationRun.objects.filter(id=run_id).first()
        if run is not None:
            services.run_finish(run=run, status=ValidationRun.Status.AGENT_ERROR,
                                reason="internal error while running: %s: %s" % (type(exc).__name__, exc))
        raise
    return status


@shared_task
def revalidate(mode="standard", node_id=None, label=""):
    """Beat's entry for scheduled revalidation (cudaweb.validation.schedules)."""
    from cudaweb.validation import schedules

    return [str(run.id) for run in schedules.revalidate(mode=mode, node_id=node_id, label=label)]


@shared_task
def reap_stale_runs():
    return services.runs_reap_stale()


@worker_ready.connect
def reap_on_start(**kwargs):
    """A worker that starts after a crash ends the runs its predecessor left RUNNING."""
    count = services.runs_reap_stale()
    if count:
        log.warning("marked %d stale run(s) INTERRUPTED", count)
