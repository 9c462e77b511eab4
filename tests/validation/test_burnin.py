"""Burn-in mode: the agent's budget and arguments, the words for a run's basis, the series a host reports, and the
length kept through a schedule, a lost worker and validate_node."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cudaweb.embedded import free_port
from cudaweb.nodes.models import Node
from cudaweb.validation import burnin, reaper
from cudaweb.validation.models import ValidationRun


def test_burnin_budget_and_arguments_grow_with_its_length(settings):
    settings.CUDAWEB_AGENT_TIMEOUT = dict(settings.CUDAWEB_AGENT_TIMEOUT, full=1500, burnin=1500)
    settings.CUDAWEB_BURNIN_MARGIN_S = 900
    node = Node(name="n")
    assert burnin.agent_budget_s(node, "burnin", 7200) == 1500 + 7200 + 900
    assert burnin.agent_budget_s(node, "burnin", None) == 1500 + 300 + 900
    assert burnin.agent_budget_s(node, "full", 7200) == 1500
    assert burnin.agent_args("burnin", 1800) == ["--mode", "burnin", "--burnin-seconds", "1800"]
    assert burnin.agent_args("standard", 1800) == ["--mode", "standard"]
    assert burnin.describe("burnin", 1800) == "full + burn-in 30 min"
    assert burnin.describe("burnin", 90) == "full + burn-in 90 s" and burnin.describe("full", None) == "full"


def test_a_series_from_a_host_keeps_numbers_only():
    check = {"id": "stress.sustained", "series": [
        {"t": 1.0, "gpu": 0, "power_w": 690.5, "throttle": 4, "extra": "x"},
        {"t": "<script>", "gpu": 0}, "junk", {"t": 2.0, "gpu": 1, "power_w": "700", "temp_c": True}]}
    samples = burnin.series_of(check)
    assert [s["t"] for s in samples] == [1.0, 2.0]
    assert samples[0]["power_w"] == 690.5 and samples[1]["power_w"] is None and samples[1]["temp_c"] is None
    assert set(samples[0]) == set(burnin.SERIES_FIELDS)
    csv_text = burnin.series_csv(samples)
    assert csv_text.splitlines()[0] == ",".join(burnin.SERIES_FIELDS) and len(csv_text.splitlines()) == 3



@pytest.mark.django_db
def test_a_burnin_run_whose_worker_died_is_tried_again_with_its_length(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:%d/0" % free_port()  # the retry cannot be queued: ended, kept
    node = Node.objects.create(name="n", transport=Node.Transport.LOCAL)
    lost = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="burnin",
                                        burnin_seconds=7200)
    retry = reaper.run_lost(run_id=lost.id, reason="killed")
    assert (retry.mode, retry.burnin_seconds, retry.retry_of_id) == ("burnin", 7200, lost.id)
    assert lost.mode_label == "full + burn-in 2 h"


@pytest.mark.django_db
def test_validate_node_refuses_a_burnin_length_out_of_range():
    Node.objects.create(name="n", transport=Node.Transport.LOCAL)
    with pytest.raises(CommandError, match="--burnin-seconds must be between 60 and 86400"):
        call_command("validate_node", "n", "--mode", "burnin", "--burnin-seconds", "5")
    assert not ValidationRun.objects.exists()
