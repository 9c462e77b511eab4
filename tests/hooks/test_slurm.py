"""Slurm drain on quarantine and resume on acceptance, against the real programs: Debian's munged, slurmctld and
slurmd (one fake node, started by the test), reached through cudaweb's SSH transport to a real sshd on loopback
with the controller's host key pinned as for any node."""

import os
import re
import sys

import pytest
from django.test import TestCase

from cudaweb.fleet.services import acceptance_decide
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import host_key_accept, host_key_record
from cudaweb.remote.connect import ssh_node_create
from tests.drift.helpers import real_report, scaled, stored_run
from tests.hooks.slurm_cluster import SlurmCluster, SlurmUnavailable

pytestmark = pytest.mark.django_db
TRICKY = "Xid 79 'GPU has fallen off the bus'; $(touch /tmp/cudaweb-pwned) \"quoted\""


@pytest.fixture(scope="module")
def slurm():
    try:
        cluster = SlurmCluster(node_name="gpu-fake-01")
    except SlurmUnavailable as exc:
        pytest.skip("slurmctld cannot run here: %s" % exc)
    yield cluster
    cluster.close()


@pytest.fixture
def controller(sshd, slurm, admin_user, settings, eager_celery):
    node = ssh_node_create(name="slurm-ctl", address="127.0.0.1", port=sshd.port, username="root",
                           private_key=sshd.private_key(), python_path=sys.executable)
    key_type, key_base64 = sshd.public_key("host_key")
    host_key_record(node=node, key_type=key_type, key_base64=key_base64, fingerprint=sshd.fingerprint())
    host_key_accept(node=node, user=admin_user)
    settings.CUDAWEB_SLURM_CONTROLLER = "slurm-ctl"
    settings.CUDAWEB_SLURM_SCONTROL = slurm.scontrol_command()
    settings.CUDAWEB_HOOK_BACKOFF_S = 0.01
    yield node
    slurm.scontrol("update", "NodeName=gpu-fake-01", "State=RESUME", check=False)  # whatever a test left


@pytest.fixture
def gpu_node():
    return Node.objects.create(name="gpu-0042.cluster", slurm_name="gpu-fake-01", transport=Node.Transport.LOCAL)


def failing_report(summary):
    report = scaled(real_report(), statuses={"driver.gpu_health": "fail"})
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health")["summary"] = summary
    return report


def decide(node, run, decision, user):
    with TestCase.captureOnCommitCallbacks(execute=True):
        acceptance_decide(node=node, run=run, decision=decision, user=user)


def state_and_reason(text):
    # scontrol ends the reason with "[user@time]"; the reason itself may hold brackets ("[gpu_hardware]")
    return re.search(r"\bState=(\S+)", text).group(1), (re.search(r"\bReason=(.*) \[[^\]\s]*@[^\]\s]*\]", text) or
                                                       [None, ""])[1]


def test_quarantine_drains_and_acceptance_resumes(slurm, controller, gpu_node, admin_user):
    decide(gpu_node, stored_run(gpu_node, failing_report(TRICKY)), "quarantined", admin_user)
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+")
    # Every argument quoted (nothing ran); double quotes become single ones, which scontrol keeps.
    # The root cause: the check, its playbook, its summary.
    assert reason == "cudaweb: L1 driver.gpu_health [gpu_hardware]: %s" % TRICKY.replace('"', "'")
    assert not os.path.exists("/tmp/cudaweb-pwned")
    drain = HookDelivery.objects.get(kind="slurm_drain")
    assert drain.status == "delivered" and drain.attempts == 1
    assert drain.payload["argv"][:3] == ["update", "NodeName=gpu-fake-01", "State=DRAIN"]

    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    state, _ = state_and_reason(slurm.show_node())
    assert "DRAIN" not in state.split("+") and HookDelivery.objects.get(kind="slurm_resume").status == "delivered"


def test_a_drain_someone_else_set_is_left_alone(slurm, controller, gpu_node, admin_user):
    slurm.scontrol("update", "NodeName=gpu-fake-01", "State=DRAIN", "Reason=bios update")
    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    assert HookDelivery.objects.get(kind="slurm_resume").status == "skipped"


