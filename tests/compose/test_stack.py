"""The production stack as docker-compose.yml runs it (PostgreSQL, Redis, migrate, web, worker, beat from the one
image `make image` builds), proven end to end by `make compose-test`; skipped in `make test`.

The order is the life of a deployment: up and healthy, a node validated over SSH through the worker, the API and a
Prometheus scrape, a scheduled run queued by beat, the worker restarted in the middle of a run, then `down -v`.
"""

import base64
import hashlib
import json
import os
import secrets
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cudaweb.embedded import free_port
from tests.compose import daemon, images

pytestmark = pytest.mark.skipif(os.environ.get("CUDAWEB_COMPOSE_TEST") != "1",
                                reason="needs a Docker engine: `make compose-test` runs it")

PROJECT = "cudaweb-compose-test"
NODE_ADDRESS = "198.19.7.50"  # tests/compose/docker-compose.test.yml
REPORT = images.REPO / "tests" / "fixtures" / "real" / "h200-gpus1-quick.json"
FIGURES = images.REPO / "var" / "compose-test-figures.json"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect is an answer to look at, not to follow


OPENER = urllib.request.build_opener(_NoRedirects)


class Stack:
    def __init__(self, engine, variables):
        self.engine = engine
        self.env = dict(engine.env, **variables)
        self.port = int(variables["CUDAWEB_PORT"])
        self.compose_files = ["-f", str(images.REPO / "docker-compose.yml"),
                              "-f", str(images.HERE / "docker-compose.test.yml")]
        self.token = None

    def compose(self, *args, input=None, check=True, timeout=600):
        done = subprocess.run([*daemon.compose_command(), "-p", PROJECT, *self.compose_files, *args], env=self.env,
                              input=input, capture_output=True, text=True, timeout=timeout, cwd=images.REPO)
        if check and done.returncode != 0:
            raise AssertionError("compose %s failed (%d):\n%s\n%s" % (" ".join(args), done.returncode,
                                                                       done.stdout[-3000:], done.stderr[-3000:]))
        return done

    def manage(self, *args, input=None):
        """`python manage.py ...` in the web container, as an operator would run it there."""
        return self.compose("exec", "-T", "web", "python", "manage.py", *args, input=input).stdout

    def shell(self, code):
        """Django shell code run in the web container; what it prints last is JSON."""
        out = self.manage("shell", input=code)
        return json.loads(out.strip().splitlines()[-1])

    def container(self, service):
        return self.compose("ps", "-q", service).stdout.strip()

    def health(self, service):
        cid = self.container(service)
        if not cid:
            return "absent"
        done = subprocess.run(["docker", "inspect", "-f", "{{.State.Health.Status}}", cid], env=self.env,
                              capture_output=True, text=True)
        return done.stdout.strip()

    def http(self, method, path, body=None, token=None):
        """A request as the TLS proxy in front of the web container would pass it on."""
        headers = {"Host": "localhost", "X-Forwarded-Proto": "https"}
        if token or self.token:
            headers["Authorization"] = "Bearer %s" % (token or self.token)
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method,
                                         headers=headers)
        try:
            with OPENER.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def run(self, run_id):
        status, text = self.http("GET", "/api/v1/runs/%s/" % run_id)
        assert status == 200, text
        return json.loads(text)

    def wait_run(self, run_id, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] not in ("PENDING", "RUNNING"):
                return run
            time.sleep(1)
        raise AssertionError("run %s still %s after %d s" % (run_id, run["status"], timeout))


def keypair(directory, name):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(directory / name)],
                   check=True)
    return (directory / name).read_text(), (directory / (name + ".pub")).read_text()


