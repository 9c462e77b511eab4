"""Queueing a Celery task by its registered name. A service that queues a task names it here instead of importing
its app's tasks module, so the arrows inside an app run one way: tasks -> services -> queue and models
(docs/adr/0027-one-way-inside-an-app.md)."""

from cudaweb.common.broker import BROKER_ERRORS, PUBLISH_RETRY, BrokerUnavailable


def task(name):
    """The task registered as `name`. A process that has not imported the task's module yet (a web process, a
    command) has Celery's autodiscovery import every app's tasks module once; a name still unknown then raises
    KeyError, a bug of ours."""
    from cudaweb.celery import app

    try:
        return app.tasks[name]
    except KeyError:
        app.autodiscover_tasks(force=True)
        return app.tasks[name]


def publish(name, *, args, **options):
    """Put the task `name` on the queue with `args` (Celery's apply_async options as given: an eager app runs it
    inline). The publish tries PUBLISH_RETRY; a broker that stays away raises BrokerUnavailable."""
    options.setdefault("retry", True)
    options.setdefault("retry_policy", PUBLISH_RETRY)
    try:
        return task(name).apply_async(args=args, **options)
    except BROKER_ERRORS as exc:
        raise BrokerUnavailable("the task queue (Redis) does not answer: %s" % exc) from exc
