"""The network between nodes: start a test of a selection or a label; a test's node x node matrix and each pair's
history."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import NetworkTestForm
from cudaweb.network.models import NetworkTest, PairResult
from cudaweb.network.services import network_test_request
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.validation.queue import BrokerUnavailable

HISTORY = 10


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
    test = get_object_or_404(NetworkTest, id=test_id)
    nodes = list(test.nodes.order_by("name"))
    pairs = list(test.pairs.select_related("node_a", "node_b"))
    cells = {}
    for pair in pairs:
        cells[(pair.node_a_id, pair.node_b_id)] = cells[(pair.node_b_id, pair.node_a_id)] = pair
    matrix = [(row, [cells.get((row.id, col.id)) if row.id != col.id else "self" for col in nodes]) for row in nodes]
    history = {}
    for pair in pairs:  # each pair's earlier results, newest first (pair_history_idx)
        history[pair.id] = list(PairResult.objects.filter(node_a=pair.node_a, node_b=pair.node_b)
                                .exclude(id=pair.id).select_related("test")[:HISTORY])
    collectives = list(test.collectives.all())
    return render(request, "network/detail.html", {"test": test, "nodes": nodes, "matrix": matrix, "pairs": pairs,
                                                   "history": history, "live": test.status in ("PENDING", "RUNNING"),
                                                   "collectives": collectives})
