"""The loop decides once and right under every fault (cudaweb/health/remediation.py, services.py): no rung starts on
a node an operator has just moved on, no operator's word is applied beside a running rung, the breaker counts the
loop's drains on the way to rma, a policy changed mid-rung strands no node, our own failures (a lost worker, a
database away, a run we lost) never move a node up the ladder, a rung's deadline runs from its start, and a
re-validation never adopts a run begun before it. Each test is a reproduction of a path that broke."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from cudaweb.health import machine, remediation, services
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import Breaker, LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.health.conftest import make_node
from tests.health.standin import standin_nvidia_smi, watch_report

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_worker_takes_the_rungs(monkeypatch):
    """The tests run each rung themselves: a worker of another test still up must not take them from the broker."""
    from cudaweb.health import actions

    monkeypatch.setattr(actions, "action_enqueue", lambda action_id: None)


@pytest.fixture
def remediating(loop_settings, tmp_path, django_capture_on_commit_callbacks):
    """make(rungs) -> (a local node quarantined for an Xid 79 whose first rung is pending, the nvidia-smi log)."""
    def make(rungs=("reset",), auto=True):
        smi, log = standin_nvidia_smi(tmp_path)
        loop_settings.CUDAWEB_NVIDIA_SMI = [str(smi)]
        LoopPolicy.objects.create(label="rack-a", mode="act", ladder=list(rungs), auto=auto)
        node = Node.objects.create(name="gpu-fault", transport=Node.Transport.LOCAL, address="127.0.0.1",
                                   labels=["rack-a"], status=Node.Status.READY)
        with django_capture_on_commit_callbacks(execute=True):
            report_ingest(node, watch_report("xid79"))
            report_ingest(node, watch_report())
        HookDelivery.objects.filter(node=node, kind="slurm_drain").update(status=HookDelivery.Status.DELIVERED)
        return node, log
    return make


def _state(node):
    return NodeLoop.objects.get(node=node).state


def _user():
    return get_user_model().objects.get_or_create(username="op")[0]


def test_a_rung_pending_when_an_operator_marks_the_node_healthy_never_runs(remediating,
                                                                         django_capture_on_commit_callbacks):
    node, smi_log = remediating()
    action = LoopAction.objects.get(node=node, status="pending")
    with django_capture_on_commit_callbacks(execute=True):
        services.operator_decide(node=node, user=_user(), verdict="healthy", reason="reseated the card")
        HookDelivery.objects.filter(node=node).update(status=HookDelivery.Status.DELIVERED)
        # the task was already on the queue: a worker takes it after the operator's word
        LoopAction.objects.filter(id=action.id).update(status="pending")  # as if the cancel had raced the claim
        assert remediation.action_run(action.id) is None
    assert LoopAction.objects.get(id=action.id).status == "cancelled"
    assert "-r" not in smi_log.read_text().split() and _state(node) == machine.READY


@pytest.mark.django_db(transaction=True)
def test_an_operators_word_waits_for_a_rung_a_worker_is_claiming_and_running(remediating, monkeypatch):
    """Two connections on the real database: a worker claims the reset and holds it running; the operator's
    "healthy" in between is refused (decided under the node's lock, the lock the claim takes too)."""
    node, smi_log = remediating()
    action = LoopAction.objects.get(node=node, status="pending")
    claimed, release = threading.Event(), threading.Event()

    def slow_reset(running):
        claimed.set()
        release.wait(30)
        return remediation.Status.SUCCEEDED, "GPU reset: ok"

    monkeypatch.setattr(remediation, "_reset", slow_reset)
    worker = threading.Thread(target=lambda: (remediation.action_run(action.id), connection.close()))
    worker.start()
    try:
        assert claimed.wait(30)
        with pytest.raises(services.RungRunning, match="a reset is running"):
            services.operator_decide(node=node, user=_user(), verdict="healthy", reason="back in service")
        assert _state(node) == machine.REMEDIATING
    finally:
        release.set()
        worker.join(30)
    assert LoopAction.objects.get(id=action.id).status == "succeeded" and _state(node) == machine.REVALIDATING


def test_a_repeated_cause_drains_straight_to_rma_within_the_breakers_limit(loop_settings, act_policy):
    """40 nodes remediated for Xid 79 before: a new one each goes straight to rma, draining; the breaker counts those
    drains as it counts quarantines (its node limit; one label each, so no label's share trips first)."""
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 3
    LoopPolicy.objects.all().delete()
    nodes = []
    for i in range(6):
        LoopPolicy.objects.create(label="rack-%d" % i, mode="act", ladder=["reset"], auto=False, repeat_limit=1)
        nodes.append(make_node("gpu-rep-%d" % i, labels=("rack-%d" % i,)))
    for node in nodes:
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    states = [_state(node) for node in nodes]
    assert states == [machine.RMA] * 3 + [machine.SUSPECT] * 3, states
    assert HookDelivery.objects.filter(kind="slurm_drain").count() == 3
    assert Breaker.objects.get(id=1).is_open


def test_the_breakers_node_limit_holds_across_labels(loop_settings, act_policy):
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 2
    LoopPolicy.objects.all().delete()
    nodes = []
    for i in range(4):
        LoopPolicy.objects.create(label="row-%d" % i, mode="act", ladder=["reset"], auto=False)
        nodes.append(make_node("gpu-row-%d" % i, labels=("row-%d" % i,)))
    for node in nodes:
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    assert [_state(node) for node in nodes] == [machine.QUARANTINED] * 2 + [machine.SUSPECT] * 2
    assert "CUDAWEB_BREAKER_MAX_NODES" in Breaker.objects.get(id=1).reason


def test_the_breaker_counts_quarantines_within_its_window_only_and_never_shadow_ones(loop_settings, act_policy):
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 2
    loop_settings.CUDAWEB_BREAKER_MAX_PCT = 100  # the node limit alone
    LoopPolicy.objects.all().delete()
    LoopPolicy.objects.create(label="row", mode="act", ladder=["reset"], auto=False)
    old, shadow, fresh = (make_node("gpu-w-%s" % n, labels=("row", "w-%s" % n)) for n in ("old", "shadow", "new"))
    past = timezone.now() - timedelta(seconds=loop_settings.CUDAWEB_BREAKER_WINDOW_S + 60)
    Transition.objects.create(node=old, version=1, from_state="suspect", to_state="quarantined", by="loop", why="x",
                              at=past)
    for version in (1, 2, 3):  # shadow mode's quarantines drain nothing: never counted
        Transition.objects.create(node=shadow, version=version, shadow=True, from_state="suspect",
                                  to_state="quarantined", by="loop", why="x", at=timezone.now())
    for name in ("a", "b"):
        node = make_node("gpu-w-%s" % name, labels=("row", "w-%s" % name))
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
        assert _state(node) == machine.QUARANTINED, name
    report_ingest(fresh, watch_report("xid79"))
    report_ingest(fresh, watch_report())
    assert _state(fresh) == machine.SUSPECT  # the third within the window: the limit of 2 holds


@pytest.mark.parametrize("change", ["record", "off", "relabel"])
def test_a_policy_changed_mid_rung_strands_no_node(remediating, django_capture_on_commit_callbacks, change):
    node, _ = remediating()
    action = LoopAction.objects.get(node=node, status="pending")
    if change == "relabel":
        Node.objects.filter(id=node.id).update(labels=["rack-b"])  # the defaults' policy: record
    else:
        LoopPolicy.objects.filter(label="rack-a").update(mode=change)
    node.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        assert remediation.action_run(action.id) == "succeeded"
    loop = NodeLoop.objects.get(node=node)
    assert (loop.state, loop.action) == (machine.REVALIDATING, machine.REVALIDATE)
    revalidation = LoopAction.objects.get(node=node, kind="revalidate")
    assert revalidation.status in ("pending", "running")


@pytest.mark.parametrize("ended", [ValidationRun.Status.INTERRUPTED, ValidationRun.Status.DASHBOARD_ERROR])
def test_a_revalidation_lost_by_our_own_failure_never_moves_the_node_up_the_ladder(
        loop_settings, django_capture_on_commit_callbacks, monkeypatch, ended):
    from cudaweb.validation import queue

    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=["revalidate", "reset"], auto=True)
    node = make_node("gpu-own")
    with django_capture_on_commit_callbacks(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    action = LoopAction.objects.get(node=node, kind="revalidate")
    with django_capture_on_commit_callbacks(execute=True):
        remediation.action_run(action.id)
    run = LoopAction.objects.get(id=action.id).run
    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run=run, status=ended, from_statuses=(ValidationRun.Status.PENDING,))
    assert LoopAction.objects.get(id=action.id).status == "aborted"
    loop = NodeLoop.objects.get(node=node)
    assert (loop.state, loop.rung) == (machine.QUARANTINED, 0)  # not the reset, not rma
    assert not LoopAction.objects.filter(node=node, kind="reset").exists()


