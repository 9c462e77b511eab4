"""What nodes report does not grow the store without end: closed events past CUDAWEB_EVENT_RETENTION_DAYS are pruned
(beat, daily), open ones stay whatever their age; an rma bundle carries the newest BUNDLE_ROWS events at most.
(cudaweb/health/retention.py, cudaweb/fleet/evidence.py)"""

import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from cudaweb.fleet import evidence
from cudaweb.health.models import HealthEvent, Transition
from cudaweb.health.retention import events_prune
from tests.health.conftest import make_node

pytestmark = pytest.mark.django_db


def _event(node, signature, *, age_days, open_):
    seen = timezone.now() - timedelta(days=age_days)
    return HealthEvent.objects.create(node=node, check_id="driver.xid", signature=signature, severity="warn",
                                      klass="observation", first_seen=seen, last_seen=seen, open=open_)


def test_closed_events_past_the_retention_are_pruned_and_open_ones_stay():
    node = make_node("gpu-ret")
    old_closed = _event(node, "a", age_days=91, open_=False)
    old_open = _event(node, "b", age_days=200, open_=True)
    recent_closed = _event(node, "c", age_days=89, open_=False)
    assert settings.CUDAWEB_EVENT_RETENTION_DAYS == 90
    assert events_prune() == 1
    assert set(HealthEvent.objects.values_list("id", flat=True)) == {old_open.id, recent_closed.id}
    assert not HealthEvent.objects.filter(id=old_closed.id).exists()
    assert "prune-old-events" in settings.CELERY_BEAT_SCHEDULE


def test_an_rma_bundle_carries_the_newest_events_only(monkeypatch):
    monkeypatch.setattr(evidence, "BUNDLE_ROWS", 5)
    node = make_node("gpu-bundle")
    for i in range(12):
        _event(node, "s%02d" % i, age_days=1 + i / 100, open_=False)
    transition = Transition.objects.create(node=node, version=1, from_state="quarantined", to_state="rma", by="loop",
                                           why="test", at=timezone.now())
    _, data = evidence.loop_rma_bundle(transition)
    loop = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("loop.json"))
    assert [e["signature"] for e in loop["events"]] == ["s04", "s03", "s02", "s01", "s00"]
