"""The allreduce plan when a rank cannot start (no torch in its Python): the cause is named first, the test fails
(status and exit code), it is not bisected, and the other ranks are stopped instead of waiting out their peer
timeout. The second test runs the real agent at both ranks over the local transport."""

import copy
import io
import json
import sys
import time
from pathlib import Path

import pytest

from cudaweb.network import collective
from cudaweb.network.management.commands import test_network
from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.nodes.models import Node

NO_TORCH = Path(__file__).resolve().parent / "fixtures" / "real" / "faults" / "no-torch-in-venv.json"
PYTHON_WITHOUT_TORCH = "/usr/bin/python3"


def _reports():
    """Rank 0: the recorded report of a Python without torch, its comm.peer blocked as the agent blocks it; rank 1:
    a peer timeout, what the other ranks print after waiting for it."""
    unstarted = json.loads(NO_TORCH.read_text())
    gloo = next(c for c in unstarted["checks"] if c["id"] == "comm.gloo")
    unstarted["checks"].append(dict(copy.deepcopy(gloo), id="comm.peer"))
    waited = copy.deepcopy(unstarted)
    peer = next(c for c in waited["checks"] if c["id"] == "comm.peer")
    peer.update(status="fail", blocked_by=None, signatures=["peer_timeout", "rendezvous_timeout"],
                summary="no answer from the peer at 10.0.0.1:29500 within 47 s (gloo)")
    return unstarted, waited


def test_a_rank_that_never_started_is_the_failure_named_first():
    unstarted, waited = _reports()
    nodes = [Node(name="gpu-a"), Node(name="gpu-b")]
    fields = collective.collective_outcome(nodes, {"gpu-a": (unstarted, ""), "gpu-b": (waited, "")})
    assert fields["status"] == CollectiveResult.Status.FAIL and fields["failure"] == collective.NEVER_STARTED
    assert fields["reason"].startswith(
        "gpu-a (rank 0) never started: blocked: torch.import did not pass (torch.import: torch cannot be imported: "
        "ModuleNotFoundError: No module named 'torch')"), fields["reason"]
    assert fields["reason"].index("never started") < fields["reason"].index("no answer from the peer")


@pytest.mark.django_db(transaction=True)  # each rank runs in its own thread
def test_a_rank_without_torch_fails_the_test_at_once_with_its_cause(settings, monkeypatch):
    if not Path(PYTHON_WITHOUT_TORCH).exists() or "torch" not in sys.modules and not _imports_torch(sys.executable):
        pytest.skip("needs %s without torch and a Python with torch" % PYTHON_WITHOUT_TORCH)
    settings.CUDAWEB_PAIR_TIMEOUT_S = 90  # what rank 1 would wait for rank 0 before this fix
    broken = Node.objects.create(name="a-no-torch", transport=Node.Transport.LOCAL, python_path=PYTHON_WITHOUT_TORCH)
    good = Node.objects.create(name="b-torch", transport=Node.Transport.LOCAL, python_path=sys.executable)
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.ALLREDUCE, status=NetworkTest.Status.RUNNING)
    test.nodes.set([broken, good])
    started = time.monotonic()
    summary = collective.network_test_allreduce(test=test)
    took = time.monotonic() - started
    test.refresh_from_db()
    assert took < 45, (took, summary)  # rank 1 stopped once rank 0 answered, not after its 90 s
    assert test.status == NetworkTest.Status.FAILED and test.suspects == []
    assert summary.startswith("all-reduce over 2 nodes failed: a-no-torch (rank 0) never started: blocked: "
                              "torch.import did not pass (torch.import: torch cannot be imported: "), summary
    assert "port blocked" not in summary and "slow" not in summary and "not bisected" in summary
    (unit,) = test.collectives.all()  # round 0 only
    assert unit.failure == collective.NEVER_STARTED
    assert "then b-torch (rank 1): Cancelled: stopped by the caller after a-no-torch never started" in unit.reason

    monkeypatch.setattr(test_network, "dashboard_or_exit", lambda *args: None)
    monkeypatch.setattr(test_network, "network_test_request", lambda **kwargs: test)
    out = io.StringIO()
    command = test_network.Command(stdout=out, stderr=io.StringIO())
    with pytest.raises(SystemExit) as exited:
        command.handle(nodes=["a-no-torch", "b-torch"], label=None, plan="allreduce", wait=True, json=True)
    assert exited.value.code == test_network.EXIT_FINDINGS
    assert json.loads(out.getvalue())["status"] == "FAILED"


def _imports_torch(python):
    import subprocess

    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0
