"""Run GPU work in child processes under a budget, one process per rank where ranks are needed.

Torch and CUDA run only in children: a hung driver call or an NCCL rendezvous that never completes
is killed with its process group and becomes a finding, while the agent itself always reports.

The children of one agent run form a pool of long-lived workers (`worker --serve`), one per rank:
each imports torch and creates its CUDA context once, then takes one task at a time over stdin.
Rank 0 also runs the single-process tasks (torch facts, L4 benchmarks). A worker that fails, times
out or dies is killed with its whole pool; the next task starts a fresh one.
"""

import json
import os
import selectors
import shutil
import socket
import sys
import tempfile
import time

from agents.cudaprobe import bytecode, lifeline, precompile, proc
from agents.cudaprobe.registry import task_name
from agents.cudaprobe.worker import RESULT_MARKER

FAIL_FAST_GRACE_S = 5.0
# NCCL names its transports only at INFO; the workers are ours, so this changes nothing on the host.
POOL_ENV = {"NCCL_DEBUG": "INFO"}
# The training workers import these after torch, before their first task: torch.optim's first use imports
# torch._dynamo, 4-6 s on an H200 host's CPU (issue 22), which they pay while the L4-L5 checks run; then what the
# first step needs that no context does (train_prewarm: cuInit; issue 33).
TRAIN_PRELOAD = "torch._dynamo,agents.cudaprobe.train_prewarm"


