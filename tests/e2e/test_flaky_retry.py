"""Flaky or hard, through a real Celery worker: a check that warned on a measured figure is run once more in the same
run (`--only`), keeps both attempts, and the second attempt decides. The node's interpreter is tests/fakes/
replay-python under two names, replaying the real H200 reports (its docstring says which)."""

from pathlib import Path

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.selectors import node_flakiness
from cudaweb.validation.services import run_request
from tests.conftest import wait_for_terminal

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FAKES = Path(__file__).resolve().parent.parent / "fakes"


def validate(name, python, mode="standard", burnin_seconds=None):
    node = Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=str(FAKES / python))
    return wait_for_terminal(run_request(node=node, mode=mode, burnin_seconds=burnin_seconds), timeout=120)


def test_a_check_that_warns_once_then_passes_is_flaky_and_the_run_passes(celery_worker):
    run = validate("flaky-node", "flaky-python")
    assert run.status == ValidationRun.Status.PASSED and run.verdict == "pass", run.reason
    matmul = run.checks.get(check_id="cuda.matmul")
    assert matmul.retry == CheckResult.Retry.FLAKY and matmul.status == "pass"
    assert matmul.retry_label == "flaky (warned, then passed)"
    first, second = matmul.attempts
    assert first["status"] == "warn" and first["signatures"] == ["gpu_busy"] and second["status"] == "pass"
    # only the figure was asked for again; nothing else was run twice
    assert run.retry["checks"] == ["cuda.matmul"] and run.retry["first_verdict"] == "warn"
    assert run.retry["report"]["host"]["argv"][-2:] == ["--only", "cuda.matmul"]
    assert run.report["host"]["argv"][:2] == ["--mode", "standard"] and "--only" not in run.report["host"]["argv"]
    assert list(run.checks.exclude(retry="").values_list("check_id", flat=True)) == ["cuda.matmul"]
    assert "1 flaky" in run.reason
    assert any(event["event"] == "retry" for event in run.progress)
    assert node_flakiness(run.node) == {"runs": 1, "days": 7, "limit": 3, "flagged": False}


def test_a_check_that_warns_twice_is_hard_and_the_run_warns(celery_worker):
    run = validate("hard-node", "hard-python")
    assert run.status == ValidationRun.Status.WARNED and run.verdict == "warn", run.reason
    matmul = run.checks.get(check_id="cuda.matmul")
    assert matmul.retry == CheckResult.Retry.HARD and matmul.status == "warn"
    assert matmul.retry_label == "hard (warned twice)"
    assert [a["status"] for a in matmul.attempts] == ["warn", "warn"]
    assert node_flakiness(run.node)["runs"] == 0


def test_burnin_mode_passes_its_length_and_keeps_the_series(celery_worker):
    run = validate("burnin-node", "replay-python", mode="burnin", burnin_seconds=1800)
    assert run.status == ValidationRun.Status.PASSED, run.reason
    assert run.mode == "burnin" and run.burnin_seconds == 1800
    assert run.report["host"]["argv"][:4] == ["--mode", "burnin", "--burnin-seconds", "1800"]
    sustained = run.checks.get(check_id="stress.sustained")
    assert sustained.layer == "L7" and run.retry == {}
    (check,) = [c for c in run.report["checks"] if c["id"] == "stress.sustained"]
    assert len(check["series"]) == 121 and check["series"][-1]["sm_clock_mhz"] == 1425
