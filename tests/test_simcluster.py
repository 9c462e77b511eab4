"""The simulated cluster cleans up after itself when it cannot come up: a test whose cluster never listened (sshd not
installed, as on a machine where `make sshd` has not run) got no hosts, so it never calls `down`; `up` must leave no
namespace, bridge or directory of its tag behind (found with four of each left on a machine without sshd)."""

import os
import shutil
import subprocess
import time
import uuid

import pytest

from tests import simcluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="network namespaces need root and iproute2")


def _left(tag):
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return ([line.split()[0] for line in namespaces.splitlines() if ("cws-%s-" % tag) in line],
            [line.split()[0] for line in links.splitlines() if tag in line.split()[0]],
            simcluster.home(tag).exists())


def test_a_cluster_that_never_listens_leaves_nothing_of_its_tag(monkeypatch):
    tag = uuid.uuid4().hex[:5]
    monkeypatch.setattr(simcluster, "SSHD", "/nonexistent/sshd")
    monkeypatch.setattr(simcluster, "wait_for_port", lambda *args, **kwargs: False)
    with pytest.raises(RuntimeError, match="did not listen"):
        simcluster.up(2, tag)
    deadline = time.monotonic() + 5  # a veth goes with its namespace's end, which the kernel finishes a moment later
    while _left(tag) != ([], [], False) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _left(tag) == ([], [], False)


def test_a_tag_already_taken_is_refused_and_the_cluster_holding_it_is_left_alone(monkeypatch):
    tag = uuid.uuid4().hex[:5]
    subprocess.run(["ip", "link", "add", "cwb-%s" % tag, "type", "bridge"], check=True)
    try:
        with pytest.raises(subprocess.CalledProcessError):
            simcluster.up(1, tag)
        assert _left(tag)[1] == ["cwb-%s" % tag]  # the other's bridge is still there
    finally:
        subprocess.run(["ip", "link", "del", "cwb-%s" % tag], capture_output=True)
