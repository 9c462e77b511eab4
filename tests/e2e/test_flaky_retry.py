"""Flaky or hard, through a real Celery worker: a check that failed or warned on a measured figure is run once more
in the same run (`--only`), keeps both attempts, and the second attempt decides. The node's interpreter is
tests/fakes/replay-python under several names, replaying the real H200 reports (its docstring says which)."""

from pathlib import Path

import pytest

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import Node
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.selectors import node_flakiness
from cudaweb.validation.services import run_request
from tests.conftest import wait_for_terminal
from tests.e2e.test_failure_paths import make_node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FAKES = Path(__file__).resolve().parent.parent / "fakes"


def validate(name, python, mode="standard", burnin_seconds=None):
    node = Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=str(FAKES / python))
    return wait_for_terminal(run_request(node=node, mode=mode, burnin_seconds=burnin_seconds), timeout=120)


def test_a_check_that_fails_once_then_passes_is_flaky_and_the_run_passes(celery_worker):
    run = validate("flaky-node", "flaky-python")
    assert run.status == ValidationRun.Status.PASSED and run.verdict == "pass", run.reason
    nccl = run.checks.get(check_id="comm.nccl")
    assert nccl.retry == CheckResult.Retry.FLAKY and nccl.status == "pass"
    assert nccl.retry_label == "flaky (failed, then passed)"
    first, second = nccl.attempts
    assert first["status"] == "fail" and first["signatures"] == ["nccl_busbw_low"] and second["status"] == "pass"
    # the training checks the failure had skipped ran again with it, and count
    for check_id in ("train.resnet18", "train.ddp"):
        check = run.checks.get(check_id=check_id)
        assert check.retry == CheckResult.Retry.RERUN and check.status == "pass" and not check.blocked_by
        assert check.attempts[0]["status"] == "skip" and check.attempts[0]["blocked_by"] == "comm.nccl"
    # only the figure (and what it blocked) was asked for again
    assert run.retry["checks"] == ["comm.nccl"] and run.retry["blocked"] == ["train.resnet18", "train.ddp"]
    assert run.retry["first_verdict"] == "fail" and not run.retry["error"]
    assert run.retry["report"]["host"]["argv"][-2:] == ["--only", "comm.nccl,train.resnet18,train.ddp"]
    assert run.report["host"]["argv"][:2] == ["--mode", "standard"] and "--only" not in run.report["host"]["argv"]
    assert sorted(run.checks.exclude(retry="").values_list("check_id", flat=True)) == [
        "comm.nccl", "train.ddp", "train.resnet18"]
    assert "1 flaky" in run.reason and any(event["event"] == "retry" for event in run.progress)
    assert node_flakiness(run.node) == {"runs": 1, "days": 7, "limit": 3, "flagged": False}
    assert run.node.status == Node.Status.PASSING


def test_a_check_that_fails_twice_is_hard_and_the_run_fails(celery_worker):
    run = validate("hard-node", "hard-python")
    assert run.status == ValidationRun.Status.FAILED and run.verdict == "fail", run.reason
    nccl = run.checks.get(check_id="comm.nccl")
    assert nccl.retry == CheckResult.Retry.HARD and nccl.status == "fail"
    assert nccl.retry_label == "hard (failed twice)"
    assert [a["status"] for a in nccl.attempts] == ["fail", "fail"]
    assert run.checks.get(check_id="train.ddp").status == "skip"  # still blocked by it
    assert "1 hard" in run.reason and node_flakiness(run.node)["runs"] == 0


def test_a_second_attempt_that_prints_no_report_leaves_the_first_standing(celery_worker):
    run = validate("lost-node", "lost-python")
    assert run.status == ValidationRun.Status.FAILED and "1 unconfirmed" in run.reason
    nccl = run.checks.get(check_id="comm.nccl")
    assert nccl.retry == CheckResult.Retry.UNCONFIRMED and nccl.status == "fail" and len(nccl.attempts) == 1
    assert run.retry["error"] == "the second attempt printed no report (exit status 139): the agent printed nothing " \
        "on stdout"
    assert run.retry["report"] is None


def test_a_figure_measured_on_a_busy_gpu_is_measured_again(celery_worker):
    run = validate("busy-node", "busy-python")
    assert run.status == ValidationRun.Status.PASSED, run.reason
    matmul = run.checks.get(check_id="cuda.matmul")
    assert matmul.retry_label == "flaky (warned, then passed)" and matmul.attempts[0]["signatures"] == ["gpu_busy"]


def test_burnin_mode_passes_its_length_and_keeps_the_series(celery_worker):
    run = validate("burnin-node", "replay-python", mode="burnin", burnin_seconds=1800)
    assert run.status == ValidationRun.Status.PASSED, run.reason
    assert run.mode == "burnin" and run.burnin_seconds == 1800
    assert run.report["host"]["argv"][:4] == ["--mode", "burnin", "--burnin-seconds", "1800"]
    sustained = run.checks.get(check_id="stress.sustained")
    assert sustained.layer == "L7" and run.retry == {}
    (check,) = [c for c in run.report["checks"] if c["id"] == "stress.sustained"]
    assert len(check["series"]["gpus"]["0"]["t"]) == 151


def test_a_burnin_another_process_joined_runs_its_sustained_load_again(celery_worker):
    run = validate("busy-burnin-node", "busy-burnin-python", mode="burnin", burnin_seconds=300)
    assert run.status == ValidationRun.Status.PASSED, run.reason
    sustained = run.checks.get(check_id="stress.sustained")
    assert sustained.retry_label == "flaky (warned, then passed)"
    assert "started computing on it 22 s into the burn-in" in sustained.attempts[0]["summary"]
    assert run.retry["report"]["host"]["argv"] == ["--mode", "burnin", "--burnin-seconds", "300", "--json",
                                                   "--exit-with-stdin", "--only", "stress.sustained"]


def test_over_ssh_the_second_attempt_is_a_second_verified_connection(celery_worker, sshd):
    node = make_node(sshd, "flaky-ssh", python=str(FAKES / "flaky-python"))
    run = wait_for_terminal(run_request(node=node, mode="standard"), timeout=120)
    assert run.status == ValidationRun.Status.PASSED, run.reason
    assert run.checks.get(check_id="comm.nccl").retry == CheckResult.Retry.FLAKY
    used = AuditEvent.objects.filter(action="credential.used", detail__purpose__startswith="run %s" % run.id)
    assert sorted(event.detail["purpose"] for event in used) == ["run %s" % run.id, "run %s (second attempt)" % run.id]
