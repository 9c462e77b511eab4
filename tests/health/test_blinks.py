"""A database blink mid-remediation (PostgreSQL ends the worker's connection, as a restart or a failover does) loses
no transition and repeats no rung: the rung's end and the transition it makes are one transaction, tried again whole
on a new connection."""

import pytest

from cudaweb.health import actions, machine, remediation, services
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from tests.health.standin import standin_nvidia_smi, watch_report
from tests.validation.test_database_blinks import drop_my_connection, postgres_only

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def remediating(loop_settings, tmp_path, settings, monkeypatch):
    postgres_only()
    # The test runs each rung itself: a worker of another test still up must not take them from the broker (it ran
    # the revalidation beside the teardown's flush, which then deadlocked on PostgreSQL)
    monkeypatch.setattr(actions, "action_enqueue", lambda action_id: None)
    settings.CUDAWEB_DB_RETRY_S, settings.CUDAWEB_DB_RETRY_FIRST_S = 5, 0.05
    smi, log = standin_nvidia_smi(tmp_path)
    loop_settings.CUDAWEB_NVIDIA_SMI = [str(smi)]
    loop_settings.CUDAWEB_SLURM_CONTROLLER = ""  # no scheduler, said so by the policy: the reset needs idle GPUs only
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=["reset"], auto=False, no_scheduler=True)
    node = Node.objects.create(name="gpu-blink", transport=Node.Transport.LOCAL, address="127.0.0.1",
                               labels=["rack-a"], status=Node.Status.READY)
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report())
    assert NodeLoop.objects.get(node=node).state == machine.QUARANTINED
    user = type(node)._meta.apps.get_model("auth", "User").objects.create(username="op")
    services.operator_decide(node=node, user=user, verdict="remediate", action="reset", reason="try a reset")
    return node, log


def test_a_blink_as_the_reset_ends_loses_no_transition_and_repeats_nothing(remediating, monkeypatch):
    node, smi_log = remediating
    original, blinks = services.apply, []

    def apply_after_a_blink(*args, **kwargs):
        if not blinks:
            blinks.append(drop_my_connection())  # the server ends the connection inside the rung's transaction
        return original(*args, **kwargs)

    monkeypatch.setattr(services, "apply", apply_after_a_blink)
    action = LoopAction.objects.get(node=node, kind="reset")
    assert remediation.action_run(action.id) == "succeeded"
    assert blinks  # it did blink
    assert smi_log.read_text().count("-r -i") == 1  # the reset ran once, its end was kept on the second try
    assert LoopAction.objects.get(id=action.id).status == "succeeded"
    moves = list(Transition.objects.filter(node=node).order_by("version").values_list("from_state", "to_state"))
    assert moves == [("ready", "suspect"), ("suspect", "quarantined"), ("quarantined", "remediating"),
                     ("remediating", "revalidating")]
    assert LoopAction.objects.filter(node=node, kind="revalidate").count() == 1
    assert remediation.action_run(action.id) is None  # redelivered: not run again
    assert smi_log.read_text().count("-r -i") == 1
    assert not HookDelivery.objects.filter(node=node, kind="slurm_drain").exists()
