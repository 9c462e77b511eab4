"""Putting a run's task on the Celery queue (by the task's registered name: this module imports no task), and
asking the broker whether it still holds one."""

import base64
import json
import logging

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from cudaweb.common import dispatch
from cudaweb.common.broker import BROKER_ERRORS, PUBLISH_RETRY, BrokerUnavailable, broker_client  # noqa: F401
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)
FANOUT_CHUNK = 250  # run ids per such task
EXECUTE_RUN = "cudaweb.validation.tasks.execute_run"
ENQUEUE_RUNS = "cudaweb.validation.tasks.enqueue_runs"


def enqueue(run, budget_s):
    """Queue one run's task (its id is the run's id, so the broker can be asked for it); count the attempt."""
    enqueue_many([(run, budget_s)])


def enqueue_many(runs_and_budgets):
    """Queue runs' tasks over one broker connection (a task's id is its run's id, so the broker can be asked for
    it); count each attempt in one update."""
    from cudaweb.celery import app

    if not runs_and_budgets:
        return
    execute_run = dispatch.task(EXECUTE_RUN)
    try:
        with app.producer_or_acquire() as producer:
            for run, budget_s in runs_and_budgets:
                execute_run.apply_async(args=[str(run.id)], task_id=str(run.id), soft_time_limit=budget_s + 60,
                                        time_limit=budget_s + 120, retry=True, retry_policy=PUBLISH_RETRY,
                                        producer=producer)
    except BROKER_ERRORS as exc:
        raise BrokerUnavailable("the task queue (Redis) does not answer: %s" % exc) from exc
    ValidationRun.objects.filter(id__in=[run.id for run, _ in runs_and_budgets]).update(
        enqueued=timezone.now(), enqueue_count=F("enqueue_count") + 1)


def fanout_wanted(count):
    """From CUDAWEB_FANOUT_MIN runs, a request publishes a few tasks that publish the runs' tasks."""
    return count >= settings.CUDAWEB_FANOUT_MIN


def enqueue_fanout(runs):
    """Queue many runs in a few messages: each `enqueue_runs` task, taken by a worker, publishes its runs' tasks
    (queue.enqueue_many). A rack-wide request then answers in the time of a few publishes, not one per node. The
    runs' ids are in those messages, so broker_holds (and the reaper) count them as held until they are queued."""
    from cudaweb.celery import app

    ids = [str(run.id) for run in runs]
    enqueue_runs = dispatch.task(ENQUEUE_RUNS)
    try:
        with app.producer_or_acquire() as producer:
            for start in range(0, len(ids), FANOUT_CHUNK):
                enqueue_runs.apply_async(args=[ids[start:start + FANOUT_CHUNK]], retry=True,
                                         retry_policy=PUBLISH_RETRY, producer=producer)
    except BROKER_ERRORS as exc:
        raise BrokerUnavailable("the task queue (Redis) does not answer: %s" % exc) from exc


HELD_BY_DEAD_WORKER = "held by a dead worker"
WORKER_ANSWER_S = 1.5  # how long the reaper waits for the live workers to say which tasks they hold


def broker_holds(run_ids, *, dead_holders=None):
    """The ids among `run_ids` whose task the broker still holds for a worker that will run it: waiting in a queue,
    or delivered to a worker that is alive and says it holds it. A message delivered to a worker that died (killed
    with the database away, its claim waiting) stays in Redis's `unacked` set until the visibility timeout (days,
    for burn-ins): it is held by nobody, and its id goes to `dead_holders` (a set) if given. None when the broker
    cannot be asked (then nothing may be concluded)."""
    from cudaweb.celery import app

    wanted = {str(run_id) for run_id in run_ids}
    try:
        with app.connection_for_read() as connection:
            client = connection.default_channel.client
            waiting = client.lrange(app.conf.task_default_queue, 0, -1)
            delivered = list(client.hvals("unacked"))
    except Exception as exc:  # not Redis, or Redis down: unknown
        log.warning("cannot look into the broker: %s", exc)
        return None
    text = "\n".join(_readable(m) for m in waiting)
    held = {run_id for run_id in wanted if run_id in text}
    by_task = {}  # task id of a delivered message -> the wanted run ids it carries
    for message in delivered:
        readable = _readable(message)
        carried = {run_id for run_id in wanted - held if run_id in readable}
        if carried:
            by_task.setdefault(_task_id(message) or "", set()).update(carried)
    if not by_task:
        return held
    alive = _tasks_live_workers_hold(set(by_task) - {""})
    for task_id, carried in by_task.items():
        if alive is None or task_id in alive:  # no worker answered: one may be busy, or none runs; wait
            held |= carried
        elif dead_holders is not None:
            dead_holders.update(carried - held)
    return held


def _task_id(message):
    """The task id in the headers of a message as Redis's `unacked` set holds it ([message, exchange, key])."""
    try:
        document = json.loads(message)
        document = document[0] if isinstance(document, list) else document
        return document["headers"]["id"]
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _tasks_live_workers_hold(task_ids):
    """Which of `task_ids` a live worker holds (reserved, prefetched, scheduled or running: Celery's query_task, a
    broadcast the worker's main process answers however busy its pool is); None when no worker answers at all."""
    from cudaweb.celery import app

    try:
        replies = app.control.inspect(timeout=WORKER_ANSWER_S).query_task(*sorted(task_ids))
    except Exception as exc:
        log.warning("cannot ask the workers which tasks they hold: %s", exc)
        return None
    if not replies:
        return None
    return {task_id for answer in replies.values() for task_id in (answer or {})}


def _readable(message):
    """A message as text with its body decoded: a task's id is in its headers, but the run ids a fan-out task
    carries are in its body, which kombu stores base64-encoded (and Celery's argsrepr is cut at 1,024 bytes)."""
    raw = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
    try:
        document = json.loads(raw)
        if isinstance(document, list):  # "unacked" holds [message, exchange, routing key]
            document = document[0]
        if document.get("properties", {}).get("body_encoding") == "base64":
            return raw + "\n" + base64.b64decode(document["body"]).decode("utf-8", "replace")
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        pass
    return raw


# Every worker writes this key every WORKER_HEARTBEAT_EVERY_S (validation.tasks), living WORKER_HEARTBEAT_TTL_S:
# /healthz asks Redis for one key instead of broadcasting a ping to the workers and waiting for their answers.
WORKER_HEARTBEAT_KEY = "cudaweb:worker-heartbeat"
WORKER_HEARTBEAT_EVERY_S = 15
WORKER_HEARTBEAT_TTL_S = 60


def queue_depth(client):
    """Tasks waiting in the default Celery queue (a Redis list), not counting those a worker already holds."""
    from cudaweb.celery import app

    return client.llen(app.conf.task_default_queue)


def worker_heartbeat_write(client, worker_name):
    client.set(WORKER_HEARTBEAT_KEY, worker_name, ex=WORKER_HEARTBEAT_TTL_S)


def worker_heartbeat_seen(client):
    """Whether some worker wrote its heartbeat within WORKER_HEARTBEAT_TTL_S."""
    return client.exists(WORKER_HEARTBEAT_KEY) == 1
