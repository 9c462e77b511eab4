"""The loop over SSH on the simulated cluster (tests/simcluster.py): the real Celery worker, Redis and the test
database, Debian's sshd in a network namespace, and on the host the real agent's `--mode watch` with stand-in tools
first on its PATH (tests/fakes/bin: nvidia-smi and dmesg replaying the recorded 2 x H200 outputs,
tests/agent/harness.py). Faults are written into those recordings in the formats NVIDIA documents: the kernel's
NVRM Xid line (stamped with this kernel's uptime, as the driver would), `nvidia-smi nvlink -e`'s error counters,
`nvidia-smi -q`'s fabric state. The beat's task runs every half second as beat would; the looks go to the worker,
through the node's kept SSH session.

An Xid becomes an event within two intervals; the node goes suspect, quarantined, its GPU is reset through a
stand-in nvidia-smi on the host (over SSH), re-validated, ready, and the next look sees the Xid line as history.
An NVLink counter that grows, and a fabric whose training has not completed, become events and the node suspect,
then quarantined."""

import json
import os
import shutil
import sys
import time
import uuid

import pytest
from django.utils import timezone

from agents.cudaprobe import nvsmi
from cudaweb.health import machine
from cudaweb.health.models import HealthEvent, LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.health.tasks import watch_due
from cudaweb.nodes.models import HostKey, Node, SSHCredential
from cudaweb.validation.models import ValidationRun
from tests import simcluster
from tests.agent.harness import FAKE_BIN, TESTS, Scenario
from tests.health.standin import worker_nvidia_smi

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                 reason="network namespaces need root and iproute2")]
INTERVAL_S = 4  # a look of the real agent over SSH takes about a second here: slots never overlap
SMI, SMI_LOG = worker_nvidia_smi()
# what a validation answers on the simulated host (the re-validation rung): it has no GPU, so the host prints the
# recorded real standard report of a 2 x H200 host; the watch is the real agent
STANDARD = TESTS / "fixtures" / "real" / "h200-gpus2-standard.json"


@pytest.fixture
def sim_node(tmp_path):
    """One simulated host reached over SSH, whose agent runs on the recorded 2 x H200 outputs: (node, scenario)."""
    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(1, tag)
    try:
        (host,) = hosts
        credential = SSHCredential(name="loop-%s" % tag)
        credential.set_private_key(user_key.read_text())
        credential.save()
        scenario = Scenario(tmp_path / "host")
        python = tmp_path / "python"
        env = dict(scenario.env, CUDAPROBE_NVML="0")  # nvidia-smi read, not NVML (no libnvidia-ml here)
        python.write_text(
            "#!/bin/sh\nexport PATH=%s:$PATH %s\ncase \" $* \" in *\" --mode watch \"*) exec %s \"$@\" ;; esac\n"
            "exec cat %s\n" % (FAKE_BIN, " ".join("%s=%s" % kv for kv in sorted(env.items())), sys.executable,
                               STANDARD))
        python.chmod(0o755)
        node = Node.objects.create(name=host["name"], address=host["address"], port=22, username="root",
                                   credential=credential, python_path=str(python), status=Node.Status.READY,
                                   labels=["ssh-loop"])
        HostKey.objects.create(node=node, key_type=host["host_key"][0], key_base64=host["host_key"][1],
                               fingerprint_sha256="sim", accepted_at=timezone.now())
        yield node, scenario
    finally:
        simcluster.down(tag)


def _gpu_uuids(scenario):
    return {g["index"]: g["uuid"] for g in nvsmi.parse_list((scenario.root / "L.txt").read_text())}


def _beat():
    watch_due.apply()  # beat's tick, in this process: the looks go to the worker


