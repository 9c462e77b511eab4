import os
import time

import pytest
from django.conf import settings

from tests import services

os.makedirs(settings.BASE_DIR / "var", exist_ok=True)
# The agents the tests start keep no bytecode cache in the user's home (agents/cudaprobe/bytecode.py; a fake torch
# has no bytecode of its own, so they would): test_bytecode.py gives it directories of its own.
os.environ.setdefault("CUDAPROBE_BYTECODE_CACHE", "off")


@pytest.fixture(scope="session")
def redis_server():
    popen = services.start_redis(settings.REDIS_URL)
    yield settings.REDIS_URL
    services.stop(popen)


def _database_url(db):
    if db["ENGINE"].endswith("sqlite3"):
        return "sqlite:///%s" % db["NAME"]
    return "postgres://%s:%s@%s:%s/%s" % (db["USER"] or "", db["PASSWORD"] or "", db["HOST"] or "127.0.0.1",
                                          db["PORT"] or 5432, db["NAME"])


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    """A real `celery worker` process on the test database and the test Redis."""
    from django.db import connection

    from cudaweb.celery import app

    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    popen = services.start_worker(_database_url(connection.settings_dict), log_path)
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if popen.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("celery worker did not start:\n" + log_path.read_text()[-3000:])
    yield popen
    services.stop(popen)


@pytest.fixture(scope="session")
def sshd():
    server = services.Sshd()
    yield server
    server.close()


def user_with_role(django_user_model, username, role, password=None):
    """A user in the role's group (cudaweb.accounts.roles), or in none when `role` is None."""
    from cudaweb.accounts.roles import role_set

    user = django_user_model.objects.create_user(username, password=password)
    role_set(user=user, role=role)
    return user


@pytest.fixture
def admin_user(django_user_model):
    """The user most tests act as: an admin (the pages it drives add nodes and accept host keys)."""
    return user_with_role(django_user_model, "operator", "admin", password="correct-horse-battery")


@pytest.fixture
def operator_client(client, admin_user):
    client.force_login(admin_user)
    return client


def wait_for_terminal(run, timeout=180):
    """Poll the database (the worker is another process) until the run leaves PENDING/RUNNING."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if not run.is_live:
            return run
        time.sleep(0.2)
    raise AssertionError("run %s still %s after %ss" % (run.id, run.status, timeout))
