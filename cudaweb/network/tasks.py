"""Celery task: a thin wrapper that takes the test's id."""

import logging

from celery import shared_task

from cudaweb.network import services

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def run_network_test(test_id):
    try:
        return services.network_test_execute(test_id=test_id)
    except Exception as exc:  # our bug must not leave the test RUNNING
        log.exception("network test %s failed", test_id)
        services.network_test_fail(test_id=test_id, reason="the dashboard failed while running it: %s: %s" % (
            type(exc).__name__, exc))
        raise
