"""A PostgreSQL cluster of our own, for tests and benches that break the database: Debian's initdb / pg_ctl on a
free loopback port in a temporary directory, never the machine's server. initdb refuses to run as root, so as root
every PostgreSQL command runs as the `postgres` OS user (runuser), in a directory that user owns."""

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from cudaweb.embedded import free_port


def _bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise RuntimeError("no /usr/lib/postgresql/*/bin/initdb: install Debian's postgresql package")
    return Path(found[-1]).parent


class Cluster:
    """initdb, start on a free port; stop / start / restart / terminate its connections; close removes it."""

    def __init__(self):
        self.bin = _bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="cudaweb-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()

    def _pg(self, tool, *args, timeout=120):
        argv = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError("%s failed (%d): %s\n%s" % (tool, done.returncode, done.stderr[-2000:],
                                                           self.log.read_text()[-2000:] if self.log.exists() else ""))
        return done.stdout

    def start(self):
        options = "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" % (self.port,
                                                                                                     self.dir)
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")

    def stop(self, mode="fast"):
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop")

    def restart(self, *, down_s=0.0):
        """A restart (or a failover) that keeps the server away for `down_s` seconds."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def url(self, dbname="postgres"):
        return "postgres://postgres@127.0.0.1:%d/%s" % (self.port, dbname)

    def execute(self, sql, params=(), dbname="postgres"):
        with psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else None

    def create_database(self, name):
        self.execute('CREATE DATABASE "%s"' % name.replace('"', ""))

    def terminate(self, dbname):
        """pg_terminate_backend on every connection to `dbname`, as a restart, failover or pooler restart does.
        Returns how many were ended."""
        rows = self.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND "
                            "pid <> pg_backend_pid()", (dbname,))
        return sum(1 for (ended,) in rows if ended)

    def close(self):
        try:
            self.stop("immediate")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
