"""The reports the agent produced on real H200 hosts (tests/fixtures/real/) are valid and store as expected."""

import json
from pathlib import Path

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation import services
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.reports import parse_report

REAL = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "real").glob("h200-*.json"))


def test_there_are_real_reports_for_one_and_two_gpus():
    names = {path.stem for path in REAL}
    assert {"h200-gpus1-standard", "h200-gpus2-standard", "h200-gpus1-full", "h200-gpus2-full"} <= names


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_real_report_matches_the_schema_and_nothing_above_a_failure_passes(path):
    report = parse_report(path.read_text())
    assert report["verdict"] == "pass"
    failed_layers = [c["layer"] for c in report["checks"] if c["status"] in ("fail", "error")]
    assert not failed_layers


@pytest.mark.django_db
def test_storing_a_real_two_gpu_report_keeps_every_check_and_metric():
    report = json.loads((REAL[0].parent / "h200-gpus2-standard.json").read_text())
    node = Node.objects.create(name="h200-a", transport=Node.Transport.LOCAL)
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    assert services.run_store_report(run=run, report=report) == ValidationRun.Status.PASSED
    run.refresh_from_db()
    node.refresh_from_db()
    assert run.checks.count() == len(report["checks"]) and node.status == Node.Status.PASSING
    nccl = run.checks.get(check_id="comm.nccl")
    assert nccl.metrics["nccl_busbw_gbs.1024mib"] > 290 and "P2P/CUMEM" in nccl.summary


LANDED = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "landed"


@pytest.mark.parametrize("name, mode, checks", [("quick", "quick", 29), ("standard-1", "standard", 38),
                                                ("standard-2", "standard", 38), ("burnin-30", "burnin", 41)])
def test_the_landed_agent_on_a_real_h200_reports_what_the_dashboard_takes(name, mode, checks):
    """The agent as it landed (5eb03f4, after the NVML child runner became one and the spawn lock), run on a lent H200
    on 2026-12-04 (bench/session_on_device.sh; tests/fixtures/real/landed/session.txt): each report is taken by the
    dashboard's schema as it is, with every layer of its mode and nothing failed."""
    report = parse_report((LANDED / ("h200-%s.json" % name)).read_text())
    assert (report["mode"], report["verdict"], len(report["checks"])) == (mode, "pass", checks)
    assert not [c["id"] for c in report["checks"] if c["status"] in ("fail", "error")]


def test_the_landed_watch_on_a_real_h200_becomes_one_application_event_after_a_faulting_kernel():
    from cudaweb.health.ingest import findings

    healthy = json.loads((LANDED / "h200-watch.json").read_text())
    assert healthy["verdict"] == "pass" and findings(healthy) == []
    after = json.loads((LANDED / "h200-watch-xid-application.json").read_text())
    found = findings(after)
    assert [(check, signature) for check, _gpu, signature, *_ in found] == [("driver.xid", "xid_application")]
    assert found[0][1].startswith("GPU-")  # named by the GPU's UUID
