"""GPU workers of an earlier agent still running on this host: found in /proc, named, never ended.

A worker whose agent died (an agent older than lifeline.py, or one killed in a way no guard caught) computes and
holds GPU memory with no one to read it, and every figure taken beside it is a busy GPU's. Whose process it is and
whether it may be killed is the operator's call: the agent names its pid and leaves it.
"""

import os

from agents.cudaprobe import lifeline

WORKER_MODULE = "agents.cudaprobe.worker"


def _cmdline(proc_dir, pid):
    try:
        with open(os.path.join(proc_dir, str(pid), "cmdline"), "rb") as fh:
            return [part.decode("utf-8", "replace") for part in fh.read().split(b"\0") if part]
    except OSError:
        return None


def _parent_and_session(proc_dir, pid):
    """(parent pid, session id) from /proc/PID/stat (after the command name, which may hold spaces and
    parentheses), or None for a zombie (it runs nothing and holds no GPU memory) or a process gone."""
    try:
        with open(os.path.join(proc_dir, str(pid), "stat")) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else (int(fields[1]), int(fields[3]))
    except (OSError, IndexError, ValueError):
        return None


def is_worker(argv):
    """`python -m agents.cudaprobe.worker --serve`, from a checkout or from the zipapp on PYTHONPATH."""
    return bool(argv) and WORKER_MODULE in argv and "--serve" in argv


def is_agent(argv):
    """`python -m agents.cudaprobe ...` or `python cudaprobe-<digest>.pyz ...` (the dashboard's copy)."""
    if not argv:
        return False
    return "agents.cudaprobe" in argv or any(os.path.basename(a).startswith("cudaprobe") and a.endswith(".pyz")
                                             for a in argv)


def _agent_named(proc_dir, pid):
    """The agent pid a worker was started for (lifeline.AGENT_PID_ENV in its environment), or None where the worker
    is older than that or its environment cannot be read (another user's process)."""
    try:
        with open(os.path.join(proc_dir, str(pid), "environ"), "rb") as fh:
            environ = fh.read().split(b"\0")
    except OSError:
        return None
    prefix = (lifeline.AGENT_PID_ENV + "=").encode()
    for item in environ:
        if item.startswith(prefix) and item[len(prefix):].isdigit():
            return int(item[len(prefix):])
    return None


def stray_workers(proc_dir="/proc"):
    """[{"pid", "ppid", "parent"}] of the GPU workers whose agent is gone, in pid order: a worker that names its
    agent (lifeline) is a stray once its parent is another process; one that does not (an older agent's, leading
    its own session as they all did) once its parent is no agent (init, a subreaper, or anything else that adopted
    it)."""
    try:
        entries = [name for name in os.listdir(proc_dir) if name.isdigit()]
    except OSError:
        return []
    strays = []
    for name in sorted(entries, key=int):
        argv = _cmdline(proc_dir, name)
        if not is_worker(argv):
            continue
        found = _parent_and_session(proc_dir, name)
        if found is None:
            continue
        ppid, session = found
        parent = _cmdline(proc_dir, ppid)
        agent = _agent_named(proc_dir, name)
        # an older agent started each worker in a session of its own (proc.start): a worker that is no session
        # leader was started by hand or by a test, not by an agent
        if (ppid != agent) if agent is not None else (session == int(name) and not is_agent(parent)):
            strays.append({"pid": int(name), "ppid": ppid, "parent": " ".join(parent or [])[:120] or "gone"})
    return strays


def describe(strays):
    return ", ".join("pid %d (parent %d: %s)" % (s["pid"], s["ppid"], s["parent"]) for s in strays)
