"""Database writes that ride over a dropped connection (a PostgreSQL restart, a failover, a pooler restart).

A write that fails because its connection went away (OperationalError, InterfaceError) is tried again on a fresh
connection, waiting CUDAWEB_DB_RETRY_FIRST_S, then twice as long each time up to CUDAWEB_DB_RETRY_MAX_WAIT_S, until
CUDAWEB_DB_RETRY_S have passed; then the last error is raised. Inside a transaction nothing is retried (the
connection cannot be replaced there): the caller retries the whole transaction, so wrap the outermost call.
The function retried must be safe to run twice (a conditional update, an idempotent store)."""

import logging
import random
import time
from datetime import datetime, timezone

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from cudaweb.common import broker

log = logging.getLogger(__name__)
RETRYABLE = (OperationalError, InterfaceError)
# When some process last found the database away: a heartbeat cannot be written then, so the reaper judges silence
# only from when the database answered again (reaper.runs_reap). Kept in this process and in Redis (every worker and
# beat see it); written at most every AWAY_NOTE_EVERY_S.
AWAY_KEY = "cudaweb:database-away-seen"
AWAY_NOTE_EVERY_S = 2.0
AWAY_KEY_TTL_S = 86400
_away = {"seen": 0.0, "shared": 0.0}


def away_note():
    """Say that the database did not answer just now (this process, and every worker through Redis)."""
    now = time.time()
    _away["seen"] = now
    if now - _away["shared"] < AWAY_NOTE_EVERY_S:
        return
    _away["shared"] = now
    try:
        client = broker.broker_client(timeout_s=1.0)
        try:
            previous = float(client.get(AWAY_KEY) or 0)
            if now > previous:
                client.set(AWAY_KEY, repr(now), ex=AWAY_KEY_TTL_S)
        finally:
            client.close()
    except (broker.BROKER_ERRORS + (ValueError,)) as exc:  # Redis away too: this process's own memory still counts
        log.debug("database outage not shared through Redis: %s", exc)


def away_last_seen():
    """When this process or any worker last found the database away (an aware datetime), or None."""
    seen = _away["seen"]
    try:
        client = broker.broker_client(timeout_s=1.0)
        try:
            seen = max(seen, float(client.get(AWAY_KEY) or 0))
        finally:
            client.close()
    except (broker.BROKER_ERRORS + (ValueError,)) as exc:
        log.debug("database outages of other workers unknown: %s", exc)
    return datetime.fromtimestamp(seen, tz=timezone.utc) if seen else None


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
            away_note()
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

