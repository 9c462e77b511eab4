"""The Docker engine for `make compose-test`: the one that answers already, or one of our own that leaves the
host's network as it found it.

A plain dockerd sets the iptables FORWARD policy to DROP, turns on bridge-nf-call-iptables and IP forwarding, and
from then on the simulated cluster's bridged namespaces (tests/simcluster.py) stop talking. Ours runs with
--iptables=false --ip-forward=false --ip-masq=false --bridge=none: it writes no firewall rule and no sysctl, its
only network is the compose network (198.19.7.0/24, inside 198.18.0.0/15 and apart from the simulated cluster's
198.18.0.0/16), published ports go through docker-proxy, and builds use the host's network (`build --network
host`). What it keeps between runs (images, the layer cache) lies in STATE; only its own pid is ever stopped.
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

STATE = Path(os.environ.get("CUDAWEB_COMPOSE_STATE", "/var/tmp/cudaweb-compose"))
SOCKET = STATE / "docker.sock"
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables")
PACKAGES = {"dockerd": "docker.io", "docker": "docker.io", "debootstrap": "debootstrap", "iptables": "iptables"}


def network_state():
    """The host settings a container engine may change: the sysctls above and every iptables rule and policy."""
    state = {}
    for name in SYSCTLS:
        path = Path("/proc/sys") / name
        state[name] = path.read_text().strip() if path.exists() else None
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool):
            out = subprocess.run([tool], capture_output=True, text=True).stdout
            # counters and the dump's timestamp comments change on their own
            state[tool] = [line.split(" [")[0] for line in out.splitlines() if not line.startswith("#")]
    return state


def restore_sysctls(before):
    """Put back, one by one, the sysctls that differ from `before`; returns the names put back."""
    put_back = []
    for name in SYSCTLS:
        path = Path("/proc/sys") / name
        if before.get(name) is not None and path.exists() and path.read_text().strip() != before[name]:
            path.write_text(before[name] + "\n")
            put_back.append(name)
    return put_back


def install_missing():
    """Debian's docker.io, debootstrap and iptables, and a compose client, where they are missing (as root)."""
    wanted = sorted({package for tool, package in PACKAGES.items() if not shutil.which(tool)})
    if not compose_command():
        wanted.append("docker-compose")
    if wanted:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", *wanted], check=True, env=env,
                       stdout=subprocess.DEVNULL)


def compose_command():
    """`docker compose` (v2) where the plugin is there, else Debian's `docker-compose`; None when neither is."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def answers(env):
    return subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0


class Engine:
    """A Docker engine for the test: `env` points docker and compose at it; `close()` stops it if we started it."""

    def __init__(self):
        self.pid = None
        self.env = dict(os.environ)
        if shutil.which("docker") and answers(self.env):
            return  # the operator's own engine: used as it is, never stopped
        install_missing()
        STATE.mkdir(parents=True, exist_ok=True)
        self.env["DOCKER_HOST"] = "unix://%s" % SOCKET
        pidfile = STATE / "dockerd.pid"
        if answers(self.env) and pidfile.exists():
            self.pid = int(pidfile.read_text())  # ours, left by an earlier run that was killed: stopped at the end
            return
        log = open(STATE / "dockerd.log", "ab")
        process = subprocess.Popen(
            ["dockerd", "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none",
             "--default-address-pool", "base=198.19.0.0/16,size=24", "--data-root", str(STATE / "data"),
             "--exec-root", str(STATE / "exec"), "--pidfile", str(pidfile), "-H", self.env["DOCKER_HOST"]],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = process.pid
        deadline = time.monotonic() + 60
        while not answers(self.env):
            if process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("dockerd did not start:\n" + (STATE / "dockerd.log").read_text()[-3000:])
            time.sleep(0.5)

    @property
    def started_here(self):
        return self.pid is not None

    def close(self):
        """Stop our dockerd (and the containerd it runs) by its pid; an engine we found is left alone."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while Path("/proc/%d" % self.pid).exists() and time.monotonic() < deadline:
                _reap(self.pid)
                time.sleep(0.2)
            if Path("/proc/%d" % self.pid).exists():
                os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(self.pid)
        self.pid = None
        for mount in reversed(our_mounts()):  # the host network namespace dockerd pinned under exec/netns
            subprocess.run(["umount", mount], check=False)


def our_mounts():
    """Mount points under STATE: what a stopped dockerd may leave mounted on the host."""
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    return [point for point in points if point.startswith(str(STATE) + "/")]


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (adopted from an earlier run): init reaps it
