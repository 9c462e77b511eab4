import pytest

from cudaweb.celery import app


@pytest.fixture
def eager_celery():
    """Tasks run in the test's process as they are queued; a retry runs at once (its countdown is not waited)."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
