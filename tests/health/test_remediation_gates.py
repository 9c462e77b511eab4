"""A reset or reboot acts only on what the dashboard knows: a GPU named by NVIDIA's UUID form that nvidia-smi lists on
that node now (never an index or free text from a report), on a node every configured scheduler has drained
(delivered, each of them), or, where the node's policy says it has no scheduler, only while no process holds any of
its GPUs. The breaker's window starts again when an admin closes it. (cudaweb/health/remediation.py, services.py)"""

from datetime import timedelta

import pytest
from django.utils import timezone

from cudaweb.health import machine, remediation, services
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import Breaker, LoopAction, LoopPolicy, NodeLoop
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from tests.health.conftest import make_node
from tests.health.standin import UUID, standin_nvidia_smi, watch_report

pytestmark = pytest.mark.django_db
OTHER_UUID = "GPU-00000000-1111-2222-3333-444444444444"


@pytest.fixture
def rung(loop_settings, tmp_path):
    """make(kind, gpu_uuid, busy_pid=..., no_scheduler=...) -> (the node's running rung, the nvidia-smi log): a
    quarantined local node whose rung a worker has just claimed."""
    def make(kind="reset", gpu_uuid=UUID, *, busy_pid=None, no_scheduler=False, busy_uuid=UUID):
        smi, log = standin_nvidia_smi(tmp_path, busy_pid=busy_pid)
        if busy_uuid != UUID:
            smi.write_text(smi.read_text().replace("printf '%s, " % UUID, "printf '%s, " % busy_uuid))
        loop_settings.CUDAWEB_NVIDIA_SMI = [str(smi)]
        LoopPolicy.objects.create(label="rack-a", mode="act", ladder=[kind], auto=False, no_scheduler=no_scheduler)
        node = Node.objects.create(name="gpu-gate", transport=Node.Transport.LOCAL, address="127.0.0.1",
                                   labels=["rack-a"], status=Node.Status.QUARANTINED)
        NodeLoop.objects.create(node=node, state=machine.REMEDIATING, root_cause="gpu_fallen_off_bus", action=kind)
        now = timezone.now()
        action = LoopAction.objects.create(node=node, kind=kind, key="k-%s" % kind, requested_by="loop",
                                           gpu_uuid=gpu_uuid, status=LoopAction.Status.RUNNING, created=now,
                                           started=now, deadline=now + timedelta(minutes=5))
        return node, action, log
    return make


def _drain(node, kind, status=HookDelivery.Status.DELIVERED):
    return HookDelivery.objects.create(kind=kind, event="quarantined", node=node, payload={}, status=status)


@pytest.mark.parametrize("named, status", [
    ("0", "skipped"), ("1", "skipped"), ("--help", "skipped"), ("all", "skipped"), ("", "skipped"),
    (UUID.upper(), "skipped"),  # not NVIDIA's form: no GPU named, the ladder's next rung
    (OTHER_UUID, "failed"),  # NVIDIA's form, not on this node
])
def test_a_reset_never_runs_on_a_gpu_named_by_index_free_text_or_not_on_the_node(rung, named, status):
    node, action, log = rung(gpu_uuid=named)
    _drain(node, HookDelivery.Kind.SLURM_DRAIN)
    got, outcome = remediation._reset(action)
    assert got == status, outcome
    assert "-r" not in log.read_text().split()


def test_a_reset_that_does_not_apply_takes_the_ladders_next_rung_not_rma(rung, loop_settings):
    """A node-wide fault names no GPU (the driver did not say which): the reset is skipped, the reboot is next."""
    loop_settings.CUDAWEB_REBOOT_COMMAND = "/bin/true {node}"
    node, action, log = rung(gpu_uuid="")
    LoopPolicy.objects.filter(label="rack-a").update(ladder=["reset", "reboot"], auto=True)
    _drain(node, HookDelivery.Kind.SLURM_DRAIN)
    assert remediation.action_finish(action, *remediation._reset(action)) == "skipped"
    loop = NodeLoop.objects.get(node=node)
    assert (loop.state, loop.action) == (machine.REMEDIATING, machine.REBOOT)


def test_a_reset_runs_on_a_gpu_the_node_lists_once_it_is_drained(rung):
    node, action, log = rung()
    _drain(node, HookDelivery.Kind.SLURM_DRAIN)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.SUCCEEDED, outcome
    assert "-r -i %s" % UUID in log.read_text()


def test_with_no_scheduler_hook_and_no_word_of_the_policy_nothing_is_reset_or_rebooted(rung, loop_settings):
    loop_settings.CUDAWEB_SLURM_CONTROLLER = ""
    loop_settings.CUDAWEB_REBOOT_COMMAND = "/bin/true {node}"
    node, action, log = rung()
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.BUSY and "no scheduler is configured" in outcome
    action.kind = machine.REBOOT
    status, outcome = remediation._reboot(action)
    assert status == LoopAction.Status.BUSY and "no scheduler is configured" in outcome
    assert log.read_text() == ""


