"""Burn-in mode: the agent's budget and arguments, the words for a run's basis, the series a host reports, and the
length kept through a schedule, a lost worker and validate_node."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cudaweb.nodes.models import Node
from cudaweb.validation import burnin, queue, reaper
from cudaweb.validation.models import ValidationRun
from tests.drift.helpers import real_report


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


def test_the_real_series_flattens_to_one_sample_per_gpu_and_moment():
    (check,) = [c for c in real_report("burnin/h200-burnin-300s.json")["checks"] if c["id"] == "stress.sustained"]
    samples = burnin.series_of(check)
    assert len(samples) == len(check["series"]["gpus"]["0"]["t"]) == 151
    assert samples[0] == {"t": 0.0, "gpu": 0, "sm_clock_mhz": 1687.5, "mem_clock_mhz": 3201, "power_w": 637.7,
                          "power_limit_w": 700.0, "temp_c": 58.5, "mem_temp_c": 50.5, "throttle": 4, "util": 98.5,
                          "tflops": 723.4}
    csv_text = burnin.series_csv(samples)
    assert csv_text.splitlines()[0] == ",".join(burnin.SERIES_FIELDS) and len(csv_text.splitlines()) == 152


def test_a_series_from_a_host_keeps_numbers_only():
    check = {"id": "stress.sustained", "metrics": {"power_limit_w.gpu1": 700.0}, "series": {"gpus": {
        "1": {"t": [0, 2, "x"], "sm_mhz": [1400, "<b>", 1500], "power_w": [690.5, True], "tflops_t": [1.5, 9],
              "tflops": [650.0, 640.0], "reasons": [4, 8, 4]},
        "../etc": {"t": [0]}, "2": "junk"}}}
    samples = burnin.series_of(check)
    assert [(s["gpu"], s["t"]) for s in samples] == [(1, 0), (1, 2)]  # a time that is no number is dropped
    assert samples[0]["sm_clock_mhz"] == 1400 and samples[1]["sm_clock_mhz"] is None
    assert samples[1]["power_w"] is None and samples[0]["power_limit_w"] == 700.0
    assert [s["tflops"] for s in samples] == [650.0, 650.0]  # the nearest throughput window
    assert burnin.series_of({"series": [{"t": 1}]}) == [] and burnin.series_of({"series": {"gpus": []}}) == []


def test_nan_and_infinity_from_a_host_are_no_numbers_and_the_plots_still_draw():
    from cudaweb.fleet.stress_charts import stress_panels

    nan, inf = float("nan"), float("inf")
    check = {"id": "stress.sustained", "metrics": {"power_limit_w.gpu0": nan}, "series": {"gpus": {"0": {
        "t": [0, 1, inf, 3], "sm_mhz": [1400, inf, 1500, nan], "reasons": [4, nan, 4, -inf], "tflops_t": [1, nan],
        "tflops": [650.0, 640.0]}}}}
    samples = burnin.series_of(check)
    assert [s["t"] for s in samples] == [0, 1, 3]
    assert [s["sm_clock_mhz"] for s in samples] == [1400, None, None]
    assert [s["throttle"] for s in samples] == [4, None, None] and samples[0]["power_limit_w"] is None
    panels = stress_panels({"checks": [check]})  # the run page's plots: no 500 on what a host sent
    assert panels["throttle"] == ["SW power cap"] and "nan" not in str(panels) and "inf" not in str(panels)


@pytest.mark.django_db
def test_a_burnin_run_whose_worker_died_is_tried_again_with_its_length(monkeypatch, settings):
    settings.CUDAWEB_AGENT_TIMEOUT = dict(settings.CUDAWEB_AGENT_TIMEOUT, burnin=1500)
    settings.CUDAWEB_BURNIN_MARGIN_S = 900
    queued = []
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: queued.extend(runs))  # no broker here
    node = Node.objects.create(name="n", transport=Node.Transport.LOCAL)
    lost = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="burnin",
                                        burnin_seconds=7200)
    retry = reaper.run_lost(run_id=lost.id, reason="killed")
    assert (retry.mode, retry.burnin_seconds, retry.retry_of_id) == ("burnin", 7200, lost.id)
    assert queued == [(retry, 2 * (1500 + 7200 + 900))]  # the task may hold two agent runs of that length
    assert lost.mode_label == "full + burn-in 2 h"


@pytest.mark.django_db
def test_validate_node_refuses_a_burnin_length_out_of_range():
    Node.objects.create(name="n", transport=Node.Transport.LOCAL)
    with pytest.raises(CommandError, match="--burnin-seconds must be between 60 and 86400"):
        call_command("validate_node", "n", "--mode", "burnin", "--burnin-seconds", "5")
    assert not ValidationRun.objects.exists()
