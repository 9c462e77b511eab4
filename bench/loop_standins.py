"""The stand-ins bench/loop_faults.py names as the loop's commands: nvidia-smi, scontrol and a node's agent. Each is
run by the dashboard through its local transport (the bench's nodes are all this host) and logs every call as one
JSON line with its wall-clock time, so the bench can tell what was done to which node, and when. Stdlib and psycopg
only: no Django.

    python bench/loop_standins.py nvidia-smi CONFIG ARGS...   # CUDAWEB_NVIDIA_SMI
    python bench/loop_standins.py scontrol CONFIG ARGS...     # CUDAWEB_SLURM_SCONTROL
    python bench/loop_standins.py agent NODE_DIR ARGS...      # behind a node's python_path (a two-line wrapper)

CONFIG is a JSON file the bench writes: {"dir": its scratch folder, "database": the bench's PostgreSQL URL,
"tables": {"node": ..., "loop": ..., "action": ...}, "real_slurm": {"node": name, "conf": slurm.conf} or null}.
In "dir": gpus.json ({GPU UUID: [node, Slurm name]}), knobs.json ({"reset_delay_s": seconds, "slurm_slow_s":
seconds, "scontrol": {Slurm name: "fail" | "slow"}}), slurm-state.json (the stand-in scontrol's nodes, {name:
[state, reason]}), and the logs nvidia-smi.log, scontrol.log. A node's agent folder holds `delay` (seconds before
it answers) and agent.log.

- nvidia-smi: `--query-gpu=uuid` lists every GPU of gpus.json (each bench node has a GPU UUID of its own);
  `--query-compute-apps=...` lists no process; `-r -i <UUID>` first records the moment, the node the UUID belongs to,
  the node's loop state and live rungs read from the bench's PostgreSQL at that moment, and its Slurm state and
  reason, then waits knobs' reset_delay_s and answers as the driver does.
- scontrol: `show node -o NAME` and `update NodeName=NAME State=DRAIN|RESUME Reason=...` on the state file, as
  slurmctld answers them; a name knobs mark "fail" exits 1 at once, "slow" after slurm_slow_s (a drain that stays
  pending, then fails); the real Slurm node of the bench (real_slurm) is handed to the real scontrol.
- agent: waits its node's `delay` (or until its stdin closes: --exit-with-stdin, as the agent does when its worker
  is gone), then prints the recorded real report of tests/health/standin.py (a validation that passes).
"""

import contextlib
import fcntl
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _log(path, entry):
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps(entry) + "\n")


def _read_json(path, default):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