def test_a_drain_someone_else_set_before_a_quarantine_keeps_its_reason(slurm, controller, gpu_node, admin_user):
    slurm.scontrol("update", "NodeName=gpu-fake-01", "State=DRAIN", "Reason=bios update")
    decide(gpu_node, stored_run(gpu_node, failing_report("Xid 79")), "quarantined", admin_user)
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    drain = HookDelivery.objects.get(kind="slurm_drain")  # out of the scheduler's hands: delivered, and whose
    assert drain.status == "delivered" and drain.last_error.startswith("already drained by someone else")
    assert "Reason=bios update" in drain.last_error

    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    state, reason = state_and_reason(slurm.show_node())
    assert "DRAIN" in state.split("+") and reason == "bios update"
    resume = HookDelivery.objects.get(kind="slurm_resume")
    assert resume.status == "skipped" and resume.last_error == "drained by someone else (Reason=bios update): left " \
        "drained"


def test_a_second_quarantine_replaces_cudaweb_s_own_reason(slurm, controller, gpu_node, admin_user):
    decide(gpu_node, stored_run(gpu_node, failing_report("Xid 48")), "quarantined", admin_user)
    decide(gpu_node, stored_run(gpu_node, failing_report("Xid 79")), "quarantined", admin_user)
    _, reason = state_and_reason(slurm.show_node())
    assert reason == "cudaweb: L1 driver.gpu_health [gpu_hardware]: Xid 79"
    drains = HookDelivery.objects.filter(kind="slurm_drain")
    assert [(d.status, d.last_error) for d in drains] == [("delivered", "")] * 2


def test_acceptance_of_a_node_not_drained_resumes_nothing(slurm, controller, gpu_node, admin_user):
    decide(gpu_node, stored_run(gpu_node, real_report()), "accepted", admin_user)
    resume = HookDelivery.objects.get(kind="slurm_resume")
    assert resume.status == "skipped" and resume.last_error.startswith("not drained (State=")


def test_an_unknown_slurm_node_fails_after_bounded_tries(slurm, controller, admin_user, settings):
    settings.CUDAWEB_HOOK_TRIES = 2
    node = Node.objects.create(name="not-in-slurm", transport=Node.Transport.LOCAL)
    decide(node, stored_run(node, failing_report("Xid 48")), "quarantined", admin_user)
    drain = HookDelivery.objects.get(kind="slurm_drain")
    # the drain first reads the node's state and reason: Slurm's answer for a node it does not know
    assert drain.status == "failed" and drain.attempts == 2 and "not-in-slurm not found" in drain.last_error


def test_the_drain_reason_names_the_check_and_its_playbook(admin_user, settings, eager_celery):
    """Without slurmctld: the drain's argv as kept (its controller is no node, so nothing is sent)."""
    settings.CUDAWEB_SLURM_CONTROLLER = "slurm-ctl"
    node = Node.objects.create(name="gpu-0042.cluster", slurm_name="gpu-fake-01", transport=Node.Transport.LOCAL)
    run = stored_run(node, failing_report("GPU 3 fell off the bus (Xid 79) " + "x" * 400))
    decide(node, run, "quarantined", admin_user)
    reason = HookDelivery.objects.get(kind="slurm_drain").payload["argv"][3]
    assert reason.startswith("Reason=cudaweb: L1 driver.gpu_health [gpu_hardware]: GPU 3 fell off the bus")
    assert len(reason) == len("Reason=") + 200


def test_a_summary_with_controls_drains_with_one_clean_line(slurm, controller, gpu_node, admin_user):
    from tests.hooks.test_outbound import HOSTILE, assert_clean

    decide(gpu_node, stored_run(gpu_node, failing_report(HOSTILE)), "quarantined", admin_user)
    _, reason = state_and_reason(slurm.show_node())
    assert reason.startswith("cudaweb: L1 driver.gpu_health: GPU 1 fell off the bus *gpu-a05* is ready")
    assert_clean(reason)
    assert all(" " <= c <= "~" for c in reason)
