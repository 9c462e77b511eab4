"""The loop's Celery tasks: thin, the work is in watch, remediation and services."""

from celery import shared_task
from django.conf import settings

from cudaweb.health import remediation, watch


@shared_task(ignore_result=True)
def watch_due():
    """Beat, every few seconds: queue a look at each node that is due."""
    for node_id, due in watch.nodes_due():
        watch_node.apply_async(args=[str(node_id), due.isoformat()], expires=settings.CUDAWEB_WATCH_INTERVAL_S)
    watch.SESSIONS.reap(settings.CUDAWEB_WATCH_SESSION_IDLE_S)


@shared_task(ignore_result=True, acks_late=False, soft_time_limit=120, time_limit=150)
def watch_node(node_id, due=None):
    # acks_late off: a look lost with its worker is simply the next slot's (never two looks for one slot)
    watch.look(node_id)


@shared_task(ignore_result=True, acks_late=False)
def run_action(action_id):
    # claimed by a conditional UPDATE inside: a redelivered task finds the rung taken and does nothing
    remediation.action_run(action_id)


@shared_task(ignore_result=True)
def sweep_actions():
    remediation.actions_sweep()