@contextlib.contextmanager
def _locked(directory):
    with open(Path(directory) / "slurm-state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _pid_note(directory):
    """Say this process exists (the bench ends any stand-in still running when it stops)."""
    with contextlib.suppress(OSError):
        (Path(directory) / "pids").mkdir(exist_ok=True)
        (Path(directory) / "pids" / str(os.getpid())).write_text("")


def _pid_gone(directory):
    with contextlib.suppress(OSError):
        (Path(directory) / "pids" / str(os.getpid())).unlink()


def _real_scontrol(config, argv):
    env = dict(os.environ, SLURM_CONF=config["real_slurm"]["conf"])
    return subprocess.run(["scontrol"] + argv, capture_output=True, text=True, timeout=30, env=env)


def slurm_view(config, slurm_name):
    """(state, reason) of a Slurm node now: the real one through scontrol, the others from the state file."""
    real = config.get("real_slurm")
    if real and slurm_name == real["node"]:
        done = _real_scontrol(config, ["show", "node", "-o", slurm_name])
        state = re.search(r"\bState=(\S+)", done.stdout)
        reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", done.stdout.strip())
        return (state.group(1) if state else "?"), (reason.group(1) if reason else "")
    with _locked(config["dir"]):
        state, reason = _read_json(Path(config["dir"]) / "slurm-state.json", {}).get(slurm_name, ["IDLE", ""])
    return state, reason


def _loop_view(config, node):
    """The node's loop state, its rung in flight and its live rungs, read from the database now."""
    try:
        import psycopg

        tables = config["tables"]
        with psycopg.connect(config["database"], connect_timeout=2, autocommit=True) as conn:
            row = conn.execute(
                "SELECT l.state, l.action, (SELECT string_agg(a.kind || ':' || a.status, ',') FROM %s a "
                "WHERE a.node_id = n.id AND a.status IN ('pending', 'running')) FROM %s n LEFT JOIN %s l ON "
                "l.node_id = n.id WHERE n.name = %%s" % (tables["action"], tables["node"], tables["loop"]),
                (node,)).fetchone()
        return {"loop_state": row[0] if row else None, "loop_action": row[1] if row else None,
                "live": row[2] if row else None}
    except Exception as exc:  # the database away (a bench outage): the bench judges from its history instead
        return {"loop_state": None, "db_error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}


def nvidia_smi(config, argv):
    directory = Path(config["dir"])
    gpus = _read_json(directory / "gpus.json", {})
    if argv[:1] == ["--query-gpu=uuid"]:
        print("\n".join(gpus))
        return 0
    if argv[:1] and argv[0].startswith("--query-compute-apps"):
        return 0
    if argv[:1] == ["-r"]:
        moment = time.time()
        uuid = argv[argv.index("-i") + 1] if "-i" in argv else ""
        node, slurm_name = gpus.get(uuid, [None, None])
        entry = {"t": moment, "argv": argv, "node": node, "uuid": uuid}
        if node:
            entry.update(_loop_view(config, node))
            try:
                entry["slurm_state"], entry["slurm_reason"] = slurm_view(config, slurm_name)
            except Exception as exc:
                entry["slurm_state"], entry["slurm_error"] = None, str(exc)[:200]
        _log(directory / "nvidia-smi.log", entry)
        time.sleep(float(_read_json(directory / "knobs.json", {}).get("reset_delay_s", 0.2)))
        print("GPU 00000000:00:06.0 was successfully reset.")
        return 0
    _log(directory / "nvidia-smi.log", {"t": time.time(), "argv": argv})
    return 0


def _slurm_name(argv):
    if argv[:2] == ["show", "node"]:
        return argv[-1]
    for arg in argv:
        if arg.startswith("NodeName="):
            return arg.split("=", 1)[1]
    return ""


def scontrol(config, argv):
    directory = Path(config["dir"])
    name = _slurm_name(argv)
    _log(directory / "scontrol.log", {"t": time.time(), "argv": argv, "pid": os.getpid()})
    real = config.get("real_slurm")
    if real and name == real["node"]:
        done = _real_scontrol(config, argv)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
    knobs = _read_json(directory / "knobs.json", {})
    behaviour = knobs.get("scontrol", {}).get(name)
    if behaviour == "slow":
        time.sleep(float(knobs.get("slurm_slow_s", 3)))
    if behaviour in ("fail", "slow"):
        print("slurm_update error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        return 1
    path = directory / "slurm-state.json"
    with _locked(directory):
        nodes = _read_json(path, {})
        state, reason = nodes.get(name, ["IDLE", ""])
        if argv[:2] == ["show", "node"]:
            print("NodeName=%s Arch=x86_64 CPUTot=1 State=%s ThreadsPerCore=1%s" % (
                name, state, " Reason=%s [root@2026-12-06T10:00:00]" % reason if reason else ""))
            return 0
        fields = dict(arg.split("=", 1) for arg in argv[1:] if "=" in arg)
        if argv[:1] != ["update"] or "State" not in fields:
            print("scontrol: error: not what this stand-in answers: %s" % argv, file=sys.stderr)
            return 1
        if fields["State"].upper() == "DRAIN":
            if not fields.get("Reason"):
                print("You must specify a reason when DOWNING or DRAINING a node. Request denied", file=sys.stderr)
                return 1
            nodes[name] = ["IDLE+DRAIN", fields["Reason"]]
        elif fields["State"].upper() == "RESUME":
            if "DRAIN" not in state:
                print("slurm_update error: Invalid node state specified", file=sys.stderr)
                return 1
            nodes[name] = ["IDLE", ""]
        else:
            print("slurm_update error: Invalid node state specified", file=sys.stderr)
            return 1
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(nodes))
        os.replace(tmp, path)
    return 0


def agent(node_dir, argv):
    """argv: the agent's path, then its arguments (--mode standard --json ...)."""
    node_dir = Path(node_dir)
    _log(node_dir / "agent.log", {"t": time.time(), "argv": argv[1:], "pid": os.getpid()})
    _pid_note(node_dir.parents[1])  # the bench's scratch folder: agents/<node>/
    try:
        return _agent(node_dir, argv)
    finally:
        _pid_gone(node_dir.parents[1])


def _agent(node_dir, argv):
    try:
        delay = float((node_dir / "delay").read_text().strip() or 0)
    except (OSError, ValueError):
        delay = 0.0
    until = time.monotonic() + delay
    watch_stdin = "--exit-with-stdin" in argv
    while time.monotonic() < until:
        if watch_stdin:
            ready, _, _ = select.select([sys.stdin], [], [], min(0.2, max(0.0, until - time.monotonic())))
            if ready and not os.read(sys.stdin.fileno(), 4096):
                return 3  # its worker is gone: the agent stops as the real one does
        else:
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))
    sys.path.insert(0, str(REPO))
    from tests.health.standin import answer

    args = argv[1:]
    (node_dir / "faults").touch()
    answer(args, str(node_dir / "faults"))
    return 0


def main(argv):
    role, where, rest = argv[1], argv[2], argv[3:]
    if role == "agent":
        return agent(where, rest)
    config = _read_json(where, None)
    if config is None:
        print("cannot read the stand-ins' configuration %s" % where, file=sys.stderr)
        return 2
    _pid_note(config["dir"])
    try:
        return {"nvidia-smi": nvidia_smi, "scontrol": scontrol}[role](config, rest)
    finally:
        _pid_gone(config["dir"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
