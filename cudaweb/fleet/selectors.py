"""Reads for the fleet pages."""

from django.db.models import OuterRef, Subquery

from cudaweb.fleet.models import Node
from cudaweb.validation.models import ValidationRun


def node_list_with_last_run():
    latest = ValidationRun.objects.filter(node=OuterRef("pk")).order_by("-created")
    return Node.objects.annotate(
        last_run_id=Subquery(latest.values("id")[:1]),
        last_run_status=Subquery(latest.values("status")[:1]),
        last_run_created=Subquery(latest.values("created")[:1]),
    ).order_by("name")
