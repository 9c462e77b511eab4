"""Commands that say only what matters: no axes banner, no staticfiles warning; `make run` on a taken port exits
non-zero with the reason instead of reporting another server as itself; a favicon; the audit detail as JSON."""

import json
import os
import socket
import subprocess
import sys

import pytest
from django.urls import reverse

from cudaweb.accounts import audit
from tests.services import REPO, free_port

pytestmark = pytest.mark.e2e


def manage(*args, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    full.update(CUDAWEB_VAR_DIR=env.pop("var"), PYTHONUNBUFFERED="1", PYTHONWARNINGS="default", **env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def var(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    subprocess.run([sys.executable, "-m", "cudaweb.local_state"], cwd=REPO, env=dict(env, CUDAWEB_VAR_DIR=str(
        tmp_path / "var")), check=True, capture_output=True)
    return str(tmp_path / "var")


def test_a_management_command_prints_no_banner_and_no_staticfiles_warning(var):
    done = manage("check", var=var)
    assert done.returncode == 0, done.stderr
    assert "AXES" not in done.stdout + done.stderr and "No directory at" not in done.stdout + done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced)."


def test_make_run_on_a_taken_port_exits_2_with_the_reason(var):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        done = manage("runlocal", var=var, CUDAWEB_PORT=str(port), REDIS_URL="redis://127.0.0.1:%d/0" % free_port())
    finally:
        taken.close()
    assert done.returncode == 2 and "port %d on 127.0.0.1 is taken" % port in done.stderr, done.stderr
    assert "cudaweb is up" not in done.stdout and "CUDAWEB_PORT" in done.stderr
    bad = manage("runlocal", var=var, CUDAWEB_PORT="eighty")
    assert bad.returncode == 2 and "CUDAWEB_PORT='eighty' is not a port number" in bad.stderr


@pytest.mark.django_db
def test_every_page_links_a_favicon_that_is_served(operator_client):
    page = operator_client.get(reverse("fleet:node_list")).content.decode()
    assert '<link rel="icon" href="/static/cudaweb/favicon.svg"' in page
    icon = operator_client.get("/static/cudaweb/favicon.svg")
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.django_db
def test_the_audit_page_shows_the_detail_as_json(operator_client):
    audit.record("node.changed", actor=None, fields=["labels"], note="it's <b>new</b>")
    page = operator_client.get(reverse("audit:list")).content.decode()
    shown = json.dumps({"fields": ["labels"], "note": "it's <b>new</b>"}, sort_keys=True)
    assert shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace(
        "'", "&#x27;") in page
    assert "{'fields'" not in page
