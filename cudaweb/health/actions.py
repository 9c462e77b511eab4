"""A rung of the ladder kept and queued: the LoopAction row made inside the machine's transition, and its task
queued by its registered name once that commits (cudaweb.health.remediation runs it)."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from cudaweb.common import dispatch
from cudaweb.common.broker import BROKER_ERRORS, PUBLISH_RETRY
from cudaweb.health import machine
from cudaweb.health.models import LoopAction

log = logging.getLogger(__name__)
RUN_ACTION = "cudaweb.health.tasks.run_action"


def timeout_s(kind):
    """How long a rung may run from its claim before the sweep ends it: its own time limit and a margin, so that a
    rung that hangs on the node is ended by its worker (timed_out: the node's) before the sweep ends one whose
    worker or database was lost (aborted: ours)."""
    if kind == machine.RESET:
        own = settings.CUDAWEB_RESET_TIMEOUT_S
    elif kind == machine.REBOOT:
        own = settings.CUDAWEB_REBOOT_TIMEOUT_S
    else:
        own = settings.CUDAWEB_AGENT_TIMEOUT["burnin" if kind == machine.REVALIDATE_BURNIN else "standard"]
    return own + settings.CUDAWEB_LOOP_ACTION_MARGIN_S


def action_start(*, node, kind, key, by, gpu_uuid="", now=None):
    """Keep the rung (inside the transition's transaction) and queue it once committed. `key` makes a second
    start of one decision a no-op; the partial unique constraint refuses a second live rung on the node."""
    now = now or timezone.now()
    try:
        with transaction.atomic():
            action = LoopAction.objects.create(node=node, kind=kind, key=key, requested_by=by, gpu_uuid=gpu_uuid,
                                               created=now, deadline=now + timedelta(seconds=timeout_s(kind)))
    except IntegrityError:
        log.warning("rung %s on %s not started twice (key %s, or one is live)", kind, node.name, key)
        return None
    transaction.on_commit(lambda: action_enqueue(action.id), robust=True)
    return action


def action_enqueue(action_id):
    try:
        dispatch.task(RUN_ACTION).apply_async(args=[action_id], retry=True, retry_policy=PUBLISH_RETRY)
    except BROKER_ERRORS as exc:  # the row stays PENDING: the sweep queues it again
        log.error("loop action %s could not be queued: %s", action_id, exc)
