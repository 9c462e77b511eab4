"""Reading the audit log: the events a filter selects, and one event as plain data for the exports."""

from datetime import date, datetime, time, timedelta

from django.utils import timezone

from cudaweb.accounts.models import AuditEvent

EXPORT_FIELDS = ("when", "actor", "action", "object_type", "object_id", "object_repr", "client_address", "detail")


def _day_start(day):
    return timezone.make_aware(datetime.combine(day, time.min))


def audit_events(*, actor="", action="", object_type="", since=None, until=None):
    """Newest first. `since` and `until` are dates, both included; `actor` is a username (as it was)."""
    events = AuditEvent.objects.all()
    if actor:
        events = events.filter(actor_name=actor)
    if action:
        events = events.filter(action=action)
    if object_type:
        events = events.filter(object_type=object_type)
    if since:
        events = events.filter(when__gte=_day_start(since))
    if until and until < date.max:  # to the end of time: no upper bound (the day after would overflow)
        events = events.filter(when__lt=_day_start(until + timedelta(days=1)))
    return events


def audit_object_types():
    return list(AuditEvent.objects.exclude(object_type="").order_by("object_type")
                .values_list("object_type", flat=True).distinct())


def audit_event_export(event):
    """One event as the CSV and JSON exports write it."""
    return {"when": event.when.isoformat(), "actor": event.actor_name, "action": event.action,
            "object_type": event.object_type, "object_id": event.object_id, "object_repr": event.object_repr,
            "client_address": event.client_address or "", "detail": event.detail}