def package_root():
    """The directory (or zipapp) that holds the `agents` package, for the children's PYTHONPATH."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env(ctx, extra=None):
    env = dict(ctx.environ)
    root = package_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    first = ctx.bytecode is None
    if first:
        ctx.bytecode = bytecode.prepare(ctx.environ)  # once per run, for the report's timing
    bytecode.child_environment(env, ctx.bytecode)
    if first and ctx.bytecode.get("path") and not ctx.bytecode["warm"] and precompile.wanted(ctx.environ):
        ctx.precompile = precompile.start(env)  # a host's first run: torch compiled on several cores, ahead
    env.update(extra or {})
    return env


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

    def __init__(self, result, command, log="", pid=None):
        self.result = result
        self.command = command
        self.log = log
        self.pid = pid  # the worker process that ran it

    def to_record(self):
        """As JSON: what --record keeps of a real run, for the judging tests to replay (ReplayPool)."""
        c = self.command
        return {"result": self.result, "log": self.log, "pid": self.pid, "argv": c.argv, "returncode": c.returncode,
                "stdout": c.stdout, "stderr": c.stderr, "timed_out": c.timed_out}

    @classmethod
    def from_record(cls, record):
        command = proc.CommandResult(record["argv"], record["returncode"], record["stdout"], record["stderr"],
                                     record["timed_out"])
        return cls(record["result"], command, record["log"], record["pid"])

    @property
    def timed_out(self):
        return self.command.timed_out

    @property
    def error(self):
        if self.result is None:
            return None
        return self.result.get("error")

    @property
    def ok(self):
        return bool(self.result) and not self.error and not self.timed_out

    def evidence(self):
        parts = []
        if self.result and self.result.get("error"):
            parts.append("%s: %s" % (self.result["error"], self.result.get("message", "")))
            parts.append(self.result.get("traceback", ""))
        parts.append(self.command.stderr)
        if self.log:
            parts.append(self.log)
        return "\n".join(p for p in parts if p).strip()


class Worker:
    """One `worker --serve` process: tasks in on stdin, chatter and one result line per task on stdout."""

    def __init__(self, env, rank):
        self.rank = rank
        self.logs = {}
        for name in ("err", "nccl"):  # stderr, and NCCL_DEBUG output (a file: NCCL's stdio may not flush)
            fd, self.logs[name] = tempfile.mkstemp(prefix="cudaprobe-rank%d-" % rank, suffix="." + name)
            os.close(fd)
        # the worker ends with this process (lifeline): its pid, named so that a worker started as we die knows
        env = dict(env, NCCL_DEBUG_FILE=self.logs["nccl"], **{lifeline.AGENT_PID_ENV: str(os.getpid())})
        argv = [sys.executable, "-m", "agents.cudaprobe.worker", "--serve"]
        self.popen = proc.start(argv, env=env, log_path=self.logs["err"])
        os.set_blocking(self.popen.stdout.fileno(), False)
        self.buffer = b""
        self.lines = []
        self.result = None
        self.offsets = {}

    def send(self, task, args):
        self.lines, self.result = [], None
        self.offsets = {name: os.path.getsize(path) for name, path in self.logs.items()}
        try:
            self.popen.stdin.write((json.dumps({"task": task, "args": args}) + "\n").encode())
            self.popen.stdin.flush()
        except OSError:
            pass  # it died: poll() says so and the caller reports it

    def read(self):
        """Take what stdout has; True once this task's result line has arrived."""
        while True:
            try:
                chunk = os.read(self.popen.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buffer += chunk
            *complete, self.buffer = self.buffer.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                if line.startswith(RESULT_MARKER):
                    self.result = parse_result(line) or {"error": "BadResult", "message": line[:300]}
                elif sum(map(len, self.lines)) < proc.OUTPUT_CAP:
                    self.lines.append(line)
        return self.result is not None

    def dead(self):
        return self.popen.poll() is not None

    def outcome(self, timed_out, argv_task):
        log = "\n".join(_tail(path, self.offsets.get(name, 0)) for name, path in self.logs.items()).strip()
        returncode = self.popen.poll()
        if self.result is None and returncode is not None and not timed_out:
            log = (log + "\nworker exited with status %s" % returncode).strip()
        command = proc.CommandResult([argv_task, "rank%d" % self.rank], returncode if self.result is None else 0,
                                     "\n".join(self.lines), "", timed_out)
        return TaskOutcome(self.result, command, (log + "\n" + "\n".join(self.lines)).strip(), self.popen.pid)

    def close(self):
        proc.kill_group(self.popen)
        self.popen.wait()
        for stream in (self.popen.stdin, self.popen.stdout):
            try:
                stream.close()
            except OSError:
                pass
        for path in self.logs.values():
            try:
                os.unlink(path)
            except OSError:
                pass


TIMING_KEYS = ("task_s", "setup_s", "measured_s")


def call_timing(ctx, task, ranks, sent, outcomes):
    """One GPU task call for the report's waterfall: when it was sent, how long until every rank answered, and the
    slowest rank's own split (task_s in the worker; setup_s and measured_s as the task reports them)."""
    entry = {"task": task.__name__, "ranks": list(ranks), "started_s": ctx.since_start(sent),
             "wall_s": round(time.monotonic() - sent, 3)}
    timings = [(o.result or {}).get("timing") or {} for o in outcomes if isinstance(o.result, dict)]
    for key in TIMING_KEYS:
        values = [t[key] for t in timings if isinstance(t.get(key), (int, float))]
        if values:  # never below zero: a slip in a task's own arithmetic must not cost the report its schema
            entry[key] = round(max(0.0, max(values)), 3)
    phases = next((t["phases"] for t in timings if isinstance(t.get("phases"), dict)), None)
    if phases:
        entry["phases"] = {k: round(max(0.0, v), 3) for k, v in phases.items() if isinstance(v, (int, float))}
    return entry


class Pool:
    """Workers keyed by rank, started on first use with the same environment."""

    def __init__(self, ctx, env=None, role="measure"):
        self.ctx = ctx
        self.role = role
        self.started_pids = set()  # every worker it ever started: all ours, for telling other processes apart
        # torch and the CUDA driver write caches (inductor, triton, the JIT ComputeCache) under /tmp or ~ on first
        # use; point them at a scratch directory of this pool, removed with it, so nothing is left on the host.
        self.scratch = tempfile.mkdtemp(prefix="cudaprobe-")
        caches = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(self.scratch, "inductor"),
                  "TRITON_CACHE_DIR": os.path.join(self.scratch, "triton"),
                  "CUDA_CACHE_PATH": os.path.join(self.scratch, "nv-compute-cache")}
        self.env = dict(POOL_ENV, **caches, **(env or {}))
        self.workers = {}

    def start(self, ranks):
        """Start the workers of `ranks` not yet running (they import torch while the caller goes on)."""
        for rank in ranks:
            if rank not in self.workers:
                rank_env = dict(self.env, RANK=str(rank))
                rank_env.setdefault("LOCAL_RANK", str(rank))  # a cross-node rank drives its host's GPU 0
                self.workers[rank] = Worker(child_env(self.ctx, rank_env), rank)
                self.started_pids.add(self.workers[rank].popen.pid)
                self.workers[rank].timing = {"rank": rank, "role": self.role, "started_s": self.ctx.since_start()}
                self.ctx.worker_timings.append(self.workers[rank].timing)

    def call(self, task, args, ranks, timeout):
        """Run the @gpu_task `task` on each rank at once under one deadline; a list of TaskOutcome in rank order.

        When one rank fails, the others get a short grace period and are then killed: a rank waiting for a
        dead peer would otherwise hang until the deadline. Any failure ends the pool (a CUDA error can
        poison a context), so the next call starts clean.
        """
        self.start(ranks)
        workers = [self.workers[r] for r in ranks]
        sent = time.monotonic()
        for worker in workers:
            worker.send(task_name(task), args)
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        for worker in workers:
            selector.register(worker.popen.stdout, selectors.EVENT_READ, worker)
        timed_out = set()
        try:
            pending = list(workers)
            while pending:
                now = time.monotonic()
                if any(w.dead() or (w.result and w.result.get("error")) for w in workers):
                    deadline = min(deadline, now + FAIL_FAST_GRACE_S)
                if now > deadline:
                    timed_out = {w.rank for w in pending}
                    break
                for key, _ in selector.select(timeout=min(0.5, max(0.0, deadline - now))):
                    key.data.read()
                for worker in list(pending):
                    if worker.result is not None or (worker.dead() and not worker.read()):
                        pending.remove(worker)
                        selector.unregister(worker.popen.stdout)
        finally:
            selector.close()
        outcomes = [w.outcome(w.rank in timed_out, task.__name__) for w in workers]
        self.ctx.task_timings.append(call_timing(self.ctx, task, ranks, sent, outcomes))
        for worker in workers:
            timing = (worker.result or {}).get("timing") or {}
            for key in ("import_s", "preload_s"):
                if isinstance(timing.get(key), (int, float)) and getattr(worker, "timing", None) is not None:
                    worker.timing[key] = round(timing[key], 3)
        if not all(o.ok for o in outcomes):
            self.close()
        if self.ctx.records is not None:
            self.ctx.records.append({"task": task_name(task), "ranks": list(ranks),
                                     "outcomes": [o.to_record() for o in outcomes]})
        return outcomes

    def pids(self):
        return set(self.started_pids)

    def close(self):
        """End every worker (their process groups); a later call starts fresh ones."""
        for worker in self.workers.values():
            worker.close()
        self.workers = {}

    def remove(self):
        """End the pool for good: its workers and its scratch directory."""
        self.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class ReplayPool:
    """Answers each call with the outcomes a real run recorded for the same task, in order (--record): the
    judging of every check can then be tested on real figures, with no GPU."""

    def __init__(self, records):
        self.all = list(records)
        self.records = list(records)

    def start(self, ranks):
        return None

    def call(self, task, args, ranks, timeout):
        name = task_name(task)
        for index, record in enumerate(self.records):
            if record["task"] == name:
                del self.records[index]
                return [TaskOutcome.from_record(o) for o in record["outcomes"]]
        raise LookupError("no recorded outcome left for %s" % name)

    def pids(self):
        """The workers of the recorded run, which were ours."""
        return {o["pid"] for record in self.all for o in record["outcomes"] if o.get("pid")}

    def close(self):
        return None

    def remove(self):
        return None