def test_with_no_scheduler_said_by_the_policy_any_process_on_any_gpu_holds_the_reset(rung, loop_settings):
    loop_settings.CUDAWEB_SLURM_CONTROLLER = ""
    node, action, log = rung(no_scheduler=True, busy_pid=4242, busy_uuid=OTHER_UUID)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.BUSY and "4242" in outcome and "no scheduler" in outcome
    assert "-r" not in log.read_text().split()


def test_with_no_scheduler_said_by_the_policy_and_every_gpu_idle_the_reset_runs(rung, loop_settings):
    loop_settings.CUDAWEB_SLURM_CONTROLLER = ""
    node, action, log = rung(no_scheduler=True)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.SUCCEEDED, outcome


def test_a_reboot_with_no_scheduler_waits_for_every_gpu_to_be_idle(rung, loop_settings, tmp_path):
    loop_settings.CUDAWEB_SLURM_CONTROLLER = ""
    marker = tmp_path / "rebooted"
    loop_settings.CUDAWEB_REBOOT_COMMAND = "/usr/bin/touch %s" % marker
    node, action, log = rung(kind=machine.REBOOT, no_scheduler=True, busy_pid=77)
    status, outcome = remediation._reboot(action)
    assert status == LoopAction.Status.BUSY and "77" in outcome and not marker.exists()


def test_with_slurm_and_kubernetes_both_must_have_delivered_their_drain(rung, loop_settings):
    loop_settings.CUDAWEB_K8S_API = "https://127.0.0.1:6443"
    node, action, log = rung()
    _drain(node, HookDelivery.Kind.K8S_CORDON)
    slurm = _drain(node, HookDelivery.Kind.SLURM_DRAIN, status=HookDelivery.Status.PENDING)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.BUSY and "Slurm drain is pending" in outcome
    HookDelivery.objects.filter(id=slurm.id).update(status=HookDelivery.Status.FAILED)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.BUSY and "Slurm drain is failed" in outcome
    HookDelivery.objects.filter(id=slurm.id).update(status=HookDelivery.Status.DELIVERED)
    _drain(node, HookDelivery.Kind.K8S_UNCORDON)  # the node was given back to Kubernetes since
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.BUSY and "no Kubernetes drain" in outcome
    _drain(node, HookDelivery.Kind.K8S_CORDON)
    assert remediation._reset(action)[0] == LoopAction.Status.SUCCEEDED
    assert log.read_text().count("-r -i") == 1


def test_the_breakers_window_starts_again_when_an_admin_closes_it(loop_settings, act_policy, admin_user):
    """A 12-node label allows one quarantine (10 %): the second node trips the breaker. An admin closes it after
    the first node was given back: the quarantine before the close is not counted again."""
    LoopPolicy.objects.filter(id=act_policy.id).update(auto=False)
    nodes = [make_node("w%02d" % i) for i in range(12)]
    for node in nodes[:2]:
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    assert [NodeLoop.objects.get(node=n).state for n in nodes[:2]] == [machine.QUARANTINED, machine.SUSPECT]
    assert Breaker.objects.get(id=1).is_open
    services.operator_decide(node=nodes[0], user=admin_user, verdict="healthy", reason="reseated")
    assert services.breaker_close(user=admin_user) == 1
    assert NodeLoop.objects.get(node=nodes[1]).state == machine.QUARANTINED
    assert not Breaker.objects.get(id=1).is_open


def test_a_reset_waits_for_a_drain_queued_a_moment_before_instead_of_ending_busy(rung, loop_settings, monkeypatch):
    """The quarantine queues its drain and the rung starts at once: a drain delivered while the reset waits for it
    lets the reset run (every first reset ended busy, then waited a retry); one still pending at the wait's end
    ends it busy."""
    loop_settings.CUDAWEB_LOOP_DRAIN_WAIT_S = 30
    node, action, log = rung()
    drain = _drain(node, HookDelivery.Kind.SLURM_DRAIN, status=HookDelivery.Status.PENDING)
    waits = []

    def delivered_meanwhile(seconds):  # the hooks' worker delivers it while the rung waits
        waits.append(seconds)
        HookDelivery.objects.filter(id=drain.id).update(status=HookDelivery.Status.DELIVERED)

    monkeypatch.setattr(remediation, "_pause", delivered_meanwhile)
    status, outcome = remediation._reset(action)
    assert status == LoopAction.Status.SUCCEEDED and len(waits) == 1, outcome
    loop_settings.CUDAWEB_LOOP_DRAIN_WAIT_S = 0
    HookDelivery.objects.filter(id=drain.id).update(status=HookDelivery.Status.PENDING)
    assert remediation._reset(action)[0] == LoopAction.Status.BUSY
