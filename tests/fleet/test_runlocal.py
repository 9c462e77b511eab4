"""make run (runlocal): its port probe, a quiet worker at idle, and the admin password that stays in sight."""

import io
import socket
import stat

import pytest

from cudaweb.cli import InputError
from cudaweb.fleet.management.commands import runlocal


def _time_wait_port():
    """A port whose server closed a connection first (so it sits in TIME-WAIT) and no longer listens."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the side that closes first keeps the TIME-WAIT: here 127.0.0.1:port
    client.recv(1)  # wait for the FIN before answering it
    client.close()
    listener.close()
    return port


def test_the_port_probe_accepts_a_port_held_only_by_a_time_wait_connection():
    port = _time_wait_port()
    plain = socket.socket()
    with pytest.raises(OSError):  # the state the probe met after a Ctrl-C
        plain.bind(("127.0.0.1", port))
    plain.close()
    runlocal._port_free_or_exit(port, "--port %d" % port)


def test_the_port_probe_still_refuses_a_port_someone_listens_on():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        with pytest.raises(InputError, match="port %d on 127.0.0.1 is taken" % port):
            runlocal._port_free_or_exit(port, "--port %d" % port)
    finally:
        listener.close()


def test_the_worker_logs_warnings_only_at_idle_unless_asked(monkeypatch):
    """At INFO, beat's 2 s tick and each task received and done printed ~100 lines a minute at idle."""
    monkeypatch.delenv("CUDAWEB_WORKER_LOG_LEVEL", raising=False)
    command = runlocal.worker_command()
    assert command[command.index("-l") + 1] == "WARNING"
    monkeypatch.setenv("CUDAWEB_WORKER_LOG_LEVEL", "info")
    command = runlocal.worker_command()
    assert command[command.index("-l") + 1] == "INFO"
    monkeypatch.setenv("CUDAWEB_WORKER_LOG_LEVEL", "loud")
    with pytest.raises(InputError, match="CUDAWEB_WORKER_LOG_LEVEL"):
        runlocal.worker_command()


@pytest.mark.django_db
def test_the_generated_admin_password_is_printed_last_framed_and_kept_in_a_private_file(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDAWEB_ADMIN_PASSWORD", raising=False)
    monkeypatch.setattr(runlocal.local_state, "VAR_DIR", tmp_path)
    out = io.StringIO()
    notice = runlocal.Command(stdout=out)._ensure_admin()
    assert "password" not in out.getvalue()  # not among the startup lines: handle prints the notice after "is up"
    kept = tmp_path / runlocal.ADMIN_PASSWORD_FILE
    password = kept.read_text().strip()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    lines = notice.splitlines()
    assert lines[0] == lines[-1] and set(lines[0]) == {"+", "-"}
    assert "password: %s (shown once)" % password in notice and str(kept) in notice
    assert "python manage.py changepassword admin" in notice


@pytest.mark.django_db
def test_a_restart_says_how_to_set_a_new_admin_password(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDAWEB_ADMIN_PASSWORD", "a-long-test-password")
    monkeypatch.setattr(runlocal.local_state, "VAR_DIR", tmp_path)
    runlocal.Command(stdout=io.StringIO())._ensure_admin()
    out = io.StringIO()
    assert runlocal.Command(stdout=out)._ensure_admin() is None
    assert "admin account exists" in out.getvalue()
    assert "to set a new one: python manage.py changepassword admin" in out.getvalue()