def local_pool(ctx):
    """The run's pool of local workers (rank r drives GPU r), created on first use."""
    if ctx.pool is None:
        ctx.pool = Pool(ctx, env={"CUDAPROBE_WORKER_CONTEXT": "1"})  # each makes its GPU's context early
    return ctx.pool


def train_pool(ctx):
    """The run's training workers, one per GPU (rank r trains on GPU r), created on first use: apart from the
    measuring workers so that they preload what training needs while L4-L5 measure (a replayed run answers from
    its records instead)."""
    if isinstance(ctx.pool, ReplayPool):
        return ctx.pool
    if ctx.trainers is None:
        ctx.trainers = Pool(ctx, env={"CUDAPROBE_WORKER_PRELOAD": TRAIN_PRELOAD}, role="train")
    return ctx.trainers


def hand_gpus_to_trainers(ctx):
    """End the measuring workers before training, so that one process of ours holds a context on each GPU at a
    time (EXCLUSIVE_PROCESS compute mode allows no more); the L4-L5 checks that used them have run."""
    if isinstance(ctx.pool, Pool):
        ctx.pool.close()


def end_trainers(ctx):
    """End the training workers once training is over (before L7): they hold a context and the memory their
    allocator cached on each GPU, which the burn-in would count as another process's and the memory test could not
    cover. Their pids stay ours (our_pids)."""
    if isinstance(getattr(ctx, "trainers", None), Pool):
        ctx.trainers.close()


