"""/healthz: the database, the broker and a live worker, each "ok" or what is wrong; 200 when all are ok, else 503.
Open to anyone (load balancers and compose probe it): it reveals only whether each part works."""

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from cudaweb.validation import queue


def _database():
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as exc:  # any driver's error: the probe says so rather than failing itself
        return "error: %s" % type(exc).__name__


def _broker_and_worker():
    client = queue.broker_client(timeout_s=1.0)
    try:
        client.ping()
        seen = queue.worker_heartbeat_seen(client)
    except queue.BROKER_ERRORS as exc:
        return "error: %s" % type(exc).__name__, "unknown: the broker does not answer"
    finally:
        client.close()
    return "ok", "ok" if seen else "error: no worker heartbeat in the last %d s" % queue.WORKER_HEARTBEAT_TTL_S


@csrf_exempt  # a POST is a wrong method (405), not a forged form (403)
@require_safe
def healthz(request):
    broker, worker = _broker_and_worker()
    checks = {"database": _database(), "broker": broker, "worker": worker}
    healthy = all(value == "ok" for value in checks.values())
    response = JsonResponse(checks, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response
