"""The loop's Celery tasks: thin, the work is in watch, remediation and services."""

from celery import shared_task
from django.conf import settings

from cudaweb.health import remediation, retention, services, watch


@shared_task(ignore_result=True)
def watch_due():
    """Beat, every few seconds: queue the looks at the nodes that are due, in batches (one task's overhead serves
    many looks; the looks of a batch wait on their hosts together)."""
    due = [str(node_id) for node_id, _ in watch.nodes_due()]
    size = settings.CUDAWEB_WATCH_BATCH
    for start in range(0, len(due), size):
        watch_nodes.apply_async(args=[due[start:start + size]], expires=settings.CUDAWEB_WATCH_INTERVAL_S)
    watch.SESSIONS.reap(settings.CUDAWEB_WATCH_SESSION_IDLE_S)


@shared_task(ignore_result=True, acks_late=False, soft_time_limit=300, time_limit=330)
def watch_nodes(node_ids):
    # acks_late off: looks lost with their worker are simply the next slot's (never two looks for one slot)
    watch.look_many(node_ids)


@shared_task(ignore_result=True, acks_late=False)
def run_action(action_id):
    # claimed by a conditional UPDATE inside: a redelivered task finds the rung taken and does nothing
    remediation.action_run(action_id)


@shared_task(ignore_result=True)
def sweep_actions():
    remediation.actions_sweep()
    services.breaker_expire()


@shared_task(ignore_result=True)
def prune_events():
    """Beat, daily: closed events past their retention (CUDAWEB_EVENT_RETENTION_DAYS)."""
    retention.events_prune()
