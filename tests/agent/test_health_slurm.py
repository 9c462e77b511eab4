"""The health command as Slurm's HealthCheckProgram (issue 31), on the real programs: Debian's munged, slurmctld and
slurmd (tests/hooks/slurm_cluster.py) with HealthCheckProgram pointing at a site's two-line wrapper that runs
`python -m agents.cudaprobe health --slurm`. slurmd itself runs it, at its start (before it registers) and every
HealthCheckInterval: a stand-in fault (the recorded H200 outputs with an ECC error, or an Xid line in the kernel
log's format) drains the node with that reason; a healthy node stays idle.

Run under `flock /tmp/cudaweb-heavy.lock` (a Slurm cluster per test).
"""

import shlex
import socket
import subprocess
import sys
import time

import pytest

from tests.agent.harness import FAKE_BIN, REPO, TESTS, Scenario
from tests.hooks.slurm_cluster import SlurmCluster, SlurmUnavailable

NODE = "gpu-fake-01"
INTERVAL_S = 5


def wrapper(directory, scenario, log):
    """What a site puts at HealthCheckProgram (it takes no arguments): a script that runs the health command; here
    also with the stand-ins' environment, and a line per run in `log` so the test knows that slurmd ran it."""
    env = dict(scenario.env, PATH="%s:/usr/bin:/bin:/usr/sbin" % FAKE_BIN,
               PYTHONPATH="%s:%s" % (TESTS / "fakes" / "pynvml_replay", REPO), CUDAPROBE_BYTECODE_CACHE="off",
               SLURM_CONF=str(directory / "slurm.conf"))
    script = directory / "cudaweb-health.sh"
    script.write_text("#!/bin/sh\n%s\ncd %s\n%s -m agents.cudaprobe health --slurm --node %s >> %s 2>&1\n"
                      "echo \"exit $?\" >> %s\n" % (
                          "\n".join("export %s=%s" % (k, shlex.quote(v)) for k, v in sorted(env.items())),
                          shlex.quote(str(REPO)), shlex.quote(sys.executable), NODE, shlex.quote(str(log)),
                          shlex.quote(str(log))))
    script.chmod(0o755)
    return ["HealthCheckProgram=%s" % script, "HealthCheckInterval=%d" % INTERVAL_S, "HealthCheckNodeState=ANY"]


def cluster_running_health(scenario, log):
    try:
        return SlurmCluster(node_name=NODE, extra_conf=lambda directory: wrapper(directory, scenario, log))
    except SlurmUnavailable as exc:
        pytest.skip("slurmctld cannot run here: %s" % exc)


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError("no %s within %d s" % (what, timeout))


def runs(log):
    return [line for line in (log.read_text().splitlines() if log.exists() else []) if line.startswith("exit ")]


def field(node_line, name):
    """A field of `scontrol show node -o`; Reason runs to the end of the line's fields that follow it."""
    value = node_line.split(" %s=" % name, 1)[1]
    return value if name == "Reason" else value.split()[0]


def test_a_fault_drains_the_node_with_the_root_cause(tmp_path):
    scenario = Scenario(tmp_path / "host")
    with open(scenario.root / "dmesg.txt", "a") as kernel_log:
        kernel_log.write("[ 4711.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n")
    log = tmp_path / "health.log"
    cluster = cluster_running_health(scenario, log)
    try:
        line = wait_for(lambda: (lambda s: s if "DRAIN" in field(s, "State") else None)(cluster.show_node()),
                        INTERVAL_S * 4 + 10, "drain")
        reason = field(line, "Reason")
        assert reason.startswith("cudaweb: xid_critical: Xid 79 in the kernel log since boot: GPU has fallen off")
        assert "exit 1" in runs(log)
    finally:
        cluster.close()


def test_a_healthy_node_stays_idle(tmp_path):
    scenario = Scenario(tmp_path / "host")
    log = tmp_path / "health.log"
    cluster = cluster_running_health(scenario, log)
    try:
        wait_for(lambda: len(runs(log)) >= 2, INTERVAL_S * 4 + 10, "second health check by slurmd")
        state = field(cluster.show_node(), "State")
        assert state == "IDLE", (state, log.read_text())
        assert set(runs(log)) == {"exit 0"}, log.read_text()
    finally:
        cluster.close()


def run_health_slurm(scenario, node, conf, budget="20"):
    env = dict(scenario.env, PATH="%s:/usr/bin:/bin:/usr/sbin" % FAKE_BIN, PYTHONPATH=str(REPO),
               CUDAPROBE_BYTECODE_CACHE="off", CUDAPROBE_NVML="0", SLURM_CONF=str(conf), HOME="/root")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "health", "--slurm", "--node", node,
                           "--budget-s", budget], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_a_node_slurmctld_does_not_know_is_could_not_drain_at_once(tmp_path):
    scenario = Scenario(tmp_path / "host")
    scenario.edit("query.csv", "Enabled, 0, [N/A]", "Enabled, 2, [N/A]")
    cluster = cluster_running_health(Scenario(tmp_path / "healthy"), tmp_path / "health.log")
    try:
        done, wall = run_health_slurm(scenario, "gpu-not-registered", cluster.conf)
    finally:
        cluster.close()
    assert done.returncode == 1
    assert "could not drain gpu-not-registered: " in done.stderr and "nvalid node name" in done.stderr, done.stderr
    assert wall < 10, wall


def test_an_unreachable_slurmctld_never_hangs_the_check(tmp_path):
    """As when slurmd runs the check before slurmctld answers (mej/nhc#159): scontrol waits under a short limit."""
    scenario = Scenario(tmp_path / "host")
    scenario.edit("query.csv", "Enabled, 0, [N/A]", "Enabled, 2, [N/A]")
    conf = tmp_path / "slurm.conf"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # a controller port that accepts and never answers
    try:
        conf.write_text("ClusterName=gone\nSlurmctldHost=ctl(127.0.0.1)\nSlurmctldPort=%d\nAuthType=auth/none\n"
                        "NodeName=%s CPUs=1\nPartitionName=p Nodes=%s\n" % (silent.getsockname()[1], NODE, NODE))
        done, wall = run_health_slurm(scenario, NODE, conf, budget="8")
    finally:
        silent.close()
    assert done.returncode == 1
    assert "could not drain %s: scontrol did not answer within 2 s" % NODE in done.stderr, done.stderr
    assert wall < 8 + 2, wall