def ssh_fingerprint(public_line):
    blob = base64.b64decode(public_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@pytest.fixture(scope="module")
def stack():
    figures = {"network_state_before": daemon.network_state()}
    engine = daemon.Engine()
    figures["dockerd_started_here"] = engine.started_here
    keys = Path(tempfile.mkdtemp(prefix="cudaweb-compose-keys-"))
    try:
        figures["base_image_s"] = round(images.base_image(engine.env), 1)
        figures["make_image_s"] = round(images.app_image(engine.env), 1)
        host_private, host_public = keypair(keys, "ssh_host_ed25519_key")
        user_private, user_public = keypair(keys, "id_ed25519")
        figures["test_images_s"] = round(images.test_images(engine.env, {
            "ssh_host_ed25519_key": host_private, "ssh_host_ed25519_key.pub": host_public,
            "authorized_keys": user_public, "report.json": REPORT.read_text()}), 1)
        size = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", "cudaweb:latest"], env=engine.env,
                              capture_output=True, text=True, check=True).stdout
        figures["image_mb"] = round(int(size) / 1e6)
        from cryptography.fernet import Fernet
        stack = Stack(engine, {
            "SECRET_KEY": secrets.token_urlsafe(50), "CUDAWEB_CREDENTIAL_KEY": Fernet.generate_key().decode(),
            "POSTGRES_PASSWORD": secrets.token_urlsafe(24), "CUDAWEB_PORT": str(free_port()),
            "CUDAWEB_METRICS_TOKEN": secrets.token_urlsafe(32), "CUDAWEB_BASE_URL": "https://cudaweb.test"})
        stack.compose("down", "-v", "--remove-orphans")  # what a killed earlier run left
        stack.figures, stack.user_private_key, stack.host_fingerprint = figures, user_private, ssh_fingerprint(
            host_public)
        yield stack
    finally:
        try:
            if "stack" in locals():
                stack.compose("down", "-v", "--remove-orphans", check=False)
        finally:
            engine.close()
            daemon.restore_sysctls(figures["network_state_before"])
            for path in keys.iterdir():
                path.unlink()
            keys.rmdir()
            FIGURES.parent.mkdir(exist_ok=True)
            FIGURES.write_text(json.dumps({k: v for k, v in figures.items() if not k.startswith("network")},
                                          indent=1))
            print("\ncompose-test figures: %s" % FIGURES.read_text())


def test_migrate_completes_and_web_turns_healthy_through_its_own_check(stack):
    started = time.monotonic()
    stack.compose("up", "-d", "--no-build")
    deadline = started + 300
    while stack.health("web") != "healthy":
        assert time.monotonic() < deadline, stack.compose("logs", "--tail", "50", check=False).stdout[-4000:]
        time.sleep(1)
    stack.figures["up_to_healthy_web_s"] = round(time.monotonic() - started, 1)
    migrate = subprocess.run(["docker", "inspect", "-f", "{{.State.ExitCode}}", stack.container("migrate")],
                             env=stack.env, capture_output=True, text=True, check=True)
    assert migrate.stdout.strip() == "0"
    status, text = stack.http("GET", "/healthz")
    assert status == 200 and json.loads(text) == {"database": "ok", "broker": "ok", "worker": "ok"}
    status, _ = stack.http("GET", "/")
    assert status == 302  # to the login page: no page without a login


def test_a_worker_validates_a_node_over_ssh(stack):
    created = stack.shell(
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from cudaweb.accounts.roles import role_set\n"
        "user = get_user_model().objects.create_user('ops')\n"
        "role_set(user=user, role='admin')\n"
        "print(json.dumps({'user': user.pk}))\n")
    assert created["user"]
    token = stack.manage("api_token", "ops", "--name", "compose-test").split()[-1]
    stack.token = token
    stack.manage("add_node", "gpu-c1", "--transport", "ssh", "--address", NODE_ADDRESS, "--user", "root",
                 "--key-file", "/dev/stdin", "--python", "/usr/local/bin/fake-python", input=stack.user_private_key)
    fetched = stack.shell(
        "import json, time\n"
        "from cudaweb.nodes.models import HostKey, Node\n"
        "from cudaweb.remote.connect import host_key_request\n"
        "node = Node.objects.get(name='gpu-c1')\n"
        "host_key_request(node=node)\n"  # a worker connects and reads the key, never the web process
        "deadline = time.monotonic() + 60\n"
        "while not HostKey.objects.filter(node=node).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.5)\n"
        "key = HostKey.objects.filter(node=node).first()\n"
        "print(json.dumps({'fingerprint': key and key.fingerprint_sha256}))\n")
    assert fetched["fingerprint"] == stack.host_fingerprint  # the key the node was built with
    stack.shell(
        "import json\n"
        "from django.contrib.auth import get_user_model\n"
        "from cudaweb.nodes.models import Node\n"
        "from cudaweb.nodes.services import host_key_accept\n"
        "host_key_accept(node=Node.objects.get(name='gpu-c1'), user=get_user_model().objects.get(username='ops'),"
        " fingerprint=%r)\n"
        "print(json.dumps({}))\n" % stack.host_fingerprint)

    status, text = stack.http("POST", "/api/v1/nodes/gpu-c1/validate/", {"mode": "quick"})
    assert status == 202, text
    run = stack.wait_run(json.loads(text)["run"])
    assert run["status"] == "PASSED", run
    recorded = json.loads(REPORT.read_text())
    assert run["report"]["verdict"] == "pass" and len(run["report"]["checks"]) == len(recorded["checks"])
    rows = stack.shell("import json\nfrom cudaweb.validation.models import CheckResult\n"
                       "print(json.dumps(CheckResult.objects.filter(run_id=%r).count()))\n" % run["id"])
    assert rows == len(recorded["checks"])  # stored as check rows in PostgreSQL, not only as the report


