"""Scheduled revalidation through django-celery-beat: per node or label; busy, quarantined or untrusted skipped."""

import json

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from cudaweb.nodes.models import HostKey, Node
from cudaweb.validation import schedules
from cudaweb.validation.models import ValidationRun

pytestmark = pytest.mark.django_db


def test_a_label_schedule_is_a_beat_periodic_task(operator_client):
    operator_client.post(reverse("runs:schedules"), {"label": "rack-1", "every_hours": 6, "mode": "standard"})
    task = PeriodicTask.objects.get()
    assert task.task == "cudaweb.validation.tasks.revalidate" and task.interval.every == 6
    assert json.loads(task.kwargs) == {"label": "rack-1", "mode": "standard"}
    assert "label rack-1 every 6h" in operator_client.get(reverse("runs:schedules")).content.decode()
    operator_client.post(reverse("runs:schedule_delete", args=[task.id]))
    assert not PeriodicTask.objects.exists()


def test_a_schedule_names_one_target():
    with pytest.raises(ValueError):
        schedules.schedule_create(every_hours=1, mode="quick")


def test_revalidate_requests_scheduled_runs_for_the_reachable_nodes():
    ready = Node.objects.create(name="ready", transport="local", labels=["rack-1"])
    busy = Node.objects.create(name="busy", transport="local", labels=["rack-1"])
    ValidationRun.objects.create(node=busy, status=ValidationRun.Status.RUNNING)
    Node.objects.create(name="held", transport="local", labels=["rack-1"], status=Node.Status.QUARANTINED)
    untrusted = Node.objects.create(name="untrusted", transport="ssh", address="198.18.0.2", labels=["rack-1"])
    HostKey.objects.create(node=untrusted, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="x")
    Node.objects.create(name="other-rack", transport="local", labels=["rack-2"])
    runs = schedules.revalidate(mode="quick", label="rack-1")
    assert [r.node for r in runs] == [ready] and runs[0].trigger == ValidationRun.Trigger.SCHEDULED
