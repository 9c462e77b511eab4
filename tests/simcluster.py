"""A simulated cluster for tests and benchmarks: N hosts as network namespaces on 198.18.0.0/16 behind one bridge,
each with Debian's sshd, its own host key, and the same authorised user key; link faults made for real.

    python -m tests.simcluster up 8 --tag demo      # prints the hosts as JSON
    python -m tests.simcluster down --tag demo

Everything is named after the tag and recorded in its directory (/tmp/cudaweb-sim-<tag>), and only that is torn
down: namespaces cws-<tag>-<i>, the bridge cwb-<tag>, the sshd pids written there.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from cudaweb.embedded import wait_for_port

SSHD = "/usr/sbin/sshd"


def _run(*argv):
    subprocess.run(argv, check=True, capture_output=True)


def home(tag):
    return Path("/tmp/cudaweb-sim-%s" % tag)


def address(index):
    return "198.18.%d.%d" % (1 + index // 250, 2 + index % 250)


def up(count, tag):
    """Make `count` hosts; returns [{name, namespace, address, host_key (type, base64)}] and the user key path. A
    cluster that cannot come up (no sshd installed, a host that never listens) is torn down before the error goes
    on: the caller never got it, so would never call `down`."""
    if len(tag) > 6:
        raise ValueError("tags are at most 6 characters (interface names are at most 15)")
    bridge = "cwb-%s" % tag
    _run("ip", "link", "add", bridge, "type", "bridge")  # fails where the tag is taken: then nothing here is ours
    try:
        return _up(count, tag, bridge)
    except BaseException:
        down(tag)
        raise


def _up(count, tag, bridge):
    root = home(tag)
    root.mkdir(parents=True, exist_ok=True)
    user_key = root / "user_key"
    if not user_key.exists():
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(user_key))
    shutil.copy(str(user_key) + ".pub", root / "authorized_keys")
    _run("ip", "addr", "add", "198.18.0.1/16", "dev", bridge)
    _run("ip", "link", "set", bridge, "up")
    hosts = []
    for index in range(count):
        name, namespace, veth = "sim%d" % index, "cws-%s-%d" % (tag, index), "cw%s%d" % (tag, index)
        with open(root / "namespaces", "a") as fh:
            fh.write("%s %s\n" % (namespace, veth))
        _run("ip", "netns", "add", namespace)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _run("ip", "link", "set", veth, "master", bridge, "up")
        for argv in (("ip", "addr", "add", address(index) + "/16", "dev", "eth0"), ("ip", "link", "set", "eth0", "up"),
                     ("ip", "link", "set", "lo", "up")):
            _run("ip", "netns", "exec", namespace, *argv)
        key = root / ("host_key_%d" % index)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        config = root / ("sshd_%d.conf" % index)
        # SetEnv SHLVL=1: the session's bash (root's login shell here) counts itself nested and skips ~/.bashrc,
        # which Debian's bash reads for every command over SSH: this machine's root .bashrc runs `pyenv init`, 0.11 s
        # of CPU a command, which 16 simulated hosts at once on two cores made into 1 to 7 s a look
        # (bench/ssh_look.py). The hosts are then the dashboard's cost to measure, not this machine's dotfiles.
        config.write_text("\n".join([
            "Port 22", "ListenAddress %s" % address(index), "HostKey %s" % key,
            "AuthorizedKeysFile %s" % (root / "authorized_keys"), "PidFile %s" % (root / ("sshd_%d.pid" % index)),
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PermitRootLogin prohibit-password", "Subsystem sftp internal-sftp", "MaxStartups 100", "SetEnv SHLVL=1",
            ""]))
        os.makedirs("/run/sshd", exist_ok=True)
        log = open(root / ("sshd_%d.log" % index), "wb")
        popen = subprocess.Popen(["ip", "netns", "exec", namespace, SSHD, "-D", "-e", "-f", str(config)],
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        with open(root / "pids", "a") as fh:
            fh.write("%d\n" % popen.pid)
        key_type, key_base64 = (Path(str(key) + ".pub").read_text().split()[:2])
        hosts.append({"name": name, "namespace": namespace, "address": address(index),
                      "host_key": [key_type, key_base64]})
    for host in hosts:
        if not wait_for_port(22, host=host["address"], timeout=20):
            raise RuntimeError("sshd in %s did not listen" % host["namespace"])
    (root / "hosts.json").write_text(json.dumps(hosts))
    return hosts, user_key


def down(tag):
    """Stop what `up` started for this tag, and nothing else."""
    root = home(tag)
    for line in (root / "pids").read_text().split() if (root / "pids").exists() else []:
        try:
            os.killpg(int(line), signal.SIGKILL)
        except ProcessLookupError:
            pass
    made = (root / "namespaces").read_text().splitlines() if (root / "namespaces").exists() else []
    for namespace, veth in (line.split() for line in made):  # each recorded as `up` made it, before it was made
        # what still runs inside it: the sshd children of sessions a client kept open (each leads a session of its
        # own, so the listener's process group does not hold them); they would keep the namespace and its veth
        # alive after its name is gone
        inside = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
        for pid in inside:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        # and its veth by name: a namespace something in the kernel still holds (a socket) would keep it up
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
    subprocess.run(["ip", "link", "del", "cwb-%s" % tag], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def block_ports(host, low, high):
    """Drop every TCP packet to ports low..high inside the host (a firewall between nodes)."""
    _run("ip", "netns", "exec", host["namespace"], "iptables", "-A", "INPUT", "-p", "tcp", "--dport",
         "%d:%d" % (low, high), "-j", "DROP")


def link_down(host):
    _run("ip", "netns", "exec", host["namespace"], "ip", "link", "set", "eth0", "down")


def slow_link(host, rate="100mbit"):
    """Shape what the host sends to `rate` (tc tbf on its eth0, inside its namespace, so the machine is left as found
    and the namespace's removal takes it away). tbf, not netem: netem is a kernel module not every kernel has (this
    machine's has none), tbf is built in."""
    _run("ip", "netns", "exec", host["namespace"], "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate,
         "burst", "32kb", "latency", "400ms")


def lossy_link(host, probability=0.05):
    """Drop that share of the packets the host sends and of those it receives, at random (iptables statistic,
    inside its namespace)."""
    for chain, direction in (("OUTPUT", "-o"), ("INPUT", "-i")):
        _run("ip", "netns", "exec", host["namespace"], "iptables", "-A", chain, direction, "eth0", "-m", "statistic",
             "--mode", "random", "--probability", str(probability), "-j", "DROP")


def main():
    parser = argparse.ArgumentParser(prog="python -m tests.simcluster")
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("count", nargs="?", type=int, default=4)
    parser.add_argument("--tag", default="sim")
    args = parser.parse_args()
    if args.action == "up":
        hosts, user_key = up(args.count, args.tag)
        print(json.dumps({"hosts": hosts, "user_key": str(user_key)}, indent=1))
    else:
        down(args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
