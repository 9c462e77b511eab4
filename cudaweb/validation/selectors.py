"""Reads of runs and checks the pages, the API and /metrics share."""

from datetime import timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from cudaweb.validation.models import CheckResult


def nodes_flaky(*, node_ids=None, now=None):
    """{node id: runs with a flaky check in the last CUDAWEB_FLAKY_DAYS days} for the nodes that had any, in one
    query. A run with three flaky checks is one time: the noise that made them was one moment."""
    since = (now or timezone.now()) - timedelta(days=settings.CUDAWEB_FLAKY_DAYS)
    checks = CheckResult.objects.filter(retry=CheckResult.Retry.FLAKY, run__created__gte=since)
    if node_ids is not None:
        checks = checks.filter(run__node_id__in=list(node_ids))
    rows = checks.values("run__node_id").annotate(runs=Count("run_id", distinct=True))
    return {row["run__node_id"]: row["runs"] for row in rows}


def is_flaky_node(count):
    """A node whose checks were flaky in CUDAWEB_FLAKY_LIMIT runs or more within the window is itself flagged."""
    return count >= settings.CUDAWEB_FLAKY_LIMIT


def node_flakiness(node, *, now=None):
    """The node page's and the API's view: {"runs": n, "days": d, "limit": l, "flagged": bool}."""
    count = nodes_flaky(node_ids=[node.id], now=now).get(node.id, 0)
    return {"runs": count, "days": settings.CUDAWEB_FLAKY_DAYS, "limit": settings.CUDAWEB_FLAKY_LIMIT,
            "flagged": is_flaky_node(count)}
