"""The root cause as data (cudaweb.playbooks.root_cause.run_root_cause), from runs stored as a worker stores them."""

import copy

import pytest

from cudaweb.nodes.models import Node
from cudaweb.playbooks.root_cause import run_root_cause, runs_root_causes
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.drift.helpers import real_report, scaled, stored_run


def xid_report():
    """A real report whose driver.gpu_health fails with a GPU off the bus, and a later check failing too."""
    report = scaled(real_report(), statuses={"driver.gpu_health": "fail", "comm.gloo": "fail"})
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(summary="GPU 3 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"],
                         evidence="NVRM: Xid (PCI:0000:18:00): 79, pid=123, GPU has fallen off the bus.")
    return report


@pytest.fixture
def node(db):
    return Node.objects.create(name="gpu-0042", transport=Node.Transport.LOCAL)


@pytest.mark.django_db
def test_a_failed_run_names_its_lowest_failing_check_and_its_playbook(node):
    cause = run_root_cause(run=stored_run(node, xid_report()))
    assert cause["check"] == "driver.gpu_health" and cause["layer"] == "L1" and cause["status"] == "fail"
    assert cause["summary"] == "GPU 3 fell off the bus (Xid 79)" and cause["signatures"] == ["gpu_fallen_off_bus"]
    assert cause["playbook"]["id"] == "gpu_hardware" and cause["playbook"]["title"].startswith("GPU hardware fault")
    assert cause["playbook"]["first_fix"]
    assert set(cause) == {"check", "layer", "status", "summary", "signatures", "playbook"}


@pytest.mark.django_db
def test_a_passed_run_and_a_live_run_have_none(node):
    assert run_root_cause(run=stored_run(node, real_report())) is None
    assert run_root_cause(run=ValidationRun.objects.create(node=node)) is None
    assert run_root_cause(run=None) is None


@pytest.mark.django_db
def test_a_warned_run_names_its_lowest_warning(node):
    cause = run_root_cause(run=stored_run(node, scaled(real_report(), statuses={"comm.gloo": "warn"})))
    assert (cause["check"], cause["status"]) == ("comm.gloo", "warn")


@pytest.mark.django_db
def test_a_failing_check_no_playbook_matches_has_a_null_playbook(node):
    report = scaled(real_report(), statuses={"comm.gloo": "fail"})
    for check in report["checks"]:
        if check["id"] == "comm.gloo":
            check.update(summary="zzz nothing any rule knows", evidence="qqq", signatures=[])
    cause = run_root_cause(run=stored_run(node, report))
    assert cause["check"] == "comm.gloo" and cause["playbook"] is None


@pytest.mark.django_db
def test_a_run_without_a_verdict_says_its_state_and_reason(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    run_finish(run=run, status=ValidationRun.Status.UNREACHABLE, reason="cannot reach 10.0.4.42:22: No route")
    run.refresh_from_db()
    assert run_root_cause(run=run) == {"check": None, "layer": None, "status": "UNREACHABLE",
                                       "summary": "cannot reach 10.0.4.42:22: No route", "signatures": [],
                                       "playbook": None}


@pytest.mark.django_db
def test_many_runs_cost_one_query_and_a_cached_answer_cannot_be_changed_by_its_caller(node, django_assert_num_queries):
    other = Node.objects.create(name="gpu-0043", transport=Node.Transport.LOCAL)
    runs = [stored_run(node, xid_report()), stored_run(other, copy.deepcopy(xid_report()))]
    with django_assert_num_queries(1):
        causes = runs_root_causes(runs=runs)
    assert [causes[r.id]["check"] for r in runs] == ["driver.gpu_health", "driver.gpu_health"]
    causes[runs[0].id]["playbook"]["id"] = "changed"
    with django_assert_num_queries(1):
        assert run_root_cause(run=runs[0])["playbook"]["id"] == "gpu_hardware"
