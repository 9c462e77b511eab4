"""The watch's cadence and sessions: each node claimed once per slot, at its label's interval; a look runs the agent's
watch over the node's kept session (one SSH connection for many looks, keepalive on), its report ingested; a look
that fails is kept on the node and the session opened again."""

import json
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from cudaweb.health import machine, watch
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import HealthEvent, LoopPolicy, NodeLoop
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import host_key_accept, host_key_record
from cudaweb.remote.connect import ssh_node_create
from cudaweb.validation.models import ValidationRun
from tests.health.conftest import make_node
from tests.health.standin import standin_agent, watch_report

pytestmark = pytest.mark.django_db


def _local_node(name, agent, labels=("rack-a",)):
    return Node.objects.create(name=name, transport=Node.Transport.LOCAL, address="127.0.0.1", python_path=str(agent),
                               labels=list(labels), status=Node.Status.READY)


def test_each_node_is_claimed_once_per_slot_at_its_labels_interval(loop_settings, tmp_path):
    LoopPolicy.objects.create(label="fast", mode="act", interval_s=10)
    slow, fast = _local_node("slow", "python3", ["rack-a"]), _local_node("fast", "python3", ["fast"])
    make_node("no-credential")  # an SSH node without a key is never looked at
    now = timezone.now()
    claimed = dict(watch.nodes_due(now=now))
    assert set(claimed) == {slow.id, fast.id}
    assert watch.nodes_due(now=now + timedelta(seconds=1)) == []  # nothing twice for one slot
    rows = {row.node_id: row.next_watch_at for row in NodeLoop.objects.all()}
    assert rows[slow.id] - claimed[slow.id] == timedelta(seconds=60)
    assert rows[fast.id] - claimed[fast.id] == timedelta(seconds=10)
    assert [n for n, _ in watch.nodes_due(now=now + timedelta(seconds=11))] == [fast.id]
    # a node late by more than an interval (the queue was down) is looked at once, then on the cadence again
    later = now + timedelta(seconds=600)
    assert len(watch.nodes_due(now=later)) == 2
    assert NodeLoop.objects.get(node=slow).next_watch_at == later + timedelta(seconds=60)


def test_a_look_runs_the_watch_and_ingests_its_report(loop_settings, act_policy, tmp_path):
    agent = standin_agent(tmp_path / "agent")
    node = _local_node("gpu-look", agent)
    sessions = watch.Sessions()
    assert watch.look(node.id, sessions).new == []
    (tmp_path / "agent" / "faults").write_text("xid79\n")
    result = watch.look(node.id, sessions)
    assert result.root_cause == "gpu_fallen_off_bus" and NodeLoop.objects.get(node=node).state == machine.SUSPECT
    (tmp_path / "agent" / "faults").write_text("no-such-fault\n")  # the stand-in dies: nothing on stdout
    assert watch.look(node.id, sessions) is None
    assert "printed nothing" in NodeLoop.objects.get(node=node).watch_error
    assert HealthEvent.objects.filter(node=node).count() == 2


@pytest.fixture
def ssh_watch_node(sshd, admin_user, tmp_path):
    agent = standin_agent(tmp_path / "agent")
    node = ssh_node_create(name="gpu-ssh-watch", address="127.0.0.1", port=sshd.port, username="root",
                           private_key=sshd.private_key(), python_path=str(agent), labels=["rack-a"])
    key_type, key_base64 = sshd.public_key("host_key")
    host_key_record(node=node, key_type=key_type, key_base64=key_base64, fingerprint=sshd.fingerprint())
    host_key_accept(node=node, user=admin_user)
    return node, tmp_path / "agent" / "faults"


def test_one_ssh_session_serves_many_looks_with_keepalive(loop_settings, act_policy, ssh_watch_node):
    node, faults = ssh_watch_node
    sessions = watch.Sessions()
    for _ in range(3):
        assert watch.look(node.id, sessions) is not None
    assert sessions.connects == 1
    transport = sessions.open[node.id][1]
    assert transport.client.get_transport().is_active()
    assert transport.client.get_transport().packetizer._Packetizer__keepalive_interval == \
        loop_settings.CUDAWEB_WATCH_KEEPALIVE_S
    faults.write_text("nvlink_growth\n")
    watch.look(node.id, sessions)
    watch.look(node.id, sessions)
    assert HealthEvent.objects.get(node=node).count == 2 and sessions.connects == 1
    # the connection dies (the host rebooted): the next look opens a new session first
    transport.client.get_transport().close()
    assert watch.look(node.id, sessions) is not None and sessions.connects == 2
    # a refused look (sshd gone for this node's port) is kept on the node, the session dropped
    Node.objects.filter(id=node.id).update(port=1)
    assert watch.look(node.id, sessions) is None and node.id not in sessions.open
    assert "Unreachable" in NodeLoop.objects.get(node=node).watch_error


