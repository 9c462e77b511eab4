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
from tests.validation.test_junit import _valid as _valid_junit

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
    failing = [c for c in printed["report"]["checks"] if c["status"] in ("fail", "error")]
    cause = printed["root_cause"]  # the lowest failing check, as the run page and the API name it
    assert cause["check"] in {c["id"] for c in failing} and cause["status"] in ("fail", "error")
    assert cause["layer"] == min(c["layer"] for c in failing if c["layer"].startswith("L"))


def test_junit_file_is_written_whatever_the_exit_code(celery_worker, tmp_path):
    node_register_local(python_path=sys.executable)
    path = tmp_path / "junit.xml"
    done = validate_node("localhost", "--wait", "--json", "--junit", str(path))
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)
    tree = _valid_junit(path.read_bytes())
    assert sum(int(suite.get("tests")) for suite in tree) == len(printed["report"]["checks"])
    cause = printed["root_cause"]
    first = tree.find("testsuite/properties/property")
    assert first.get("name") == "root_cause" and first.get("value").startswith("%s (%s" % (
        cause["check"], cause["layer"]))
    failed = {case.get("name") for case in tree.iter("testcase") if case.find("failure") is not None}
    assert cause["check"] in failed | {case.get("name") for case in tree.iter("testcase")
                                       if case.find("error") is not None}


def test_junit_without_wait_or_into_a_missing_directory_is_a_usage_error(tmp_path):
    assert validate_node("localhost", "--junit", str(tmp_path / "j.xml")).returncode == 2
    done = validate_node("localhost", "--wait", "--junit", str(tmp_path / "missing" / "j.xml"))
    assert done.returncode == 2 and "cannot write" in done.stderr


def test_unreachable_node_exits_3_with_its_reason_as_the_root_cause(celery_worker):
    from django.utils import timezone

    from cudaweb.nodes.models import HostKey
    node = Node.objects.create(name="gone", address="127.0.0.1", port=1, username="root", python_path="python3")
    # its key accepted once (a node without one is refused before any run: exit 2, tests/fleet/test_command_wording.py)
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:x",
                           accepted_at=timezone.now())
    done = validate_node("gone", "--wait", "--json")
    assert done.returncode == 3, done.stderr
    printed = json.loads(done.stdout)
    assert printed["status"] in ("UNREACHABLE", "AUTH_FAILED", "HOST_KEY_MISMATCH")
    assert printed["root_cause"]["check"] is None and printed["root_cause"]["status"] == printed["status"]


def test_unknown_node_is_a_usage_error_exit_2():
    done = validate_node("no-such-node")
    assert done.returncode == 2 and "no node named 'no-such-node'" in done.stderr
    assert validate_node("--label", "nope").returncode == 2 and validate_node().returncode == 2
