"""The loop end to end on the real parts: a Celery worker, Redis, the test database (PostgreSQL when DATABASE_URL
names one), the beat's task run every half second as beat would, one node reached through the local transport whose
agent is the stand-in (recorded real reports). A fault written in becomes an event within two intervals; the node
goes suspect, quarantined, its GPU reset through a stand-in nvidia-smi, re-validated by a real run, ready."""

import time

import pytest

from cudaweb.health import machine
from cudaweb.health.models import HealthEvent, LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.health.tasks import watch_due
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from tests.health.standin import UUID, standin_agent, worker_nvidia_smi

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]
INTERVAL_S = 2
SMI, SMI_LOG = worker_nvidia_smi()


def _until(what, timeout_s, tick=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if tick:
            tick()
        found = what()
        if found:
            return found
        time.sleep(0.5)
    return None


def test_a_fault_becomes_an_event_within_two_intervals_and_the_node_comes_back(celery_worker, tmp_path):
    LoopPolicy.objects.create(label="e2e", mode="act", ladder=["reset"], auto=True, interval_s=INTERVAL_S,
                              no_scheduler=True)  # no Slurm or Kubernetes here, said so: a reset needs idle GPUs
    agent = standin_agent(tmp_path / "agent")
    node = Node.objects.create(name="gpu-e2e", transport=Node.Transport.LOCAL, address="127.0.0.1",
                               python_path=str(agent), labels=["e2e"], status=Node.Status.READY)
    beat = lambda: watch_due.apply()  # noqa: E731 (beat's tick, in this process: the looks go to the worker)
    assert _until(lambda: NodeLoop.objects.filter(node=node, last_watch_at__isnull=False).exists(), 30, beat)
    (tmp_path / "agent" / "faults").write_text("xid79\n")
    written = time.monotonic()
    event = _until(lambda: HealthEvent.objects.filter(node=node, signature="gpu_fallen_off_bus").first(), 30, beat)
    assert event is not None and event.gpu_uuid == UUID
    assert time.monotonic() - written <= 2 * INTERVAL_S + 1.0  # a beat tick (0.5 s) and the look's own time
    (tmp_path / "agent" / "faults").write_text("")
    assert _until(lambda: NodeLoop.objects.get(node=node).state == machine.READY
                  and Transition.objects.filter(node=node, to_state="ready").exists(), 120, beat), \
        list(Transition.objects.filter(node=node).values_list("from_state", "to_state", "why"))
    moves = list(Transition.objects.filter(node=node, shadow=False).order_by("version")
                 .values_list("to_state", flat=True))
    assert moves == ["suspect", "quarantined", "remediating", "revalidating", "ready"]
    reset = LoopAction.objects.get(node=node, kind="reset")
    assert (reset.status, reset.gpu_uuid) == ("succeeded", UUID)
    assert SMI_LOG.read_text().splitlines()[-1] == "-r -i %s" % UUID
    revalidation = LoopAction.objects.get(node=node, kind="revalidate")
    assert revalidation.run.status == ValidationRun.Status.PASSED and revalidation.run.mode == "standard"
    assert Node.objects.get(id=node.id).status == Node.Status.READY
