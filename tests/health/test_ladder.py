"""The remediation ladder end to end on one node reached through the local transport: a fault, quarantine and drain,
a GPU reset through a stand-in nvidia-smi, a re-validation (a real queued run, ended through validation's
run_finish), ready; the second time within the window: rma with its bundle; a failed or lost reset; a busy GPU."""

import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from cudaweb.health import machine, remediation
from cudaweb.health.ingest import report_ingest
from cudaweb.health.services import operator_decide
from cudaweb.health.models import LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.health.standin import UUID, standin_nvidia_smi, watch_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def ladder(loop_settings, redis_server, tmp_path):
    def make(*, busy_pid=None, reset_exit=0, rungs=("reset",)):
        smi, log = standin_nvidia_smi(tmp_path, busy_pid=busy_pid, reset_exit=reset_exit)
        loop_settings.CUDAWEB_NVIDIA_SMI = [str(smi)]
        LoopPolicy.objects.create(label="rack-a", mode="act", ladder=list(rungs), auto=True)
        node = Node.objects.create(name="gpu-local", transport=Node.Transport.LOCAL, address="127.0.0.1",
                                   labels=["rack-a"], status=Node.Status.READY)
        return node, log
    return make


def _state(node):
    return NodeLoop.objects.get(node=node).state


def _fault(node, capture):
    with capture(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())


def _drains_delivered(node):
    HookDelivery.objects.filter(node=node, kind="slurm_drain").update(status=HookDelivery.Status.DELIVERED)


def _run_live_action(node, capture):
    action = LoopAction.objects.get(node=node, status__in=LoopAction.LIVE)
    with capture(execute=True):
        remediation.action_run(action.id)
    return LoopAction.objects.get(id=action.id)


def _end_revalidation(node, status, capture):
    action = LoopAction.objects.get(node=node, kind=machine.REVALIDATE, status=LoopAction.Status.RUNNING)
    assert action.run.mode == ValidationRun.Mode.STANDARD and action.run.status == ValidationRun.Status.PENDING
    with capture(execute=True):
        run_finish(run=action.run, status=status, from_statuses=(ValidationRun.Status.PENDING,))
    return action.run


