"""Scheduled revalidation: django-celery-beat periodic tasks that validate a node or every node with a label."""

import json

from django.db import IntegrityError, transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from cudaweb.accounts import audit
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.validation import burnin
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request

TASK = "cudaweb.validation.tasks.revalidate"
PREFIX = "cudaweb revalidate "


@transaction.atomic
def schedule_create(*, every_hours, mode, node=None, label="", burnin_seconds=None):
    """A periodic revalidation of one node or of a label's nodes, run by beat's database scheduler (burn-in mode
    with its length)."""
    if (node is None) == (not label):
        raise ValueError("schedule either one node or one label")
    interval, _ = IntervalSchedule.objects.get_or_create(every=every_hours, period=IntervalSchedule.HOURS)
    target = "node %s" % node.name if node else "label %s" % label
    kwargs = {"node_id": str(node.id)} if node else {"label": label}
    kwargs["mode"] = mode
    burnin_seconds = burnin.seconds_of(mode, burnin_seconds)
    if burnin_seconds:
        kwargs["burnin_seconds"] = burnin_seconds
    name = "%s%s every %dh (%s)" % (PREFIX, target, every_hours, burnin.describe(mode, burnin_seconds))
    taken = "this schedule exists already: %s" % name[len(PREFIX):]
    if PeriodicTask.objects.filter(name=name).exists():
        raise ValueError(taken)
    try:
        with transaction.atomic():
            schedule = PeriodicTask.objects.create(name=name, task=TASK, interval=interval, kwargs=json.dumps(kwargs))
    except IntegrityError:  # made by another request meanwhile
        raise ValueError(taken) from None
    audit.record("schedule.created", obj=schedule, every_hours=every_hours, mode=mode, target=target,
                 **({"burnin_seconds": burnin_seconds} if burnin_seconds else {}))
    return schedule


def schedules():
    return PeriodicTask.objects.filter(task=TASK).select_related("interval").order_by("name")


def schedule_delete(*, schedule_id):
    schedule = PeriodicTask.objects.filter(id=schedule_id, task=TASK).first()
    if schedule is not None:
        gone = audit.Snapshot.of(schedule)
        schedule.delete()
        audit.record("schedule.deleted", obj=gone)


def revalidate(*, mode, node_id=None, label="", burnin_seconds=None):
    """Request a scheduled run for each target node that can be reached and is not busy or quarantined."""
    nodes = Node.objects.filter(id=node_id) if node_id else nodes_with_label(label)
    busy = set(ValidationRun.objects.filter(node__in=nodes, status__in=ValidationRun.LIVE)
               .values_list("node_id", flat=True))
    runs = []
    for node in nodes.exclude(status=Node.Status.QUARANTINED):
        if node.id in busy or not node.can_validate:
            continue
        runs.append(run_request(node=node, mode=mode, trigger=ValidationRun.Trigger.SCHEDULED,  # or its live run
                                burnin_seconds=burnin_seconds))
    return runs