def test_a_revalidation_follows_the_retry_of_a_run_a_killed_worker_lost(loop_settings,
                                                                        django_capture_on_commit_callbacks,
                                                                        monkeypatch):
    from cudaweb.validation import queue, reaper

    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    monkeypatch.setattr(queue, "enqueue", lambda run, budget: None)
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=["revalidate", "reset"], auto=True)
    node = make_node("gpu-lost")
    with django_capture_on_commit_callbacks(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    with django_capture_on_commit_callbacks(execute=True):
        remediation.action_run(LoopAction.objects.get(node=node).id)
    action = LoopAction.objects.get(node=node)
    ValidationRun.objects.filter(id=action.run_id).update(status=ValidationRun.Status.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        retry = reaper.run_lost(run_id=action.run_id, reason="its worker was killed")
    action.refresh_from_db()
    assert action.status == "running" and action.run_id == retry.id
    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run=retry, status=ValidationRun.Status.PASSED, from_statuses=(ValidationRun.Status.PENDING,))
    assert _state(node) == machine.READY


def test_a_rungs_deadline_runs_from_its_claim_not_its_creation(remediating, django_capture_on_commit_callbacks,
                                                               monkeypatch):
    node, _ = remediating()
    action = LoopAction.objects.get(node=node, status="pending")
    LoopAction.objects.filter(id=action.id).update(created=timezone.now() - timedelta(hours=2),
                                                   deadline=timezone.now() - timedelta(hours=1))  # workers were down
    monkeypatch.setattr(remediation, "_reset", lambda running: (remediation.Status.RUNNING, ""))
    claimed = remediation._claim(action.id)
    assert claimed is not None
    action.refresh_from_db()
    assert action.deadline > timezone.now() + timedelta(seconds=60)
    assert remediation.actions_sweep() == (0, 0)  # not ended as late a moment after it started
    assert LoopAction.objects.get(id=action.id).status == "running"


def test_a_revalidation_never_adopts_a_run_begun_before_it(loop_settings, django_capture_on_commit_callbacks,
                                                          monkeypatch):
    from cudaweb.validation import queue
    from cudaweb.validation.services import run_request

    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    LoopPolicy.objects.create(label="rack-a", mode="act", ladder=["revalidate"], auto=True)
    node = make_node("gpu-adopt")
    with django_capture_on_commit_callbacks(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    earlier = run_request(node=node, mode=ValidationRun.Mode.QUICK)  # an operator's quick run, before the rung
    action = LoopAction.objects.get(node=node, kind="revalidate")
    with django_capture_on_commit_callbacks(execute=True):
        remediation.action_run(action.id)
    action.refresh_from_db()
    assert action.status == "running" and action.run_id is None and str(earlier.id) in action.outcome
    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run=earlier, status=ValidationRun.Status.PASSED, from_statuses=(ValidationRun.Status.PENDING,))
    action.refresh_from_db()
    assert _state(node) == machine.REVALIDATING  # the earlier run's pass is not the rung's
    assert action.run_id not in (None, earlier.id) and action.run.mode == ValidationRun.Mode.STANDARD
    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run=action.run, status=ValidationRun.Status.PASSED, from_statuses=(ValidationRun.Status.PENDING,))
    assert _state(node) == machine.READY