def our_pids(ctx):
    """Every worker process this run started (measuring, isolated, training, replayed)."""
    pids = set()
    for pool in (ctx.pool, getattr(ctx, "isolated", None), getattr(ctx, "trainers", None)):
        if pool is not None:
            pids |= pool.pids()
    return pids


def _own_pool(ctx, env=None):
    """A pool for one call, ended with it (a replayed run answers from its records instead)."""
    return ctx.pool if isinstance(ctx.pool, ReplayPool) else Pool(ctx, env=env)


def prestart_isolated(ctx):
    """Start the worker of the next isolated task now, so that it imports torch while other checks run."""
    if ctx.isolated is None:
        ctx.isolated = _own_pool(ctx)
        ctx.isolated.start([0])


def run_task(ctx, task, args=None, timeout=None, isolated=False):
    """Run one single-process @gpu_task on the local rank-0 worker; returns a TaskOutcome.

    isolated: in a worker of its own, ended after the call: for a task that must touch several GPUs (P2P), so
    that no long-lived worker holds a context on a GPU other than its own."""
    if not isolated:
        return local_pool(ctx).call(task, dict(args or {}), [0], timeout or ctx.budget_s)[0]
    prestart_isolated(ctx)
    pool, ctx.isolated = ctx.isolated, None
    try:
        return pool.call(task, dict(args or {}), [0], timeout or ctx.budget_s)[0]
    finally:
        pool.remove()


def run_each(ctx, task, ranks, args=None, timeout=None, parallel=True):
    """Run a @gpu_task on each rank's own GPU: all at once, or one rank after the other (copies share the host's
    memory and PCIe root, so they are measured alone). A list of TaskOutcome in rank order."""
    pool = local_pool(ctx)
    if parallel:
        return pool.call(task, dict(args or {}), list(ranks), timeout or ctx.budget_s)
    return [pool.call(task, dict(args or {}), [rank], timeout or ctx.budget_s)[0] for rank in ranks]


def free_port(host="127.0.0.1"):
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def run_ranks(ctx, task, world, args=None, timeout=None, env=None, master=None, ranks=None, pool=None):
    """Run a task on `world` ranks (or only `ranks` of them here: a cross-node pair runs one rank per host).

    Local ranks reuse the run's pool; a rendezvous with another host (`master` given) gets its own workers,
    started for this call and ended with it, so the peer's environment is exactly the one asked for.
    """
    addr, port = master or ("127.0.0.1", free_port())
    args = dict(args or {}, world=world, master=[addr, port])
    ranks = list(range(world)) if ranks is None else list(ranks)
    if master is None and env is None:
        return (pool or local_pool(ctx)).call(task, args, ranks, timeout or ctx.budget_s)
    pool = _own_pool(ctx, env)
    try:
        return pool.call(task, args, ranks, timeout or ctx.budget_s)
    finally:
        pool.remove()


def _tail(path, offset):
    """What was written to `path` after `offset`, at most OUTPUT_CAP bytes of its end."""
    try:
        size = os.path.getsize(path)
        if size < offset:  # NCCL truncates its file when it opens it
            offset = 0
        with open(path, "rb") as fh:
            fh.seek(max(offset, size - proc.OUTPUT_CAP))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