def test_fault_quarantine_reset_revalidate_ready_then_again_rma(ladder, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    node, smi_log = ladder()
    _fault(node, capture)
    assert _state(node) == machine.REMEDIATING  # quarantined, drained, then the ladder's first rung on its own
    reset = LoopAction.objects.get(node=node)
    assert (reset.kind, reset.gpu_uuid, reset.status) == ("reset", UUID, "pending")
    # the drain is not confirmed yet: no reset on a node a scheduler may still use
    assert _run_live_action(node, capture).status == "busy"
    assert _state(node) == machine.QUARANTINED and "-r -i" not in smi_log.read_text()
    _drains_delivered(node)
    user = get_user_model().objects.create_user("op")
    with capture(execute=True):
        operator_decide(node=node, user=user, verdict="remediate", action="reset", reason="drain confirmed")
    assert _run_live_action(node, capture).status == "succeeded"
    assert smi_log.read_text().splitlines()[-1] == "-r -i %s" % UUID
    assert _state(node) == machine.REVALIDATING
    with capture(execute=True):
        remediation.action_run(LoopAction.objects.get(node=node, kind="revalidate").id)
    run = _end_revalidation(node, ValidationRun.Status.PASSED, capture)
    assert _state(node) == machine.READY
    assert Node.objects.get(id=node.id).status == Node.Status.READY
    assert HookDelivery.objects.filter(node=node, kind="slurm_resume").count() == 1
    assert Transition.objects.filter(node=node, to_state="ready").get().run == run
    # the same root cause again within 7 days: straight to rma, drained, with the evidence bundle
    _fault(node, capture)
    assert _state(node) == machine.RMA
    rma = Transition.objects.get(node=node, to_state="rma")
    assert "remediation number 2" in rma.why
    with zipfile.ZipFile(io.BytesIO(rma.bundle.data)) as bundle:
        assert {"MANIFEST.json", "loop.json", "history.json"} <= set(bundle.namelist())
        loop = json.loads(bundle.read("loop.json"))
    assert [t["to"] for t in loop["transitions"]][-1] == "rma"
    assert any(e["signature"] == "gpu_fallen_off_bus" for e in loop["events"])
    assert smi_log.read_text().count("-r -i") == 1  # never reset twice


def test_the_same_cause_after_the_window_is_remediated_again(ladder, django_capture_on_commit_callbacks):
    node, _ = ladder()
    _drains_delivered(node)
    Transition.objects.create(node=node, version=0, from_state="revalidating", to_state="ready", by="loop",
                              why="re-validation passed", root_cause="gpu_fallen_off_bus",
                              at=timezone.now() - timedelta(days=8))
    _fault(node, django_capture_on_commit_callbacks)
    assert _state(node) == machine.REMEDIATING


def test_a_failed_reset_goes_to_rma(ladder, django_capture_on_commit_callbacks):
    node, smi_log = ladder(reset_exit=1)
    _fault(node, django_capture_on_commit_callbacks)
    _drains_delivered(node)
    action = _run_live_action(node, django_capture_on_commit_callbacks)
    assert action.status == "failed" and "exited 1" in action.outcome
    assert _state(node) == machine.RMA
    assert Transition.objects.get(node=node, to_state="rma").bundle.sha256


def test_a_gpu_held_by_a_process_is_not_reset(ladder, django_capture_on_commit_callbacks):
    node, smi_log = ladder(busy_pid=48121)
    _fault(node, django_capture_on_commit_callbacks)
    _drains_delivered(node)
    action = _run_live_action(node, django_capture_on_commit_callbacks)
    assert action.status == "busy" and "48121" in action.outcome
    assert "-r -i" not in smi_log.read_text()
    assert _state(node) == machine.QUARANTINED


def test_a_worker_lost_mid_reset_aborts_it_never_runs_it_again_and_takes_the_rung_anew(
        ladder, django_capture_on_commit_callbacks):
    """Our failure, not the node's: the lost rung ends aborted and the node goes back to quarantined (not rma); the
    next look takes the reset again, as a new rung."""
    node, smi_log = ladder()
    _fault(node, django_capture_on_commit_callbacks)
    action = LoopAction.objects.get(node=node)
    # a worker claimed it and died (its claim is all that is left)
    LoopAction.objects.filter(id=action.id).update(status="running", started=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert remediation.actions_sweep(now=timezone.now() + timedelta(hours=1)) == (1, 0)
        assert remediation.action_run(action.id) is None  # the task redelivered: the rung is not ours any more
    assert LoopAction.objects.get(id=action.id).status == "aborted"
    assert _state(node) == machine.QUARANTINED
    assert "-r -i" not in smi_log.read_text()
    moves = list(Transition.objects.filter(node=node).order_by("version").values_list("to_state", flat=True))
    assert moves == ["suspect", "quarantined", "remediating", "quarantined"]
    with django_capture_on_commit_callbacks(execute=False):
        report_ingest(node, watch_report())  # the next look, a moment later: the rung waits (CUDAWEB_LOOP_RETRY_S)
        assert "aborted 1 time in a row" in NodeLoop.objects.get(node=node).waiting
        assert not LoopAction.objects.filter(node=node, status="pending").exists()
        report_ingest(node, watch_report(), now=timezone.now() + timedelta(seconds=61))  # auto takes it again
    again = LoopAction.objects.get(node=node, status="pending")
    assert again.id != action.id and again.kind == "reset" and _state(node) == machine.REMEDIATING


@pytest.fixture
def reboot_ladder(ladder, loop_settings, tmp_path):
    """A node whose ladder is the site's reboot command alone: a stand-in that writes the argv it was given, one
    argument a line, and answers like a BMC tool."""
    def make(*, body="echo chassis power cycle: ok", timeout_s=30):
        argv_file = tmp_path / "reboot-argv"
        command = tmp_path / "site-reboot"
        command.write_text("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %s\n%s\n" % (argv_file, body))
        command.chmod(0o755)
        loop_settings.CUDAWEB_REBOOT_COMMAND = "%s --host {address} --node {node} 'power cycle'" % command
        loop_settings.CUDAWEB_REBOOT_TIMEOUT_S = timeout_s
        node, _ = ladder(rungs=("reboot",))
        return node, argv_file
    return make


def test_a_reboot_waits_for_the_drain_then_runs_the_sites_command_as_argv(reboot_ladder,
                                                                       django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    node, argv_file = reboot_ladder()
    _fault(node, capture)
    assert LoopAction.objects.get(node=node).kind == "reboot"
    busy = _run_live_action(node, capture)
    assert busy.status == "busy" and "drain is pending, not delivered" in busy.outcome
    assert not argv_file.exists() and _state(node) == machine.QUARANTINED
    _drains_delivered(node)
    user = get_user_model().objects.create_user("op")
    with capture(execute=True):
        operator_decide(node=node, user=user, verdict="remediate", action="reboot", reason="drain confirmed")
    done = _run_live_action(node, capture)
    assert done.status == "succeeded" and "chassis power cycle: ok" in done.outcome
    # each part of the template one argument, the node's fields filled in, no shell in between
    assert argv_file.read_text().splitlines() == ["--host", "127.0.0.1", "--node", "gpu-local", "power cycle"]
    assert _state(node) == machine.REVALIDATING


@pytest.mark.parametrize("body, status, said", [
    ("echo BMC unreachable >&2; exit 4", "failed", "exited 4: BMC unreachable"),
    ("sleep 5", "timed_out", "ran past 1 s"),
])
def test_a_reboot_that_fails_or_hangs_ends_named_and_never_leaves_the_rung_running(
        reboot_ladder, django_capture_on_commit_callbacks, body, status, said):
    node, _ = reboot_ladder(body=body, timeout_s=1)
    _fault(node, django_capture_on_commit_callbacks)
    _drains_delivered(node)
    action = _run_live_action(node, django_capture_on_commit_callbacks)
    assert action.status == status and said in action.outcome and action.finished is not None
    assert _state(node) == machine.RMA  # a failed or timed-out reboot, as a reset


def test_a_reboot_rung_without_a_configured_command_is_refused(settings):
    from cudaweb.health.policy import ladder_check

    settings.CUDAWEB_REBOOT_COMMAND = ""
    with pytest.raises(ValueError, match="CUDAWEB_REBOOT_COMMAND"):
        ladder_check(["reset", "reboot"])
    settings.CUDAWEB_REBOOT_COMMAND = "/usr/local/bin/site-reboot {node}"
    assert ladder_check(["reset", "reboot"]) == ("reset", "reboot")


def test_a_rung_no_worker_took_is_cancelled_when_an_operator_marks_the_node_healthy(
        ladder, django_capture_on_commit_callbacks):
    """Found by the state machine's property test in CI (2026-12-04): a reset still pending when an operator marked
    the node healthy stayed live, so it would have reset a GPU on a node back in service, and the next fault's rung
    could not start beside it."""
    capture = django_capture_on_commit_callbacks
    node, smi_log = ladder()
    _fault(node, capture)
    pending = LoopAction.objects.get(node=node, status="pending")
    user = get_user_model().objects.create_user("op")
    with capture(execute=True):
        operator_decide(node=node, user=user, verdict="healthy", reason="checked by hand")
    pending.refresh_from_db()
    assert pending.status == "cancelled" and "marked healthy" in pending.outcome
    with capture(execute=True):
        assert remediation.action_run(pending.id) is None  # its queued task finds it ended: never run
    assert "-r -i" not in smi_log.read_text() and _state(node) == machine.READY
    _drains_delivered(node)
    _fault(node, capture)  # the next fault gets a rung of its own
    assert LoopAction.objects.filter(node=node, status="pending").count() == 1


def test_an_operator_waits_for_a_running_rung_to_end(ladder, django_capture_on_commit_callbacks):
    node, _ = ladder()
    _fault(node, django_capture_on_commit_callbacks)
    LoopAction.objects.filter(node=node).update(status="running", started=timezone.now())
    user = get_user_model().objects.create_user("op")
    for verdict in ("healthy", "rma"):
        with pytest.raises(ValueError, match="reset is running on the node"):
            operator_decide(node=node, user=user, verdict=verdict, reason="checked by hand")
    assert _state(node) == machine.REMEDIATING