def test_a_look_hands_the_agent_what_the_previous_look_saw(loop_settings, act_policy, tmp_path):
    """--since: the previous look's start (less the margin for the kernel log's whole-second boot time), so an Xid
    line is a finding once, not at every look; before the first look, the latest validation. --fabric-previous: the
    previous look's counters (zeros left out), so a counter that grew between two looks is named."""
    node = _local_node("gpu-args", standin_agent(tmp_path / "agent"))
    assert watch.watch_args(node, None) == watch.WATCH_ARGS
    report = watch_report()
    nvlink = next(c for c in report["checks"] if c["id"] == "fabric.nvlink")
    nvlink["metrics"] = {"nvlink_active_links": 36, "nvlink_replay_errors.gpu1": 7, "nvlink_crc_errors.gpu0": 0,
                         "nvlink_odd.gpu0": "7", "x" * 70 + ".gpu0": 1}
    began = timezone.now() - timedelta(seconds=30)
    report_ingest(node, report, now=began)
    loop = NodeLoop.objects.get(node=node)
    args = watch.watch_args(node, loop)
    assert args[:3] == watch.WATCH_ARGS
    since = datetime.fromisoformat(args[args.index("--since") + 1])
    assert since == began - timedelta(seconds=watch.SINCE_MARGIN_S)
    previous = json.loads(args[args.index("--fabric-previous") + 1])
    assert previous["fabric.nvlink"] == {"nvlink_replay_errors.gpu1": 7}
    assert previous["fabric.nvswitch"] == {} and "fabric.pcie_aer" not in previous  # ran, nothing counted; skipped


def test_the_first_look_at_a_validated_node_reads_the_kernel_log_since_that_validation(loop_settings, act_policy,
                                                                                       tmp_path):
    node = _local_node("gpu-validated", standin_agent(tmp_path / "agent"))
    finished = timezone.now() - timedelta(hours=3)
    ValidationRun.objects.create(node=node, mode="standard", status=ValidationRun.Status.PASSED, finished=finished)
    args = watch.watch_args(node, NodeLoop.objects.create(node=node))
    assert datetime.fromisoformat(args[args.index("--since") + 1]) == finished


@pytest.mark.django_db(transaction=True)  # the looks' threads use connections of their own: the rows are committed
def test_a_look_still_running_gets_no_second_look_beside_it(loop_settings, monkeypatch):
    import threading

    node = make_node("gpu-slow-look")
    NodeLoop.objects.create(node=node)
    entered, release, calls = threading.Event(), threading.Event(), []

    def slow_look(node_id):
        calls.append(node_id)
        entered.set()
        release.wait(10)
        return "looked"

    monkeypatch.setattr(watch, "look", slow_look)
    first = []
    thread = threading.Thread(target=lambda: first.append(watch._look_in_thread(node.id)))
    thread.start()
    assert entered.wait(10)
    assert watch._look_in_thread(node.id) is None  # the slot after: skipped, said on the node's loop row
    assert "previous look was still running" in NodeLoop.objects.get(node=node).watch_error
    release.set()
    thread.join(10)
    assert first == ["looked"] and calls == [node.id]
    assert watch._look_in_thread(node.id) == "looked"  # once it ended, the next slot looks again


@pytest.mark.django_db(transaction=True)
def test_a_look_running_in_another_worker_process_gets_no_second_look_beside_it(loop_settings, monkeypatch):
    """The guard is the node's lease in the database, not only this process's set: two workers never look at one
    node side by side (380 of 390 pairs overlapped with 7 s looks on a 5 s interval)."""
    node = make_node("gpu-leased")
    NodeLoop.objects.create(node=node, looking_until=timezone.now() + timedelta(seconds=25))  # another process's
    calls = []
    monkeypatch.setattr(watch, "look", lambda node_id: calls.append(node_id) or "looked")
    assert watch._look_in_thread(node.id) is None and calls == []
    assert "previous look was still running" in NodeLoop.objects.get(node=node).watch_error
    NodeLoop.objects.filter(node=node).update(looking_until=timezone.now() - timedelta(seconds=1))  # it died
    assert watch._look_in_thread(node.id) == "looked" and calls == [node.id]
    assert NodeLoop.objects.get(node=node).looking_until is None  # the lease ends with the look


def test_a_host_whose_looks_keep_failing_is_looked_at_less_often(loop_settings, tmp_path):
    """Hung hosts must not hold the threads healthy nodes need: 2, 4, then 8 intervals apart at most; a look that
    works puts the node back on its cadence."""
    agent = standin_agent(tmp_path / "agent")
    node = _local_node("gpu-hung", agent)
    now = timezone.now()
    for failures, intervals in ((0, 1), (1, 2), (2, 4), (3, 8), (6, 8)):
        NodeLoop.objects.update_or_create(node=node, defaults={"next_watch_at": now, "watch_failures": failures})
        assert [n for n, _ in watch.nodes_due(now=now)] == [node.id]
        assert NodeLoop.objects.get(node=node).next_watch_at == now + timedelta(seconds=60 * intervals), failures
    (tmp_path / "agent" / "faults").write_text("no-such-fault\n")  # the stand-in dies: the look fails
    sessions = watch.Sessions()
    assert watch.look(node.id, sessions) is None
    assert NodeLoop.objects.get(node=node).watch_failures == 7
    (tmp_path / "agent" / "faults").write_text("")
    assert watch.look(node.id, sessions) is not None
    assert NodeLoop.objects.get(node=node).watch_failures == 0


def test_a_clock_stepped_back_does_not_stop_the_looks(loop_settings, tmp_path):
    """After a 600 s backward step every next look lay 600 s ahead: no node was claimed for 600 s."""
    node = _local_node("gpu-clock", standin_agent(tmp_path / "agent"))
    now = timezone.now()
    assert [n for n, _ in watch.nodes_due(now=now + timedelta(seconds=600))] == [node.id]  # the clock, then
    assert [n for n, _ in watch.nodes_due(now=now)] == [node.id]  # stepped back 600 s: looked at, not in 10 minutes
    assert NodeLoop.objects.get(node=node).next_watch_at == now + timedelta(seconds=60)
    assert watch.nodes_due(now=now + timedelta(seconds=1)) == []  # and on its cadence again
