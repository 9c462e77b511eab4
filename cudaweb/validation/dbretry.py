"""Database writes that ride over a dropped connection (a PostgreSQL restart, a failover, a pooler restart).

A write that fails because its connection went away (OperationalError, InterfaceError) is tried again on a fresh
connection, waiting CUDAWEB_DB_RETRY_FIRST_S, then twice as long each time up to CUDAWEB_DB_RETRY_MAX_WAIT_S, until
CUDAWEB_DB_RETRY_S have passed; then the last error is raised. Inside a transaction nothing is retried (the
connection cannot be replaced there): the caller retries the whole transaction, so wrap the outermost call.
The function retried must be safe to run twice (a conditional update, an idempotent store)."""

import functools
import logging
import random
import time

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)
RETRYABLE = (OperationalError, InterfaceError)


def connection_drop():
    """Forget this thread's connection (dead or not) so that the next query opens a new one."""
    if connection.in_atomic_block:
        return
    try:
        connection.close()
    except DatabaseError:  # closing a connection the server already ended may fail: it is gone either way
        connection.connection = None


def retrying(fn, *args, what="", budget_s=None, **kwargs):
    """fn(*args, **kwargs), tried again on a fresh connection while it fails on a dropped one, for `budget_s`
    (CUDAWEB_DB_RETRY_S by default). Inside an atomic block it is called once."""
    if connection.in_atomic_block:
        return fn(*args, **kwargs)
    budget_s = settings.CUDAWEB_DB_RETRY_S if budget_s is None else budget_s
    deadline = time.monotonic() + budget_s
    wait_s = settings.CUDAWEB_DB_RETRY_FIRST_S
    tries = 0
    while True:
        tries += 1
        try:
            result = fn(*args, **kwargs)
        except RETRYABLE as exc:
            left_s = deadline - time.monotonic()
            connection_drop()
            if left_s <= 0:
                log.error("%s: the database did not answer for %.0f s (%d tries): %s", what or fn.__name__,
                          budget_s, tries, exc)
                raise
            log.warning("%s: database connection lost (%s: %s); trying again in %.1f s", what or fn.__name__,
                        type(exc).__name__, str(exc).strip()[:200], min(wait_s, left_s))
            time.sleep(min(wait_s * random.uniform(0.8, 1.2), left_s))
            wait_s = min(wait_s * 2, settings.CUDAWEB_DB_RETRY_MAX_WAIT_S)
            continue
        if tries > 1:
            log.warning("%s: done after %d tries", what or fn.__name__, tries)
        return result


def db_retry(fn):
    """Decorator form of `retrying`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return retrying(fn, *args, what=fn.__qualname__, **kwargs)

    return wrapper
