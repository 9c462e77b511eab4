"""What the commands say when they refuse (issue 29): validate_node with no arguments asks which nodes (it said
"not both"); with Redis down the message alone and exit 3 (it was prefixed "InputError:"); make run names the port as
the user gave it (CUDAWEB_PORT=70000 was reported as "--port 70000"); a .pub file given as the key is named a public
key (it was "the stored private key is not ...")."""

import io
import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_register_local
from cudaweb.remote.connect import private_key_check
from cudaweb.remote.transports.base import AuthFailed
from tests.conftest import _database_url
from tests.services import REPO, free_port

pytestmark = pytest.mark.django_db


def test_validate_node_with_no_arguments_asks_which_nodes():
    with pytest.raises(CommandError, match=r"which nodes\? name them .* or give --label LABEL") as refused:
        call_command("validate_node", stdout=io.StringIO())
    assert refused.value.returncode == 2 and "not both" not in str(refused.value)
    node_register_local()
    with pytest.raises(CommandError, match="not both"):
        call_command("validate_node", "localhost", "--label", "x", stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_redis_down_is_the_message_alone_and_exit_3():
    from django.db import connection
    node_register_local(python_path=sys.executable)
    done = subprocess.run([sys.executable, "manage.py", "validate_node", "localhost"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE":
                          "tests.settings", "DATABASE_URL": _database_url(connection.settings_dict),
                          "REDIS_URL": "redis://127.0.0.1:%d/0" % free_port()})
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("the task queue (Redis) does not answer") and "InputError" not in done.stderr


@pytest.mark.parametrize("env, args, said", [({"CUDAWEB_PORT": "70000"}, [], "CUDAWEB_PORT=70000 is not a TCP port"),
                                             ({}, ["--port", "70000"], "--port 70000 is not a TCP port")])
def test_make_run_names_the_port_as_it_was_given(monkeypatch, env, args, said):
    monkeypatch.delenv("CUDAWEB_PORT", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(CommandError) as refused:
        call_command("runlocal", *args, stdout=io.StringIO())
    assert str(refused.value).startswith(said) and refused.value.returncode == 2


def test_a_public_key_given_as_the_key_is_named_so(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    with pytest.raises(AuthFailed, match=r"this is a public key \(the .pub file\)"):
        private_key_check((tmp_path / "id.pub").read_text())
    with pytest.raises(AuthFailed, match="^the private key is not a readable"):
        private_key_check("not a key")
    with pytest.raises(CommandError, match="this is a public key"):
        call_command("add_node", "gpu-p", "--transport", "ssh", "--address", "198.18.0.5", "--user", "ops",
                     "--key-file", str(tmp_path / "id.pub"), stdout=io.StringIO())
    assert not Node.objects.exists()


def test_validate_node_refuses_an_ssh_node_without_an_accepted_key_like_the_page_and_the_api():
    """It created a HOST_KEY_MISMATCH run, exited 3, and the fleet then showed the node Unreachable."""
    from cudaweb.nodes.services import node_create
    from cudaweb.validation.models import ValidationRun

    node = node_create(name="gpu-nokey", address="198.18.0.5", port=22, username="ops", private_key="k")
    for args in (["gpu-nokey", "--wait"], ["gpu-nokey"]):
        with pytest.raises(CommandError, match="accept the host key of gpu-nokey before validating it") as refused:
            call_command("validate_node", *args, stdout=io.StringIO())
        assert refused.value.returncode == 2
    assert not ValidationRun.objects.exists()
    node.refresh_from_db()
    assert node.status == Node.Status.NEW


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("command, code", [(["validate_node", "localhost"], 3),
                                           (["test_network", "a", "b"], 2)])
def test_with_make_run_stopped_commands_say_no_dashboard_runs(tmp_path, command, code):
    """No REDIS_URL and no var/runtime.env: the default 127.0.0.1:6379 may be another Redis, which would take the
    runs and never run them. (Our own Redis listens there in this test, so a queued run would be seen.)"""
    from django.db import connection

    from cudaweb.validation.models import ValidationRun
    node_register_local(python_path=sys.executable)
    for name in ("a", "b"):
        node_register_local(name=name, python_path=sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DJANGO_SETTINGS_MODULE="cudaweb.settings", DATABASE_URL=_database_url(connection.settings_dict),
               CUDAWEB_VAR_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "manage.py", *command], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("no dashboard is running here: `make run` is stopped") and \
        "set REDIS_URL" in done.stderr
    assert not ValidationRun.objects.exists()


def test_make_run_serves_static_files_through_the_middleware():
    from cudaweb.fleet.management.commands.runlocal import web_command
    assert "--insecure" not in web_command(8000)


def test_ctrl_c_of_make_run_is_one_line_naming_what_was_interrupted(capsysbinary):
    """It printed a 40-line WorkerLostError traceback; now one line, and the worker's log is dropped once stopping."""
    import io as _io
    import threading

    from cudaweb.fleet.management.commands import runlocal
    from cudaweb.validation.models import ValidationRun

    node = node_register_local()
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="quick")
    line = runlocal.Command()._interrupted_line()
    assert "\n" not in line and line.startswith("stopping; interrupted: localhost (run %s, RUNNING)" % str(run.id)[:8])
    assert "tried once more" in line
    stopping = threading.Event()
    runlocal._forward(_io.BytesIO(b"worker ready\n"), stopping)
    stopping.set()
    runlocal._forward(_io.BytesIO(b"Traceback (most recent call last):\nWorkerLostError\n"), stopping)
    assert capsysbinary.readouterr().err == b"worker ready\n"