def _until(what, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _beat()
        found = what()
        if found:
            return found
        time.sleep(0.5)
    return None


def _looked_clean(node, timeout_s=60):
    """Wait for a look that came back (not a failed one) and return the loop row after it."""
    assert _until(lambda: NodeLoop.objects.filter(node=node, last_watch_at__isnull=False).exists(), timeout_s), \
        NodeLoop.objects.filter(node=node).values_list("watch_error", flat=True).first()
    loop = NodeLoop.objects.get(node=node)
    hardware = list(HealthEvent.objects.filter(node=node, klass="hardware").values_list("signature", "summary"))
    assert loop.state == machine.READY and not hardware, (loop.state, hardware)
    return loop


def _moves(node):
    return list(Transition.objects.filter(node=node, shadow=False).order_by("version")
                .values_list("to_state", flat=True))


def _second_gpu_edit(scenario, name, marker, old, new):
    text = (scenario.root / name).read_text()
    head, sep, second = text.partition(marker)
    assert old in second, (old, name)
    scenario.write(name, head + sep + second.replace(old, new, 1))


def test_an_xid_over_ssh_becomes_an_event_and_the_node_comes_back_ready(celery_worker, sim_node):
    node, scenario = sim_node
    LoopPolicy.objects.create(label="ssh-loop", mode="act", ladder=["reset"], auto=True, interval_s=INTERVAL_S,
                              no_scheduler=True)  # no Slurm or Kubernetes here, said so: a reset needs idle GPUs
    SMI.parent.joinpath("gpu-uuids").write_text("\n".join(_gpu_uuids(scenario).values()) + "\n")  # the node's GPUs
    _looked_clean(node)
    uptime = float(open("/proc/uptime").read().split()[0])
    with open(scenario.root / "dmesg.txt", "a") as log:  # GPU 1 (PCI 0000:00:07), as the driver prints it
        log.write("[%12.6f] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n" % uptime)
    written = time.monotonic()
    event = _until(lambda: HealthEvent.objects.filter(node=node, signature="gpu_fallen_off_bus").first(), 60)
    seen_after = time.monotonic() - written
    assert event is not None, NodeLoop.objects.filter(node=node).values_list("watch_error", flat=True).first()
    assert seen_after <= 2 * INTERVAL_S, seen_after
    assert (event.gpu_uuid, event.check_id, event.klass) == (_gpu_uuids(scenario)[1], "driver.xid", "hardware")
    assert "NVRM: Xid (PCI:0000:00:07): 79" in event.evidence
    assert _until(lambda: NodeLoop.objects.get(node=node).state == machine.READY
                  and Transition.objects.filter(node=node, to_state="ready").exists(), 180), \
        list(Transition.objects.filter(node=node).values_list("from_state", "to_state", "why"))
    assert _moves(node) == ["suspect", "quarantined", "remediating", "revalidating", "ready"]
    quarantined = Transition.objects.get(node=node, to_state="quarantined")
    assert quarantined.effects == ["drain"] and quarantined.root_cause == "gpu_fallen_off_bus"
    reset = LoopAction.objects.get(node=node, kind="reset")
    assert (reset.status, reset.gpu_uuid) == ("succeeded", _gpu_uuids(scenario)[1]), reset.outcome
    assert "was successfully reset" in reset.outcome
    assert SMI_LOG.read_text().splitlines()[-2:] == [
        "--query-compute-apps=gpu_uuid,pid --format=csv,noheader", "-r -i %s" % _gpu_uuids(scenario)[1]]
    revalidation = LoopAction.objects.get(node=node, kind="revalidate")
    assert revalidation.run.status == ValidationRun.Status.PASSED and revalidation.run.mode == "standard"
    assert Node.objects.get(id=node.id).status == Node.Status.READY
    # the Xid line is still in the kernel log: the next look reads it as history (--since the previous look), and
    # the node stays ready
    ready_at = Transition.objects.get(node=node, to_state="ready").at
    assert _until(lambda: NodeLoop.objects.filter(node=node, last_watch_at__gt=ready_at).exists(), 60)
    assert NodeLoop.objects.get(node=node).state == machine.READY
    assert not HealthEvent.objects.filter(node=node, signature="gpu_fallen_off_bus", open=True).exists()


@pytest.mark.parametrize("fault", ["nvlink-counter", "fabric-state"])
def test_a_fabric_fault_over_ssh_becomes_an_event_and_the_node_suspect_then_quarantined(celery_worker, sim_node,
                                                                                        fault):
    node, scenario = sim_node
    LoopPolicy.objects.create(label="ssh-loop", mode="act", ladder=["reset"], auto=False, interval_s=INTERVAL_S)
    loop = _looked_clean(node)
    gpu1 = _gpu_uuids(scenario)[1]
    if fault == "nvlink-counter":
        # the look before counted nothing: its counters (none) are the next look's --fabric-previous
        assert loop.watch_counters.get("fabric.nvlink") == {}, loop.watch_counters
        _second_gpu_edit(scenario, "nvlink_e.txt", "GPU 1:", "Link 3: Replay Errors: 0", "Link 3: Replay Errors: 7")
        check_id, signature = "fabric.nvlink", "nvlink_errors_growing"
    else:
        _second_gpu_edit(scenario, "q.txt", "GPU 00000000:00:07.0",
                         "        State                                          : Completed",
                         "        State                                          : In Progress")
        # the recorded host runs no Fabric Manager, which an HGX board in training needs (issue 28's rules)
        check_id, signature = "fabric.nvswitch", "fabric_manager_not_running"
    written = time.monotonic()
    event = _until(lambda: HealthEvent.objects.filter(node=node, signature=signature).first(), 60)
    seen_after = time.monotonic() - written
    assert event is not None, list(HealthEvent.objects.filter(node=node).values_list("signature", "summary"))
    assert seen_after <= 2 * INTERVAL_S, seen_after
    assert (event.gpu_uuid, event.check_id, event.klass) == (gpu1, check_id, "hardware")
    assert NodeLoop.objects.get(node=node).state == machine.SUSPECT
    if fault == "nvlink-counter":
        # it grows again before the next look (there are seconds until it): one event that grows
        _second_gpu_edit(scenario, "nvlink_e.txt", "GPU 1:", "Link 3: Replay Errors: 7", "Link 3: Replay Errors: 40")
    assert _until(lambda: NodeLoop.objects.get(node=node).state == machine.QUARANTINED, 60), _moves(node)
    assert _moves(node) == ["suspect", "quarantined"]
    assert Node.objects.get(id=node.id).status == Node.Status.QUARANTINED
    assert Transition.objects.get(node=node, to_state="quarantined").effects == ["drain"]
    events = list(HealthEvent.objects.filter(node=node, signature=signature).order_by("id"))
    assert len(events) == 1 and events[0].count >= 2, json.dumps(
        list(HealthEvent.objects.filter(node=node).values("signature", "count", "open", "summary")), default=str)
    if fault == "nvlink-counter":
        assert "replay=40" in events[0].evidence and "7 -> 40" in events[0].summary, events[0].summary
