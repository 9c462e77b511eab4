"""A one-node Slurm cluster owned by a test: Debian's munged, slurmctld and slurmd in the foreground, each with its
own key, socket, ports, state and logs in one temporary directory. Stopped by the pids it started, nothing else."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from cudaweb.embedded import free_port

BINARIES = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/scontrol")


class SlurmUnavailable(Exception):
    """Slurm cannot run here; the message says why (the test skips with it)."""


class SlurmCluster:
    def __init__(self, node_name="gpu-fake-01", extra_conf=None):
        missing = [b for b in BINARIES if not os.path.exists(b)]
        if missing:
            raise SlurmUnavailable("%s missing: make test installs Debian's slurm-wlm and munge" % ", ".join(missing))
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd needs root to start (it runs jobs as their users); this is uid %d"
                                   % os.geteuid())
        self.node_name = node_name
        self.extra_conf = extra_conf  # a function of the cluster's directory: more slurm.conf lines (a health check)
        self.dir = Path(tempfile.mkdtemp(prefix="cudaweb-slurm-"))
        self.processes = []
        self.conf = self.dir / "slurm.conf"
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        d, host = self.dir, socket.gethostname()
        (d / "state").mkdir()
        (d / "spool").mkdir()
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", ["/usr/sbin/munged", "--foreground", "--force", "--socket=%s" % (d / "munge.sock"),
                               "--key-file=%s" % key, "--pid-file=%s" % (d / "munged.pid"),
                               "--log-file=%s" % (d / "munged.log"), "--seed-file=%s" % (d / "munged.seed")])
        self._wait(lambda: (d / "munge.sock").exists(), "munged", 10)
        self.conf.write_text("\n".join([
            "ClusterName=cudawebtest", "SlurmctldHost=%s(127.0.0.1)" % host,
            "SlurmctldPort=%d" % free_port(), "SlurmdPort=%d" % free_port(),
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            "AuthInfo=socket=%s" % (d / "munge.sock"),
            "StateSaveLocation=%s" % (d / "state"), "SlurmdSpoolDir=%s" % (d / "spool"),
            "SlurmctldPidFile=%s" % (d / "slurmctld.pid"), "SlurmdPidFile=%s" % (d / "slurmd.pid"),
            "SlurmctldLogFile=%s" % (d / "slurmctld.log"), "SlurmdLogFile=%s" % (d / "slurmd.log"),
            # No cgroups, no accounting: one fake node on loopback that only has to answer the controller.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SchedulerType=sched/builtin", "SelectType=select/linear", "MpiDefault=none", "ReturnToService=2",
            "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 State=UNKNOWN"
            % (self.node_name, host),
            "PartitionName=gpu Nodes=%s Default=YES State=UP" % self.node_name]
            + (list(self.extra_conf(d)) if self.extra_conf else []) + [""]))
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["/usr/sbin/slurmd", "-D", "-N", self.node_name])
        self._wait(lambda: "State=IDLE" in self.show_node(check=False), "the node to register as IDLE", 60)

    def _spawn(self, name, argv):
        log = open(self.dir / ("%s.out" % name), "wb")
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.processes.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                      start_new_session=True)))
        log.close()

    def _wait(self, ready, what, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [(name, p.returncode) for name, p in self.processes if p.poll() is not None]
            if dead:
                raise SlurmUnavailable("%s exited %s while waiting for %s:\n%s" % (dead[0][0], dead[0][1], what,
                                                                                 self.logs()))
            if ready():
                return
            time.sleep(0.2)
        raise SlurmUnavailable("no %s within %d s:\n%s" % (what, timeout, self.logs()))

    def logs(self):
        return "\n".join("== %s\n%s" % (p.name, p.read_text(errors="replace")[-1500:])
                         for p in sorted(self.dir.glob("*.out")) + sorted(self.dir.glob("*.log")))

    def scontrol_command(self):
        """The command cudaweb runs on the controller: scontrol reading this cluster's slurm.conf."""
        return ["env", "SLURM_CONF=%s" % self.conf, "scontrol"]

    def show_node(self, check=True):
        done = subprocess.run(self.scontrol_command() + ["show", "node", "-o", self.node_name], capture_output=True,
                              text=True, timeout=30)
        if check and done.returncode != 0:
            raise AssertionError("scontrol show node failed: %s" % done.stderr)
        return done.stdout

    def scontrol(self, *argv, check=True):
        subprocess.run(self.scontrol_command() + list(argv), check=check, capture_output=True, timeout=30)

    def close(self):
        for _, popen in reversed(self.processes):  # only the processes this object started
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        for _, popen in reversed(self.processes):
            try:
                popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
