"""How long the loop keeps what it saw: closed health events older than CUDAWEB_EVENT_RETENTION_DAYS are deleted
(beat, daily), in batches, so that what nodes report cannot grow the store without end. Open events stay whatever
their age: they are still seen."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from cudaweb.health.models import HealthEvent

BATCH = 5000


def events_prune(*, now=None, days=None):
    """Delete the closed events last seen before the retention; how many were deleted."""
    now = now or timezone.now()
    before = now - timedelta(days=days or settings.CUDAWEB_EVENT_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(HealthEvent.objects.filter(open=False, last_seen__lt=before).values_list("id", flat=True)[:BATCH])
        if not ids:
            return deleted
        deleted += HealthEvent.objects.filter(id__in=ids).delete()[0]
