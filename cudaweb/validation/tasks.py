"""Celery tasks, the entry points of the validation app: thin wrappers that take ids and call the services, the
reaper and the schedules (which queue tasks by their registered names, never importing this module)."""

import logging

import threading
import time

from billiard.exceptions import WorkerLostError
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_failure, task_postrun, task_prerun, worker_ready
from django.conf import settings
from django.db import close_old_connections

from cudaweb.common import dbretry
from cudaweb.validation import queue, reaper, report_spool, schedules, services
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=False)
def execute_run(run_id):
    try:
        status = services.run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        if report_spool.report_waits(run_id=run_id):
            # The agent finished in time and the limit came while its report's store waited on the database: the
            # report is the run's truth, and a reaper stores it (a TIMED_OUT run's kept report would be dropped).
            log.error("run %s: the worker's soft time limit came while its report was being stored; the report "
                      "waits in %s for the reaper", run_id, report_spool.location(run_id))
            return None
        services.run_mark_timed_out(run_id=run_id, reason="the worker's soft time limit ended the run")
        return "TIMED_OUT"
    except Exception as exc:
        # A bug of ours must not leave the run RUNNING, nor blame the agent: record it, then let Celery log it.
        log.exception("run %s failed unexpectedly", run_id)
        run = dbretry.retrying(ValidationRun.objects.filter(id=run_id).first)
        if run is not None:
            services.run_finish(run=run, status=ValidationRun.Status.DASHBOARD_ERROR,
                                reason="the dashboard failed while running it: %s: %s" % (type(exc).__name__, exc))
        raise
    return status


@shared_task(acks_late=True)
def enqueue_runs(run_ids):
    """A bulk request's runs, published from a worker (queue.enqueue_fanout)."""
    return dbretry.retrying(services.runs_enqueue, run_ids=run_ids)  # a task published twice runs once (the claim)


@shared_task
def revalidate(mode="standard", node_id=None, label="", burnin_seconds=None):
    """Beat's entry for scheduled revalidation (cudaweb.validation.schedules)."""
    return [str(run.id) for run in schedules.revalidate(mode=mode, node_id=node_id, label=label,
                                                        burnin_seconds=burnin_seconds)]


@shared_task
def prune_runs():
    return services.runs_prune(older_than_days=settings.CUDAWEB_PRUNE_DAYS, keep_last=settings.CUDAWEB_PRUNE_KEEP_LAST)


@shared_task
def reap_stale_runs():
    return reaper.runs_reap()


@task_failure.connect
def on_worker_lost(sender=None, task_id=None, exception=None, args=None, **kwargs):
    """The pool process running a run died (killed, out of memory): end the run now and run it once more, instead
    of waiting for the heartbeat to go stale. Runs in the worker's main process."""
    if getattr(sender, "name", None) == execute_run.name and isinstance(exception, WorkerLostError) and args:
        # The main process's connection may have died since its last use (a database restart): never reuse it,
        # nor leave one for the next pool process, forked from here, to inherit.
        dbretry.connection_drop()
        try:
            reaper.run_lost(run_id=args[0], reason="the worker process running it died (%s)" % exception)
        finally:
            dbretry.connection_drop()


@task_prerun.connect
@task_postrun.connect
def check_connections(sender=None, **kwargs):
    """At each task's edges a connection that errored or outlived CONN_MAX_AGE goes, and the next query checks the
    one it reuses (CONN_HEALTH_CHECKS). Celery's Django fixup closes them outright unless CELERY_DB_REUSE_MAX is
    set; this keeps a dropped connection from being reused when it is."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # run inline, in its caller's transaction: the connection is the caller's
    close_old_connections()


def _reap_forever(every_s):
    while True:
        try:
            reaper.runs_reap()
        except dbretry.RETRYABLE as exc:  # the database away for a while: try again next time
            dbretry.away_note()
            log.warning("reaping waits for the database: %s", str(exc).strip()[:200])
        except Exception:  # Redis away, or a fault of ours: try again next time
            log.exception("reaping failed")
        finally:
            dbretry.connection_drop()  # a close that fails on a dead connection must not end this thread
        time.sleep(every_s)


def _heartbeat_forever(worker_name, every_s):
    """The key /healthz looks for: this worker's main process is alive and reaches Redis."""
    client = queue.broker_client(timeout_s=5)
    while True:
        try:
            queue.worker_heartbeat_write(client, worker_name)
        except queue.BROKER_ERRORS as exc:  # Redis away for a while: /healthz says so; write again next time
            log.warning("worker heartbeat not written: %s", exc)
        time.sleep(every_s)


@worker_ready.connect
def start_heartbeat(sender=None, **kwargs):
    name = getattr(sender, "hostname", None) or "worker"
    threading.Thread(target=_heartbeat_forever, args=(name, queue.WORKER_HEARTBEAT_EVERY_S), daemon=True,
                     name="cudaweb-heartbeat").start()


@worker_ready.connect
def start_reaper(**kwargs):
    """Every worker reaps, not only beat: a worker that starts after a crash ends or retries what its predecessor
    left, and keeps doing so while it runs."""
    threading.Thread(target=_reap_forever, args=(settings.CUDAWEB_REAP_EVERY_S,), daemon=True,
                     name="cudaweb-reaper").start()
