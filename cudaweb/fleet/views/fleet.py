"""The fleet page and bulk validation."""

import uuid

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cudaweb.fleet import selectors
from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import BulkValidateForm, FleetFilterForm
from cudaweb.health import selectors as health_selectors
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.services import runs_request


@guarded
def node_list(request):
    form = FleetFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    context = selectors.fleet_page(**{k: v for k, v in filters.items() if v}, page=request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("fragment", None)
    context.update(filter_form=form, bulk_form=BulkValidateForm(), query=query.urlencode(),
                   overview=selectors.fleet_overview(), loop=health_selectors.fleet_loop())
    # The page refreshes itself (live.js): the overview and the table's rows, each a fragment of this same URL.
    fragment = {"overview": "fleet/_fleet_overview.html", "rows": "fleet/_fleet_rows.html"}.get(
        request.GET.get("fragment", ""))
    return render(request, fragment or "fleet/node_list.html", context)


@guarded
@require_POST
def nodes_validate(request):
    """Validate the selected nodes (or every node with a label) together; show each one's progress."""
    form = BulkValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose nodes or a label, and a mode (burn-in: its length).")
        return redirect("fleet:node_list")
    chosen = form.cleaned_data["nodes"] or nodes_with_label(form.cleaned_data["label"])
    nodes = list(chosen.select_related("host_key"))
    batch = uuid.uuid4()
    skipped = [node.name for node in nodes if not node.can_validate]
    try:
        runs = runs_request(nodes=[node for node in nodes if node.can_validate], mode=form.cleaned_data["mode"],
                            requested_by=request.user, trigger=ValidationRun.Trigger.BULK, batch=batch,
                            burnin_seconds=form.cleaned_data["burnin_seconds"])
    except BrokerUnavailable as exc:
        messages.error(request, "%s. Nothing was queued." % exc)
        runs = []
    if skipped:
        messages.warning(request, "Not validated (host key not accepted): %s" % ", ".join(skipped))
    if not runs:
        return redirect("fleet:node_list")
    # The batch, not its run ids: a rack of 1,000 would not fit in a URL. A node that already had a live run
    # answers with that run, which is added to the batch so the page follows it too.
    ValidationRun.objects.filter(id__in=[r.id for r in runs], batch__isnull=True).update(batch=batch)
    return redirect("%s?batch=%s" % (reverse("runs:batch"), batch))
