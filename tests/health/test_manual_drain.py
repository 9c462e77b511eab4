"""A drain an operator set by hand is never undone by the loop, against the real Slurm programs (the fixtures of
tests/hooks/test_slurm.py: munged, slurmctld, slurmd and an sshd on loopback): the loop drains with reason
"cudaweb: ..." and resumes only a drain whose reason is its own, and never replaces the reason of a drain that was
there before its own."""

import pytest
from django.test import TestCase

from cudaweb.health import machine
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import LoopPolicy, NodeLoop
from cudaweb.health.services import operator_decide
from cudaweb.hooks.models import HookDelivery
from tests.health.standin import watch_report
from tests.hooks.conftest import eager_celery  # noqa: F401 (a fixture)
from tests.hooks.test_slurm import controller, gpu_node, slurm, state_and_reason  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def _fault(node):
    with TestCase.captureOnCommitCallbacks(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())


def _healthy(node, user):
    with TestCase.captureOnCommitCallbacks(execute=True):
        operator_decide(node=node, user=user, verdict="healthy", reason="replaced the riser")


def test_the_loop_drains_and_resumes_its_own_drain(slurm, controller, gpu_node, admin_user):  # noqa: F811
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=[], auto=False)
    gpu_node.labels = ["rack-a"]
    gpu_node.save()
    _fault(gpu_node)
    assert NodeLoop.objects.get(node=gpu_node).state == machine.QUARANTINED
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason.startswith("cudaweb: gpu_fallen_off_bus: ")
    drain = HookDelivery.objects.get(kind="slurm_drain")
    assert (drain.status, drain.last_error) == ("delivered", "")
    _healthy(gpu_node, admin_user)
    state, _ = state_and_reason(slurm.show_node())
    assert "DRAIN" not in state.split("+")
    resume = HookDelivery.objects.get(kind="slurm_resume")
    assert (resume.status, resume.last_error) == ("delivered", "")


def test_a_drain_an_operator_set_by_hand_survives_the_loop(slurm, controller, gpu_node, admin_user):  # noqa: F811
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=[], auto=False)
    gpu_node.labels = ["rack-a"]
    gpu_node.save()
    _fault(gpu_node)
    # an operator drains the node by hand meanwhile, for a reason of their own
    slurm.scontrol("update", "NodeName=gpu-fake-01", "State=DRAIN", "Reason=bios update")
    _healthy(gpu_node, admin_user)
    assert NodeLoop.objects.get(node=gpu_node).state == machine.READY
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    assert HookDelivery.objects.get(kind="slurm_resume").status == "skipped"


def test_a_drain_an_operator_set_before_the_loop_keeps_its_reason_and_survives(
        slurm, controller, gpu_node, admin_user):  # noqa: F811 (fixtures)
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=[], auto=False)
    gpu_node.labels = ["rack-a"]
    gpu_node.save()
    slurm.scontrol("update", "NodeName=gpu-fake-01", "State=DRAIN", "Reason=bios update")
    _fault(gpu_node)
    assert NodeLoop.objects.get(node=gpu_node).state == machine.QUARANTINED
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    # the node is out of the scheduler's hands all the same: the drain counts as delivered, and says whose it is
    drain = HookDelivery.objects.get(kind="slurm_drain")
    assert drain.status == "delivered" and "someone else" in drain.last_error and "bios update" in drain.last_error
    _healthy(gpu_node, admin_user)
    assert NodeLoop.objects.get(node=gpu_node).state == machine.READY
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    resume = HookDelivery.objects.get(kind="slurm_resume")
    assert resume.status == "skipped" and "someone else" in resume.last_error and "bios update" in resume.last_error
