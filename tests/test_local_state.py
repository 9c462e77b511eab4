"""A second shell's commands judge as the running `make run` does: var/runtime.env carries its Redis and the
CUDAWEB_* settings it was started with (an address the dashboard accepts, the CLI accepts), never a secret, in a
file its owner alone reads (cudaweb/local_state.py)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

from cudaweb import local_state

REPO = Path(__file__).resolve().parent.parent


def test_runtime_env_carries_the_dashboards_settings_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setattr(local_state, "VAR_DIR", tmp_path)
    monkeypatch.setattr(local_state, "RUNTIME_ENV", tmp_path / "runtime.env")
    environ = {"CUDAWEB_ALLOWED_NETWORKS": "10.20.0.0/16", "CUDAWEB_WATCH_INTERVAL_S": "30",
               "CUDAWEB_METRICS_TOKEN": "t" * 40, "CUDAWEB_ADMIN_PASSWORD": "hunter2hunter2",
               "CUDAWEB_WEBHOOK_URL": "https://hooks.example/secret", "CUDAWEB_K8S_TOKEN_FILE": "/run/token",
               "HOME": "/root", "SECRET_KEY": "x"}
    local_state.write_runtime_env(local_state.runtime_values(environ, "redis://127.0.0.1:7000/0"))
    assert local_state.read_runtime_env() == {"CUDAWEB_ALLOWED_NETWORKS": "10.20.0.0/16",
                                              "CUDAWEB_WATCH_INTERVAL_S": "30", "REDIS_URL": "redis://127.0.0.1:7000/0"}
    assert stat.S_IMODE((tmp_path / "runtime.env").stat().st_mode) == 0o600


def test_a_command_in_a_second_shell_takes_the_running_dashboards_allowed_networks(tmp_path):
    (tmp_path / "runtime.env").write_text("CUDAWEB_ALLOWED_NETWORKS=10.20.0.0/16\nREDIS_URL=redis://127.0.0.1:7000/0\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDAWEB_ALLOWED_NETWORKS", "REDIS_URL")}
    env.update(CUDAWEB_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="cudaweb.settings", SECRET_KEY="s" * 50,
               CUDAWEB_CREDENTIAL_KEY=os.environ["CUDAWEB_CREDENTIAL_KEY"])
    shown = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                            "print(settings.CUDAWEB_ALLOWED_NETWORKS)"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.stdout.strip() == "10.20.0.0/16", shown.stderr[-2000:]