def test_a_runs_hardware_verdict_reaches_the_loop_as_a_look_would(loop_settings, act_policy,
                                                                   django_capture_on_commit_callbacks):
    """A scheduled (or an operator's) run that fails at L1 with an Xid 79 makes the node suspect in the loop, not
    only "Failing" on its page; the next look confirms it. A clean run closes the events it no longer shows."""
    node = make_node("gpu-run-xid")
    look = watch_report("xid79")
    report = {**look, "mode": "standard", "checks": look["checks"] + [
        {"id": "training.resnet_amp", "layer": "L6", "status": "pass", "signatures": []}]}
    run = ValidationRun.objects.create(node=node, mode="standard", status=ValidationRun.Status.RUNNING,
                                       trigger=ValidationRun.Trigger.SCHEDULED)
    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run=run, status=ValidationRun.Status.FAILED, report=report)
    assert _state(node) == machine.SUSPECT
    event = node.health_events.get(signature="gpu_fallen_off_bus")
    assert event.klass == "hardware" and not node.health_events.filter(check_id="training.resnet_amp").exists()
    report_ingest(node, watch_report())  # the next look: an Xid is not seen twice, it confirms
    assert _state(node) == machine.QUARANTINED


def test_a_busy_node_is_not_cycled_through_its_rung_at_every_look(remediating, django_capture_on_commit_callbacks):
    """A process holds the GPU: the reset is busy, and taken again only after CUDAWEB_LOOP_RETRY_S, doubling each
    time in a row (it was taken at every look: 44 busy rungs and 90 transitions in 4 minutes)."""
    node, _ = remediating()
    now = timezone.now()
    for n, wait_s in enumerate((60, 120, 240)):
        action = LoopAction.objects.get(node=node, status="pending")
        claimed = remediation._claim(action.id)
        remediation.action_finish(claimed, remediation.Status.BUSY, "process(es) 4242 hold GPU x: not reset")
        finished = LoopAction.objects.get(id=action.id).finished
        with django_capture_on_commit_callbacks(execute=True):
            for seconds in (1, wait_s // 2, wait_s - 2):
                report_ingest(node, watch_report(), now=finished + timedelta(seconds=seconds))
                assert not LoopAction.objects.filter(node=node, status="pending").exists(), (n, seconds)
            assert "busy %d time" % (n + 1) in NodeLoop.objects.get(node=node).waiting
            report_ingest(node, watch_report(), now=finished + timedelta(seconds=wait_s + 1))
        assert LoopAction.objects.filter(node=node, status="pending").count() == 1, n
    assert LoopAction.objects.filter(node=node, status="busy").count() == 3
    assert now  # the waits ran from each rung's end


def test_a_drain_that_failed_for_good_holds_the_rung_for_an_operator(remediating, django_capture_on_commit_callbacks):
    node, smi_log = remediating()
    action = LoopAction.objects.get(node=node, status="pending")
    HookDelivery.objects.filter(node=node, kind="slurm_drain").update(status=HookDelivery.Status.FAILED,
                                                                      last_error="scontrol: Invalid node name")
    claimed = remediation._claim(action.id)
    status, outcome = remediation._reset(claimed)
    remediation.action_finish(claimed, status, outcome)
    assert status == "busy" and "Slurm drain is failed" in outcome
    transition = Transition.objects.filter(node=node).order_by("-version").first()
    assert "drain is failed" in transition.why and "a process holds" not in transition.why
    with django_capture_on_commit_callbacks(execute=True):
        report_ingest(node, watch_report(), now=timezone.now() + timedelta(hours=5))
    assert not LoopAction.objects.filter(node=node, status="pending").exists()
    assert "failed for good" in NodeLoop.objects.get(node=node).waiting and "-r" not in smi_log.read_text().split()


def test_a_condition_that_keeps_coming_back_is_confirmed_not_cleared_forever(loop_settings, act_policy):
    from tests.health.standin import FAULTS  # noqa: F401 (fabric_training: a condition, read afresh at each look)

    node = make_node("gpu-flap")
    states = []
    for _ in range(4):
        report_ingest(node, watch_report("fabric_training"))
        report_ingest(node, watch_report())
        states.append(_state(node))
    assert states[:2] == [machine.READY, machine.READY] and states[2] == machine.QUARANTINED, states
    assert "came and went 3 times" in Transition.objects.get(node=node, to_state="quarantined").why


def test_an_open_breaker_closes_itself_once_its_window_has_passed(loop_settings, act_policy):
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 1
    loop_settings.CUDAWEB_BREAKER_MAX_PCT = 100
    first, second = make_node("gpu-br-1"), make_node("gpu-br-2")
    for node in (first, second):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    assert (_state(first), _state(second)) == (machine.QUARANTINED, machine.SUSPECT)
    assert services.breaker_expire() is None  # within its window it stays open
    NodeLoop.objects.filter(node=first).update(state=machine.READY)  # the first is back in service
    later = timezone.now() + timedelta(seconds=loop_settings.CUDAWEB_BREAKER_WINDOW_S + 1)
    assert services.breaker_expire(now=later) == 1
    assert _state(second) == machine.QUARANTINED and not Breaker.objects.get(id=1).is_open


def test_a_clock_stepped_forward_or_a_database_away_past_the_retries_never_sends_a_reset_node_to_rma(
        remediating, monkeypatch, settings, django_capture_on_commit_callbacks):
    """The reset succeeded but its end could not be stored (the database away longer than the retries): the rung
    stays running; a clock 180 s ahead does not end it; past its deadline the sweep aborts it (ours, not the
    node's) and the node waits, quarantined, for the rung to be taken again, never rma."""
    from django.db import OperationalError

    settings.CUDAWEB_DB_RETRY_S, settings.CUDAWEB_DB_RETRY_FIRST_S = 0.2, 0.05
    node, smi_log = remediating()
    action = LoopAction.objects.get(node=node, status="pending")

    def away(*args, **kwargs):
        raise OperationalError("the database system is shutting down")

    stored = remediation._action_finish
    monkeypatch.setattr(remediation, "_action_finish", away)
    with pytest.raises(OperationalError):
        remediation.action_run(action.id)
    monkeypatch.setattr(remediation, "_action_finish", stored)  # the database is back
    assert "-r -i" in smi_log.read_text() and LoopAction.objects.get(id=action.id).status == "running"
    assert remediation.actions_sweep(now=timezone.now() + timedelta(seconds=180)) == (0, 0)
    with django_capture_on_commit_callbacks(execute=True):
        assert remediation.actions_sweep(now=timezone.now() + timedelta(hours=1)) == (1, 0)
    assert LoopAction.objects.get(id=action.id).status == "aborted"
    assert _state(node) == machine.QUARANTINED and not Transition.objects.filter(node=node, to_state="rma").exists()


def test_an_operators_quarantine_is_the_loops_quarantine_and_their_acceptance_releases_it(
        loop_settings, act_policy, admin_user, django_capture_on_commit_callbacks):
    """One node, one quarantine: an operator's quarantine at onboarding holds the node in the loop too (the page,
    the API and /metrics say quarantined alike); the loop takes no rung on it, never resumes it, and the breaker
    does not count it; the operator's acceptance makes it ready."""
    from cudaweb.fleet.services import acceptance_decide
    from tests.drift.helpers import real_report, stored_run

    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 1
    loop_settings.CUDAWEB_BREAKER_MAX_PCT = 100
    node = make_node("gpu-held")
    run = stored_run(node, real_report())
    with django_capture_on_commit_callbacks(execute=True):
        acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user, note="burn-in too hot")
    loop = NodeLoop.objects.get(node=node)
    assert (loop.state, loop.root_cause) == (machine.QUARANTINED, machine.OPERATOR_HOLD)
    assert Node.objects.get(id=node.id).status == Node.Status.QUARANTINED
    assert "burn-in too hot" in Transition.objects.get(node=node, to_state="quarantined").why
    with django_capture_on_commit_callbacks(execute=True):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    assert _state(node) == machine.QUARANTINED and not LoopAction.objects.filter(node=node).exists()
    other = make_node("gpu-other")  # the loop's one place under the limit is still free
    report_ingest(other, watch_report("xid79"))
    report_ingest(other, watch_report())
    assert _state(other) == machine.QUARANTINED
    with django_capture_on_commit_callbacks(execute=True):
        acceptance_decide(node=node, run=run, decision="accepted", user=admin_user, note="fans replaced")
    assert _state(node) == machine.READY
    assert not HookDelivery.objects.filter(node=node, kind="slurm_resume", event="node_state").exists()
