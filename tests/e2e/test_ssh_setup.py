"""Nodes whose SSH setup differs from the default: no SFTP subsystem (the agent goes over the exec channel), a
login that refuses commands (a node-side state naming the fix, never DASHBOARD_ERROR). Real sshd processes."""

import glob
import hashlib
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from cudaweb.remote.transports.base import HostSetupError
from cudaweb.remote.transports.ssh import SSHTransport
from cudaweb.validation.models import ValidationRun
from tests.e2e.test_failure_paths import make_node, validate
from tests.services import Sshd

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def no_sftp():
    server = Sshd(sftp=False)
    yield server
    server.close()


@pytest.fixture(scope="module")
def refuses_commands():
    server = Sshd(extra=["ForceCommand /bin/false"])
    yield server
    server.close()


def _transport(server):
    return SSHTransport("127.0.0.1", server.port, "root", server.private_key(), server.public_key("host_key"))


def test_the_sshd_really_has_no_sftp(no_sftp):
    done = subprocess.run(["sftp", "-b", "-", "-i", str(no_sftp.dir / "user_key"), "-P", str(no_sftp.port),
                           "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "root@127.0.0.1"],
                          input="pwd\n", capture_output=True, text=True, timeout=30)
    assert done.returncode != 0


def test_the_agent_goes_over_the_exec_channel_and_its_hash_is_checked(no_sftp):
    payload = b"#!/usr/bin/env python3\n# cudaweb test " + uuid.uuid4().hex.encode() + b"\n" + os.urandom(300000)
    digest = hashlib.sha256(payload).hexdigest()
    asked = (no_sftp.dir / "sshd.log").read_text().count("subsystem request for sftp")
    with _transport(no_sftp) as transport:
        path = transport.upload_agent(payload, digest)
        try:
            on_host = os.path.join(os.path.expanduser("~root"), path)
            with open(on_host, "rb") as fh:
                assert fh.read() == payload
            assert not glob.glob(on_host + ".*part")  # no partial copy left behind
            assert transport.upload_agent(payload, digest) == path  # there with its hash: not sent again
        finally:
            os.remove(os.path.join(os.path.expanduser("~root"), path))
    assert (no_sftp.dir / "sshd.log").read_text().count("subsystem request for sftp") == asked  # never asked


def test_uploads_to_one_host_at_once_each_use_a_copy_of_their_own(no_sftp):
    """Two runs reaching one host at once (a bulk request, a pair test's two ranks) each write their copy under a
    name of their own: neither fails its hash check on the other's half-written file, and nothing is left over."""
    payload = b"#!/usr/bin/env python3\n# cudaweb test " + uuid.uuid4().hex.encode() + b"\n" + os.urandom(3 << 20)
    digest = hashlib.sha256(payload).hexdigest()
    start, answers = threading.Barrier(4), []

    def upload():
        with _transport(no_sftp) as transport:
            start.wait()
            try:
                answers.append(transport.upload_agent(payload, digest))
            except Exception as exc:  # the failure itself is what the test looks at
                answers.append("%s: %s" % (type(exc).__name__, exc))

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(set(answers)) == 1 and len(answers) == 4, answers
    on_host = os.path.join(os.path.expanduser("~root"), answers[0])
    try:
        with open(on_host, "rb") as fh:
            assert fh.read() == payload
        assert not glob.glob(on_host + ".*part")
    finally:
        os.remove(on_host)


def test_a_partial_copy_an_upload_left_on_the_host_goes_once_it_is_an_hour_old(no_sftp):
    payload = b"#!/usr/bin/env python3\n# cudaweb test " + uuid.uuid4().hex.encode() + b"\n"
    cache = os.path.join(os.path.expanduser("~root"), ".cache", "cudaweb")
    os.makedirs(cache, exist_ok=True)
    old, fresh = (os.path.join(cache, "cudaprobe-%s.pyz.%s.part" % (uuid.uuid4().hex[:16], n)) for n in ("a", "b"))
    for part in (old, fresh):
        with open(part, "wb") as fh:
            fh.write(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    path = "never uploaded"
    try:
        with _transport(no_sftp) as transport:
            path = transport.upload_agent(payload, hashlib.sha256(payload).hexdigest())
        assert not os.path.exists(old) and os.path.exists(fresh)  # another upload's, still going, stays
    finally:
        for leftover in (fresh, os.path.join(os.path.expanduser("~root"), path)):
            if os.path.exists(leftover):
                os.remove(leftover)


def test_a_node_without_sftp_is_validated(celery_worker, no_sftp):
    run = validate(make_node(no_sftp, "no-sftp"))
    assert run.status == ValidationRun.Status.FAILED, run.reason  # the agent ran: no GPU here
    assert run.report["checks"] and run.checks.filter(check_id="host.system").exists()


def test_a_login_that_refuses_commands_is_named_with_its_fix(refuses_commands):
    with pytest.raises(HostSetupError, match="needs a login shell that runs commands"), \
            _transport(refuses_commands) as transport:
        transport.upload_agent(b"x", hashlib.sha256(b"x").hexdigest())


def test_a_run_on_such_a_node_ends_agent_error_not_dashboard_error(celery_worker, refuses_commands):
    run = validate(make_node(refuses_commands, "forced", python=sys.executable))
    assert run.status == ValidationRun.Status.AGENT_ERROR
    assert "cannot create ~/.cache/cudaweb" in run.reason and "login shell that runs commands" in run.reason
