"""Each GPU of a run from its stored checks: the numbers in the host's lines are read as ASCII digits of a bounded
length, so no listing, thermal line or summary a host writes makes the per-GPU view (/metrics, the Kubernetes
events of a finished run) raise."""

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation.gpus import runs_gpus
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db
HUGE = "9" * 5000  # over the 4300 digits Python's int() converts


def test_an_index_int_would_refuse_is_no_gpu_and_breaks_nothing():
    report = scaled(real_report(), statuses={"driver.gpu_health": "fail"})
    checks = {c["id"]: c for c in report["checks"]}
    checks["driver.nvidia_smi"]["evidence"] += ("GPU %s: NVIDIA H200 (UUID: GPU-x)\n"
                                                "GPU ²: NVIDIA H200 (UUID: GPU-y)\n" % HUGE)
    checks["driver.clocks_thermal"].update(metrics={}, evidence="GPU 0: temperature.gpu=1.2.3, power.draw=9 W\n"
                                                                "GPU 1: temperature.gpu=41, power.draw=120.5 W\n")
    checks["driver.gpu_health"].update(summary="GPU %s has fallen off the bus" % HUGE,
                                       signatures=["gpu_fallen_off_bus"])
    run = stored_run(Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL), report)
    gpus = runs_gpus(run_ids=[run.id])[run.id]
    assert [gpu.index for gpu in gpus] == [0, 1]  # the host's two: a 5000-digit or "²" index is none
    assert [gpu.failing for gpu in gpus] == [["gpu_fallen_off_bus"]] * 2  # it names no GPU of the node: all of them
    assert "temperature_c" not in gpus[0].figures  # 1.2.3 is no temperature
    assert (gpus[1].figures["temperature_c"], gpus[1].figures["power_w"]) == (41.0, 120.5)
