"""Drift: what a finished run means for its node (changes, baseline, thresholds, peers), on real reports."""

import pytest

from cudaweb.drift.models import DriftThreshold, PeerBand
from cudaweb.drift.services import baseline_pin
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="h200-a", transport=Node.Transport.LOCAL)


def test_a_stored_report_fills_the_fleet_row(node):
    run = stored_run(node, real_report())
    node.refresh_from_db()
    assert node.last_run == run and node.gpu_model == "NVIDIA H200" and node.gpu_count == 2
    assert node.layer_status == {layer: "pass" for layer in ("L0", "L1", "L2", "L3", "L4", "L5", "L6")}
    assert run.metrics["nccl_busbw_gbs"] == 317.9 and run.metrics["matmul_bf16_tflops"] == pytest.approx(780.99)
    assert node.metrics["h2d_pinned_gbs"] == run.metrics["h2d_pinned_gbs"]
    assert run.changes == {"previous": None, "checks": [], "software": []}


def test_changes_since_the_run_before(node):
    first = stored_run(node, real_report())
    second = stored_run(node, scaled(real_report(), inventory={"driver_version": "580.172.01"},
                                     statuses={"driver.pcie_link": "warn"}))
    assert second.changes["previous"] == str(first.id)
    assert second.changes["checks"] == [{"check": "driver.pcie_link", "from": "pass", "to": "warn"}]
    assert second.changes["software"] == [{"key": "driver_version", "from": "580.159.04", "to": "580.172.01"}]
    node.refresh_from_db()
    assert node.layer_status["L1"] == "warn"


def test_drift_against_the_baseline_uses_each_metrics_threshold(node):
    baseline = stored_run(node, real_report())
    baseline_pin(node=node, run=baseline)
    slower = stored_run(node, scaled(real_report(), {"h2d_pinned_gbs": 0.85, "matmul_bf16_tflops": 0.95}))
    rows = {r["metric"]: r for r in slower.drift["metrics"]}
    assert rows["h2d_pinned_gbs"]["drift"] and rows["h2d_pinned_gbs"]["delta_pct"] == pytest.approx(-15.0)
    assert not rows["matmul_bf16_tflops"]["drift"]  # 5 % worse, threshold 10 %
    assert slower.drifted and slower.drift["baseline"] == str(baseline.id)
    node.refresh_from_db()
    assert node.drifted
    DriftThreshold.objects.create(metric="h2d_pinned_gbs", threshold_pct=20)
    relaxed = stored_run(node, scaled(real_report(), {"h2d_pinned_gbs": 0.85}))
    assert not relaxed.drifted


def test_a_software_change_is_drift_by_itself(node):
    baseline_pin(node=node, run=stored_run(node, real_report()))
    changed = stored_run(node, scaled(real_report(), inventory={"torch": "2.12.0+cu130"}))
    assert changed.drifted and changed.drift["software"] == [
        {"key": "torch", "from": "2.11.0+cu130", "to": "2.12.0+cu130"}]


def test_a_node_far_below_its_peers_is_flagged_without_a_baseline():
    peers = [Node.objects.create(name="peer-%d" % i, transport=Node.Transport.LOCAL) for i in range(4)]
    for i, peer in enumerate(peers):
        stored_run(peer, scaled(real_report(), {"resnet18_amp_bf16_img_s": 1 + i / 100}))
    band = PeerBand.objects.get(gpu_model="NVIDIA H200", metric="resnet18_amp_bf16_img_s")
    assert band.count == 4 and band.low <= band.median <= band.high
    weak = Node.objects.create(name="weak", transport=Node.Transport.LOCAL)
    run = stored_run(weak, scaled(real_report(), {"resnet18_amp_bf16_img_s": 0.7}))
    flagged = {p["metric"]: p for p in run.drift["peers"]}
    assert flagged["resnet18_amp_bf16_img_s"]["below"] and not flagged["matmul_bf16_tflops"]["below"]
    assert run.drift["baseline"] is None and run.drifted


def test_a_failed_scheduled_run_marks_the_node_and_a_pass_clears_it(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING,
                                       trigger=ValidationRun.Trigger.SCHEDULED)
    run_finish(run=run, status=ValidationRun.Status.UNREACHABLE, reason="no route to host")
    node.refresh_from_db()
    assert node.status == Node.Status.UNREACHABLE and "ended UNREACHABLE" in node.attention
    stored_run(node, real_report(), trigger=ValidationRun.Trigger.SCHEDULED)
    node.refresh_from_db()
    assert node.attention == "" and node.status == Node.Status.PASSING
