"""The loop on the database: a watch report -> events -> the node's state, drains, the breaker, shadow mode, an
operator's word. Stand-in reports (tests/health/standin.py) are recorded real ones with faults written in."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.health import machine, services
from cudaweb.health.ingest import ReportRefused, report_ingest
from cudaweb.health.models import Breaker, HealthEvent, LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from tests.health.conftest import make_node
from tests.health.standin import UUID, watch_report

pytestmark = pytest.mark.django_db


def _state(node):
    return NodeLoop.objects.get(node=node).state


def test_an_xid_makes_the_node_suspect_then_quarantined_and_drained(loop_settings, act_policy,
                                                                    django_capture_on_commit_callbacks):
    node = make_node("gpu-001")
    report_ingest(node, watch_report())
    assert _state(node) == machine.READY and not HealthEvent.objects.exists()
    with django_capture_on_commit_callbacks(execute=False):
        report_ingest(node, watch_report("xid79"))
    assert _state(node) == machine.SUSPECT
    event = HealthEvent.objects.get(node=node, signature="xid_critical")
    assert (event.gpu_uuid, event.klass, event.severity, event.check_id) == (UUID, "hardware", "fail", "driver.xid")
    assert "fallen off the bus" in event.evidence
    with django_capture_on_commit_callbacks(execute=False):
        report_ingest(node, watch_report())  # the next look: an Xid line is not seen twice, the fault stands
    assert _state(node) == machine.QUARANTINED
    assert Node.objects.get(id=node.id).status == Node.Status.QUARANTINED
    drain = HookDelivery.objects.get(node=node, kind=HookDelivery.Kind.SLURM_DRAIN)
    assert drain.payload["argv"][2] == "State=DRAIN" and drain.payload["argv"][3].startswith("Reason=cudaweb: ")
    moves = list(Transition.objects.filter(node=node).order_by("version").values_list("from_state", "to_state", "by"))
    assert moves == [("ready", "suspect", "loop"), ("suspect", "quarantined", "loop")]
    # two signatures on one line: the more specific one names the root cause
    suspect = Transition.objects.get(node=node, to_state="suspect")
    assert (suspect.event.signature, suspect.root_cause) == ("gpu_fallen_off_bus", "gpu_fallen_off_bus")
    assert AuditEvent.objects.filter(action="loop.transition", object_id=str(node.id)).count() == 2
    assert HookDelivery.objects.filter(node=node, event="node_state").count() == 2
    assert HookDelivery.objects.filter(node=node, event="health_event").exists()


def test_a_counter_that_keeps_growing_is_one_event_that_grows(loop_settings, act_policy):
    node = make_node("gpu-002")
    LoopPolicy.objects.filter(id=act_policy.id).update(mode="off")
    for _ in range(3):
        report_ingest(node, watch_report("nvlink_growth"))
    event = HealthEvent.objects.get(node=node)
    assert (event.signature, event.count, event.open) == ("nvlink_errors_growing", 3, True)
    assert event.last_seen > event.first_seen
    report_ingest(node, watch_report())  # it stopped growing: the event is over, the next growth is a new one
    report_ingest(node, watch_report("nvlink_growth"))
    assert list(HealthEvent.objects.filter(node=node).order_by("id").values_list("count", "open")) == [
        (3, False), (1, True)]


def test_an_application_xid_never_quarantines_a_node(loop_settings, act_policy):
    node = make_node("gpu-003")
    for _ in range(5):
        report_ingest(node, watch_report("xid13"))
    assert _state(node) == machine.READY
    event = HealthEvent.objects.get(node=node)
    assert (event.signature, event.klass, event.count) == ("xid_application", "application", 5)
    assert not Transition.objects.exists() and not HookDelivery.objects.filter(kind="slurm_drain").exists()


def test_a_fabric_state_that_recovers_at_the_next_look_clears_the_suspect(loop_settings, act_policy):
    node = make_node("gpu-004")
    report_ingest(node, watch_report("fabric_training"))
    assert _state(node) == machine.SUSPECT
    report_ingest(node, watch_report())
    assert _state(node) == machine.READY
    assert not HookDelivery.objects.filter(kind="slurm_drain").exists()


def test_shadow_mode_changes_nothing_and_shows_what_it_would_do(loop_settings, act_policy):
    LoopPolicy.objects.filter(id=act_policy.id).update(mode="record")
    node = make_node("gpu-005")
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report())
    loop = NodeLoop.objects.get(node=node)
    assert (loop.state, loop.shadow_state) == (machine.READY, machine.QUARANTINED)
    assert Node.objects.get(id=node.id).status == Node.Status.READY
    assert not HookDelivery.objects.filter(kind__in=("slurm_drain", "k8s_cordon")).exists()
    assert not LoopAction.objects.exists()
    shadow = Transition.objects.get(node=node, to_state="quarantined")
    assert shadow.shadow and shadow.effects == ["drain"]


def test_policy_off_records_events_only(loop_settings, act_policy):
    LoopPolicy.objects.filter(id=act_policy.id).update(mode="off")
    node = make_node("gpu-006")
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report("xid79"))
    assert _state(node) == machine.READY and HealthEvent.objects.filter(node=node).count() == 2
    assert not Transition.objects.exists()


def test_the_breaker_holds_the_eleventh_node_of_a_hundred_and_says_why(loop_settings, act_policy, admin_user):
    LoopPolicy.objects.filter(id=act_policy.id).update(auto=False)
    nodes = [make_node("n%03d" % i) for i in range(100)]
    for node in nodes[:11]:
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    states = [_state(node) for node in nodes[:11]]
    assert states == [machine.QUARANTINED] * 10 + [machine.SUSPECT]
    breaker = Breaker.objects.get(id=1)
    assert breaker.is_open and "10" in breaker.reason
    assert "breaker open" in NodeLoop.objects.get(node=nodes[10]).waiting
    assert HookDelivery.objects.filter(event="breaker_open").count() == 1
    assert HookDelivery.objects.filter(kind="slurm_drain").count() == 10
    # events are still recorded while it is open
    report_ingest(nodes[20], watch_report("xid79"))
    assert HealthEvent.objects.filter(node=nodes[20]).exists()
    # an admin closes it: the limits still hold, the held node is looked at again and the breaker opens again
    assert services.breaker_close(user=admin_user) == 1
    assert _state(nodes[10]) == machine.SUSPECT and Breaker.objects.get(id=1).is_open
    assert AuditEvent.objects.filter(action="loop.breaker_closed").count() == 1


def test_a_label_share_trips_the_breaker_before_the_absolute_limit(loop_settings, act_policy):
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 50
    nodes = [make_node("r%02d" % i) for i in range(30)]  # 10 % of 30: 3
    for node in nodes[:4]:
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    assert [_state(node) for node in nodes[:4]] == [machine.QUARANTINED] * 3 + [machine.SUSPECT]
    assert "rack-a" in Breaker.objects.get(id=1).reason


def test_an_operator_marks_a_node_healthy_or_sends_it_to_rma_with_a_reason(loop_settings, act_policy, admin_user,
                                                                           django_capture_on_commit_callbacks):
    LoopPolicy.objects.filter(id=act_policy.id).update(auto=False)
    node = make_node("gpu-007")
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report())
    with pytest.raises(ValueError):
        services.operator_decide(node=node, user=admin_user, verdict="healthy", reason="  ")
    services.operator_decide(node=node, user=admin_user, verdict="healthy", reason="reseated the riser")
    assert _state(node) == machine.READY
    last = Transition.objects.filter(node=node).first()
    assert (last.by, last.actor, last.to_state) == (admin_user.username, admin_user, "ready")
    assert "reseated the riser" in last.why
    assert HookDelivery.objects.filter(node=node, kind="slurm_resume").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        services.operator_decide(node=node, user=admin_user, verdict="rma", reason="vendor asked for it")
    assert _state(node) == machine.RMA
    rma = Transition.objects.get(node=node, to_state="rma")
    assert rma.bundle.name.endswith(".zip") and len(rma.bundle.data) > 100


def test_a_report_that_is_not_a_watch_report_is_refused_whole(loop_settings, act_policy):
    node = make_node("gpu-008")
    quick = watch_report("xid79")
    quick["mode"] = "quick"
    for bad in (quick, [], {"schema": "cudaprobe/1", "mode": "watch", "checks": "x"}):
        with pytest.raises(ReportRefused):
            report_ingest(node, bad)
    assert not HealthEvent.objects.exists()


def test_a_decision_applied_twice_makes_one_transition_and_one_rung(loop_settings, act_policy):
    """A redelivered task, or two workers at once: the second apply of one decision finds the version moved."""
    node = make_node("gpu-009")
    services.loop_of(node)
    NodeLoop.objects.filter(node=node).update(state=machine.QUARANTINED, root_cause="xid_critical")
    row = NodeLoop.objects.get(node=node)
    loop = machine.Loop(state=machine.QUARANTINED, root_cause="xid_critical", ladder=("reset",), auto=True)
    decision = machine.step(loop, machine.Stimulus(machine.ADVANCE))
    now = timezone.now()
    first = services._transition(node, row, decision, shadow=False, by="loop", actor=None, event=None, run=None,
                                 now=now, from_state=machine.QUARANTINED)
    second = services._transition(node, row, decision, shadow=False, by="loop", actor=None, event=None, run=None,
                                  now=now + timedelta(seconds=1), from_state=machine.QUARANTINED)
    assert first is not None and second is None
    assert Transition.objects.filter(node=node).count() == 1 and LoopAction.objects.filter(node=node).count() == 1
