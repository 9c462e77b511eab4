"""`manage.py validate_node NODE --wait --json` from a second process, against the running worker."""

import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_register_local
from tests.conftest import _database_url
from tests.services import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def validate_node(*args):
    env = dict(os.environ, DATABASE_URL=_database_url(connection.settings_dict), DJANGO_SETTINGS_MODULE="tests.settings")
    return subprocess.run([sys.executable, "manage.py", "validate_node", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)


def test_local_node_fail_verdict_exits_1_and_prints_the_report(celery_worker):
    node_register_local(python_path=sys.executable)
    done = validate_node("localhost", "--wait", "--json")
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)
    assert printed["status"] == "FAILED" and printed["report"]["verdict"] == "fail"
    assert {c["id"] for c in printed["report"]["checks"]} >= {"host.system", "driver.nvidia_smi", "torch.build"}


def test_unreachable_node_exits_2(celery_worker):
    Node.objects.create(name="gone", address="127.0.0.1", port=1, username="root", python_path="python3")
    done = validate_node("gone", "--wait", "--json")
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["status"] in ("UNREACHABLE", "AUTH_FAILED", "HOST_KEY_MISMATCH")


def test_unknown_node_is_a_clear_error():
    done = validate_node("no-such-node")
    assert done.returncode == 1 and "no node named 'no-such-node'" in done.stderr
