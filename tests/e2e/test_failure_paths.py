"""Each way a run can go wrong ends in its own named state, with the reason shown and nothing left RUNNING."""

import subprocess
import sys
from pathlib import Path

import pytest

from cudaweb.nodes.models import HostKey, Node, SSHCredential
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request
from tests.conftest import wait_for_terminal
from tests.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
FAKES = Path(__file__).resolve().parent.parent / "fakes"


def make_node(sshd, name, port=None, key="user_key", pinned=("host_key", True), python=sys.executable, timeout=None):
    credential = SSHCredential(name="cred-" + name)
    credential.set_private_key(sshd.private_key(key))
    credential.save()
    node = Node.objects.create(name=name, address="127.0.0.1", port=port or sshd.port, username="root",
                               python_path=python, credential=credential, agent_timeout_s=timeout)
    key_name, accepted = pinned
    key_type, key_base64 = sshd.public_key(key_name)
    HostKey.objects.create(node=node, key_type=key_type, key_base64=key_base64, fingerprint_sha256="x",
                           accepted_at="2026-11-30T00:00:00Z" if accepted else None)
    return node


def validate(node):
    return wait_for_terminal(run_request(node=node, mode="quick"))


def test_closed_port_ends_unreachable(celery_worker, sshd):
    run = validate(make_node(sshd, "closed-port", port=free_port()))
    assert run.status == ValidationRun.Status.UNREACHABLE
    assert "cannot reach" in run.reason and "refused" in run.reason.lower()
    assert Node.objects.get(name="closed-port").status == Node.Status.UNREACHABLE


def test_wrong_key_ends_auth_failed(celery_worker, sshd):
    run = validate(make_node(sshd, "wrong-key", key="other_key"))
    assert run.status == ValidationRun.Status.AUTH_FAILED
    assert "authentication as root@127.0.0.1 failed" in run.reason


def test_changed_host_key_ends_mismatch_and_runs_nothing(celery_worker, sshd):
    logins_before = (sshd.dir / "sshd.log").read_text().count("Accepted publickey")
    run = validate(make_node(sshd, "changed-key", pinned=("other_key", True)))
    assert run.status == ValidationRun.Status.HOST_KEY_MISMATCH
    assert sshd.fingerprint("host_key") in run.reason  # the key the host presented now
    assert run.progress == [] and run.report is None and not run.checks.exists()
    # paramiko checks the host key before authenticating: the host never saw a login.
    assert (sshd.dir / "sshd.log").read_text().count("Accepted publickey") == logins_before


def test_unaccepted_host_key_runs_nothing(celery_worker, sshd):
    run = validate(make_node(sshd, "not-accepted", pinned=("host_key", False)))
    assert run.status == ValidationRun.Status.HOST_KEY_MISMATCH
    assert "accept its fingerprint" in run.reason


def test_hanging_agent_ends_timed_out_and_is_killed(celery_worker, sshd):
    run = validate(make_node(sshd, "hangs", python=str(FAKES / "hanging-python"), timeout=3))
    assert run.status == ValidationRun.Status.TIMED_OUT
    assert "3 s budget" in run.reason
    left = subprocess.run(["pgrep", "-f", "hanging-python"], capture_output=True, text=True).stdout
    assert left == ""


def test_garbage_output_ends_agent_error_with_output_kept_and_capped(celery_worker, sshd, settings):
    run = validate(make_node(sshd, "garbage", python=str(FAKES / "garbage-python")))
    assert run.status == ValidationRun.Status.AGENT_ERROR
    assert "not JSON" in run.reason and "output truncated" in run.reason
    assert run.raw_output.startswith("Welcome to node-17!")
    assert len(run.raw_output) <= settings.CUDAWEB_OUTPUT_CAP


def test_no_run_is_left_running(celery_worker, sshd):
    assert not ValidationRun.objects.filter(status__in=ValidationRun.LIVE).exists()
