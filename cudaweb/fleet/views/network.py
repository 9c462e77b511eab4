"""The network between nodes: start a test of a selection or a label; a test's node x node matrix and each pair's
history."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import NetworkTestForm
from cudaweb.fleet.selectors import network_page
from cudaweb.network.collective import GLOO_LINE_SHARE
from cudaweb.network.models import NetworkTest
from cudaweb.network.services import network_test_request
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.validation.queue import BrokerUnavailable

@guarded
def network_list(request):
    tests = NetworkTest.objects.select_related("requested_by").prefetch_related("nodes")[:50]
    return render(request, "network/list.html", {"tests": tests, "form": NetworkTestForm()})


@guarded
@require_POST
def network_start(request):
    form = NetworkTestForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose two nodes or more, or a label.")
        return redirect("network:list")
    nodes = list(form.cleaned_data["nodes"]) or list(nodes_with_label(form.cleaned_data["label"]))
    usable = [n for n in nodes if n.can_validate]
    if len(usable) < 2:
        messages.error(request, "A network test needs two nodes or more that can be reached (host key accepted).")
        return redirect("network:list")
    try:
        test = network_test_request(nodes=usable, requested_by=request.user, plan=form.cleaned_data["plan"] or None)
    except BrokerUnavailable as exc:
        messages.error(request, "%s. Nothing was queued; try again once Redis is back." % exc)
        return redirect("network:list")
    return redirect(test)


@guarded
def network_detail(request, test_id):
    """A test's heatmap and pairs; ?fragment=1 is the live part, polled while the test runs."""
    test = get_object_or_404(NetworkTest, id=test_id)
    template = "network/_live.html" if request.GET.get("fragment") else "network/detail.html"
    return render(request, template, dict(network_page(test=test), collectives=list(test.collectives.all()),
                                          gloo_line_share_pct=100 * GLOO_LINE_SHARE))
