"""Drift thresholds are configured in the admin; acceptance records cannot be edited there."""

import pytest
from django.urls import reverse

from cudaweb.drift.models import DriftThreshold

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-tests"))
    return client


def test_a_threshold_is_set_in_the_admin(admin_client_):
    admin_client_.post(reverse("admin:drift_driftthreshold_add"), {"metric": "nccl_busbw_gbs", "threshold_pct": 5})
    assert DriftThreshold.objects.get().threshold_pct == 5
    page = admin_client_.get(reverse("admin:drift_driftthreshold_changelist")).content.decode()
    assert "nccl_busbw_gbs" in page and "10" in page  # the catalogue default beside the override


def test_acceptance_records_are_read_only_in_the_admin(admin_client_):
    assert admin_client_.get(reverse("admin:fleet_acceptancerecord_add")).status_code == 403
