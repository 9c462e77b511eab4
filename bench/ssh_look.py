"""Where the wall time of one look over SSH goes, on the simulated cluster (tests/simcluster.py; needs root, run it
under `flock /tmp/cudaweb-heavy.lock`): one host, one kept session, an "agent" that only prints the recorded watch
report, and each look split into the channel's open + exec, the first byte, the last byte, the exit status seen by
the read loop, and the read loop's waits (select calls that returned with nothing to read, and how long they took).

    python3 bench/ssh_look.py --looks 50 [--hosts 16]

With --hosts N the looks run on N threads at once, one session per host, as the watch's threads do; --phases runs
run_agent's steps inline to time each.
"""

import argparse
import json
import select
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = ("open_session", "exec_command", "exec -> first byte", "first byte -> EOF", "EOF -> exit status")
sys.path.insert(0, str(REPO))


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--looks", type=int, default=50, help="looks per host")
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--phases", action="store_true", help="split each look into its phases")
    args = parser.parse_args()

    from cudaweb.remote.transports import ssh
    from cudaweb.remote.transports.base import agent_command, read_bounded
    from tests import simcluster
    from tests.health.standin import watch_report

    scratch = Path(tempfile.mkdtemp(prefix="cudaweb-ssh-look-"))
    report = scratch / "watch.json"
    report.write_text(json.dumps(watch_report()))
    agent = scratch / "agent"
    agent.write_text("#!/bin/sh\ncat %s\n" % report)
    agent.chmod(0o755)

    # the read loop's select calls: how many came back with nothing to read, and how long those took
    waits, lock, phases = [], threading.Lock(), []
    real_select = select.select

    def timed_select(r, w, x, timeout=None):
        started = time.monotonic()
        ready = real_select(r, w, x, timeout)
        with lock:
            waits.append((time.monotonic() - started, bool(ready[0])))
        return ready

    ssh.select.select = timed_select
    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(args.hosts, tag)
    rows = []
    try:
        transports = []
        for host in hosts:
            transport = ssh.SSHTransport(host["address"], 22, "root", user_key.read_text(), host["host_key"])
            transport.connect()
            transports.append(transport)

        def looks(transport):
            mine = []
            for _ in range(args.looks):
                t0 = time.monotonic()
                if args.phases:
                    # run_agent's steps, timed one by one
                    command = shlex.join(agent_command(str(agent), "/nowhere.pyz", ["--mode", "watch", "--json"],
                                                       30))
                    channel = transport.client.get_transport().open_session(timeout=10)
                    t_open = time.monotonic()
                    channel.exec_command(command)
                    t_exec = time.monotonic()
                    seen = {}

                    class Timed(ssh._Channel):
                        def read(self, timeout):
                            chunks = super().read(timeout)
                            if chunks and "first" not in seen:
                                seen["first"] = time.monotonic()
                            if self.channel.eof_received and "eof" not in seen:
                                seen["eof"] = time.monotonic()
                            return chunks

                    stdout, _, _ = read_bounded(Timed(channel), 30, time.monotonic() + 50, 2**21)
                    status = channel.recv_exit_status()
                    t_end = time.monotonic()
                    channel.close()
                    with lock:
                        phases.append((t_open - t0, t_exec - t_open, seen.get("first", t_end) - t_exec,
                                       seen.get("eof", t_end) - seen.get("first", t_end),
                                       t_end - seen.get("eof", t_end)))
                    assert status == 0 and json.loads(stdout)["mode"] == "watch"
                else:
                    result = transport.run_agent(str(agent), "/nowhere.pyz", ["--mode", "watch", "--json"], 30)
                    assert result.exit_status == 0 and json.loads(result.stdout)["mode"] == "watch"
                mine.append(time.monotonic() - t0)
            return mine

        with ThreadPoolExecutor(max_workers=len(transports)) as pool:
            for mine in pool.map(looks, transports):
                rows += mine
        for transport in transports:
            transport.close()
    finally:
        simcluster.down(tag)
    empty = [w for w, ready in waits if not ready]
    print("ssh_look: %d host(s), %d looks each, select timeout as in the read loop" % (args.hosts, args.looks))
    print("look wall ms: median %.1f p90 %.1f max %.1f" % (1000 * statistics.median(rows), 1000 * _pct(rows, 0.9),
                                                         1000 * max(rows)))
    print("select calls: %d (%.1f a look); with nothing to read: %d, their wait ms median %.1f max %.1f" % (
        len(waits), len(waits) / len(rows), len(empty), 1000 * statistics.median(empty) if empty else 0,
        1000 * max(empty) if empty else 0))
    for i, name in enumerate(PHASES if phases else ()):
        column = [row[i] for row in phases]
        print("%-20s ms median %.1f p90 %.1f max %.1f" % (name, 1000 * statistics.median(column),
                                                          1000 * _pct(column, 0.9), 1000 * max(column)))


if __name__ == "__main__":
    main()
