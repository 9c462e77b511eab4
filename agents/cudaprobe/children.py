"""Run GPU work in child processes under a budget, one process per rank where ranks are needed.

Torch and CUDA run only in children: a hung driver call or an NCCL rendezvous that never completes
is killed with its process group and becomes a finding, while the agent itself always reports.
"""

import json
import os
import socket
import sys
import tempfile
import time

from agents.cudaprobe import proc

RESULT_MARKER = "CUDAPROBE_RESULT "


def package_root():
    """The directory (or zipapp) that holds the `agents` package, for the children's PYTHONPATH."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env(ctx, extra=None):
    env = dict(ctx.environ)
    root = package_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


def worker_argv(task, args):
    return [sys.executable, "-m", "agents.cudaprobe.gpu.worker", task, json.dumps(args)]


def parse_result(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                return json.loads(line[len(RESULT_MARKER):])
            except ValueError:
                return None
    return None


class TaskOutcome:
    """A child's parsed result (or None) and how it ended."""

    def __init__(self, result, command, log=""):
        self.result = result
        self.command = command
        self.log = log

    @property
    def timed_out(self):
        return self.command.timed_out

    @property
    def error(self):
        if self.result is None:
            return None
        return self.result.get("error")

    def evidence(self):
        parts = []
        if self.result and self.result.get("error"):
            parts.append("%s: %s" % (self.result["error"], self.result.get("message", "")))
            parts.append(self.result.get("traceback", ""))
        parts.append(self.command.stderr)
        if self.log:
            parts.append(self.log)
        return "\n".join(p for p in parts if p).strip()


def run_task(ctx, task, args=None, timeout=None, env=None):
    """Run one worker task in a child process; returns a TaskOutcome."""
    command = proc.run(worker_argv(task, args or {}), timeout or ctx.budget_s, env=child_env(ctx, env))
    return TaskOutcome(parse_result(command.stdout), command)


def free_port(host="127.0.0.1"):
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def run_ranks(ctx, task, world, args=None, timeout=None, env=None, master=None, ranks=None):
    """Start one child per rank and wait for all under one deadline; returns a list of TaskOutcome.

    When one rank fails, the others get a short grace period and are then killed: a rank waiting for a
    dead peer would otherwise hang until the deadline. `ranks` narrows which ranks run here (a
    cross-node pair runs one rank on each host).
    """
    addr, port = master or ("127.0.0.1", free_port())
    deadline = time.monotonic() + (timeout or ctx.budget_s)
    logdir = tempfile.mkdtemp(prefix="cudaprobe-")
    children = []
    try:
        for rank in (range(world) if ranks is None else ranks):
            rank_env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                        "MASTER_ADDR": addr, "MASTER_PORT": str(port)}
            rank_env.update(env or {})
            out_path = os.path.join(logdir, "rank%d.out" % rank)
            err_path = os.path.join(logdir, "rank%d.err" % rank)
            popen = proc.start(worker_argv(task, args or {}), env=child_env(ctx, rank_env), log_path=err_path,
                               out_path=out_path)
            children.append((popen, out_path, err_path))
        timed_out = set()
        while any(p.poll() is None for p, _, _ in children):
            now = time.monotonic()
            if any(p.poll() not in (None, 0) for p, _, _ in children):
                deadline = min(deadline, now + 5)
            if now > deadline:
                for popen, _, _ in children:
                    if popen.poll() is None:
                        timed_out.add(popen.pid)
                    proc.kill_group(popen)
                break
            time.sleep(0.05)
        outcomes = []
        for popen, out_path, err_path in children:
            popen.wait()
            proc.kill_group(popen)
            text, log = _tail(out_path), _tail(err_path)
            command = proc.CommandResult(popen.args, popen.returncode, text, "", popen.pid in timed_out)
            # NCCL_DEBUG output goes to stdout unless NCCL_DEBUG_FILE says otherwise: keep both.
            chatter = "\n".join(line for line in text.splitlines() if not line.startswith(RESULT_MARKER))
            outcomes.append(TaskOutcome(parse_result(text), command, (log + "\n" + chatter).strip()))
        return outcomes
    finally:
        for popen, _, _ in children:
            proc.kill_group(popen)
        for name in os.listdir(logdir):
            os.unlink(os.path.join(logdir, name))
        os.rmdir(logdir)


def _tail(path):
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - proc.OUTPUT_CAP))
        return fh.read().decode("utf-8", "replace")
