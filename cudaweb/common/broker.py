"""The broker (Redis) as every layer meets it: the errors that say it is away, how hard a publish tries, and a plain
client with short timeouts for probes."""

import kombu.exceptions
import redis
import redis.exceptions
from django.conf import settings

BROKER_ERRORS = (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError)
# Give up on a broker that does not answer within a few seconds: a page or a command waits for this.
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


class BrokerUnavailable(Exception):
    """The task queue does not answer: nothing was queued."""


def broker_client(*, timeout_s=1.0):
    """A plain Redis client on the broker with short timeouts, for probes and metrics that must never hang on a
    Redis that is down (the caller closes it)."""
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=timeout_s,
                                socket_connect_timeout=timeout_s)
