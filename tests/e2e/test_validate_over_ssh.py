"""One click, end to end: web app -> Redis -> Celery worker -> sshd -> agent -> stored checks."""

import sys
import time

import pytest
from django.urls import reverse

from cudaweb.nodes.models import HostKey, Node
from cudaweb.validation.models import ValidationRun
from tests.conftest import wait_for_terminal

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_add_accept_validate_shows_layered_failure_without_gpu(operator_client, celery_worker, sshd):
    response = operator_client.post(reverse("fleet:node_add"), {
        "name": "gpu-a1", "address": "127.0.0.1", "port": sshd.port, "username": "root",
        "private_key": sshd.private_key(), "python_path": sys.executable, "labels": "rack-3, new"})
    node = Node.objects.get(name="gpu-a1")
    assert response.status_code == 302 and response.url == reverse("fleet:node_onboard", args=[node.id])
    assert node.labels == ["rack-3", "new"]
    assert "OPENSSH PRIVATE KEY" not in node.credential.private_key_encrypted  # encrypted at rest

    listing = operator_client.get(reverse("fleet:node_list"))
    assert b"gpu-a1" in listing.content

    operator_client.post(reverse("fleet:host_key_fetch", args=[node.id]))  # a worker connects, not the page
    deadline = time.monotonic() + 60
    while not HostKey.objects.filter(node=node).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    host_key = HostKey.objects.get(node=node)
    assert host_key.fingerprint_sha256 == sshd.fingerprint() and not host_key.accepted
    page = operator_client.get(node.get_absolute_url())
    assert sshd.fingerprint().encode() in page.content

    blocked = operator_client.post(reverse("fleet:node_validate", args=[node.id]), {"mode": "quick"})
    assert blocked.status_code == 302 and not ValidationRun.objects.exists()  # no run before the key is accepted

    operator_client.post(reverse("fleet:host_key_accept", args=[node.id]), {"fingerprint": host_key.fingerprint_sha256})
    host_key.refresh_from_db()
    assert host_key.accepted_by.username == "operator"

    response = operator_client.post(reverse("fleet:node_validate", args=[node.id]), {"mode": "quick"})
    run = ValidationRun.objects.get(node=node)
    assert response.url == run.get_absolute_url()
    live = operator_client.get(run.get_absolute_url())
    shown_live = b'data-status="PENDING"' in live.content or b'data-status="RUNNING"' in live.content
    assert (b"data-poll-url" in live.content) == shown_live  # the page polls exactly while the run is live

    run = wait_for_terminal(run)
    assert run.status == ValidationRun.Status.FAILED, run.reason
    checks = {c.check_id: c for c in run.checks.all()}
    assert checks["driver.nvidia_smi"].status == "fail"
    assert {"nvidia_smi_missing", "driver_unreachable"} & set(checks["driver.nvidia_smi"].signatures)
    assert checks["torch.build"].status == "fail" and "torch_cpu_build" in checks["torch.build"].signatures
    assert checks["cuda.available"].status == "skip" and checks["cuda.available"].blocked_by.startswith("driver.")
    assert run.report["verdict"] == "fail" and run.verdict == "fail"
    assert any(event["event"] == "check_finished" for event in run.progress)
    node.refresh_from_db()
    assert node.status == Node.Status.FAILING

    page = operator_client.get(run.get_absolute_url())
    assert b"torch_cpu_build" in page.content and b"data-poll-url" not in page.content
    fragment = operator_client.get(reverse("runs:run_fragment", args=[run.id]))
    assert b"driver.nvidia_smi" in fragment.content