def test_the_api_and_a_prometheus_scrape_answer(stack):
    status, text = stack.http("GET", "/api/v1/nodes/")
    assert status == 200, text
    assert [node["name"] for node in json.loads(text)["nodes"]] == ["gpu-c1"]
    status, _ = stack.http("GET", "/api/v1/nodes/", token="not-a-token")
    assert status == 401
    status, text = stack.http("GET", "/metrics", token=stack.env["CUDAWEB_METRICS_TOKEN"])
    assert status == 200, text
    assert 'cudaweb_node_last_verdict{' in text and 'node="gpu-c1"' in text
    assert 'cudaweb_runs{state="PASSED"} 1.0' in text
    assert "cudaweb_broker_up 1.0" in text


def test_beat_queues_a_scheduled_run(stack):
    stack.shell(
        "import datetime, json\n"
        "from django.utils import timezone\n"
        "from cudaweb.nodes.models import Node\n"
        "from cudaweb.validation.schedules import schedule_create\n"
        "schedule = schedule_create(every_hours=1, mode='quick', node=Node.objects.get(name='gpu-c1'))\n"
        "schedule.last_run_at = timezone.now() - datetime.timedelta(hours=2)\n"  # due now, not in an hour
        "schedule.save()\n"
        "print(json.dumps(schedule.pk))\n")
    deadline = time.monotonic() + 120
    scheduled = []
    while not scheduled and time.monotonic() < deadline:
        scheduled = stack.shell("import json\nfrom cudaweb.validation.models import ValidationRun\n"
                                "print(json.dumps([str(r.id) for r in ValidationRun.objects.filter("
                                "trigger=ValidationRun.Trigger.SCHEDULED)]))\n")
        time.sleep(2)
    assert scheduled, stack.compose("logs", "--tail", "30", "beat", check=False).stdout[-3000:]
    assert stack.wait_run(scheduled[0])["status"] == "PASSED"


def test_restarting_the_worker_mid_run_loses_no_run(stack):
    stack.compose("exec", "-T", "gpunode", "sh", "-c", "echo 30 > /tmp/agent-delay-s")
    status, text = stack.http("POST", "/api/v1/nodes/gpu-c1/validate/", {"mode": "quick"})
    assert status == 202, text
    run_id = json.loads(text)["run"]
    deadline = time.monotonic() + 60
    while stack.run(run_id)["status"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    started = time.monotonic()
    stack.compose("restart", "worker")
    stack.compose("exec", "-T", "gpunode", "sh", "-c", "echo 0 > /tmp/agent-delay-s")
    first = stack.wait_run(run_id, timeout=300)
    ended = stack.shell(
        "import json\nfrom cudaweb.validation.models import ValidationRun\n"
        "run = ValidationRun.objects.get(id=%r)\n"
        "print(json.dumps([[str(r.id), r.status] for r in run.retries.all()]))\n" % run_id)
    # the agent takes 30 s and the worker is killed 10 s after its stop signal: it cannot have finished the run
    assert first["status"] == "INTERRUPTED", first
    assert len(ended) == 1, ended
    retry = stack.wait_run(ended[0][0], timeout=300)
    assert retry["status"] == "PASSED", retry
    stack.figures["worker_restart_to_retry_passed_s"] = round(time.monotonic() - started, 1)


def test_down_v_leaves_nothing_behind_and_the_host_as_found(stack):
    stack.compose("down", "-v", "--remove-orphans")
    label = "label=com.docker.compose.project=%s" % PROJECT
    for kind in (["ps", "-a", "-q"], ["volume", "ls", "-q"], ["network", "ls", "-q"]):
        left = subprocess.run(["docker", *kind, "--filter", label], env=stack.env, capture_output=True, text=True,
                              check=True).stdout.split()
        assert left == [], (kind, left)
    stack.engine.close()
    assert daemon.our_mounts() == []
    assert daemon.network_state() == stack.figures["network_state_before"]
