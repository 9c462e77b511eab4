"""The loop on the pages: an operator's word on a node (healthy, RMA, a rung), an admin closing the circuit breaker,
an rma bundle's download. What the pages show is read by cudaweb.health.selectors."""

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST, require_safe

from cudaweb.accounts import audit
from cudaweb.fleet.access import guarded
from cudaweb.health import machine, selectors, services
from cudaweb.health.models import RmaBundle
from cudaweb.nodes.models import Node


@guarded
@require_POST
def node_loop_decide(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    verdict, action = request.POST.get("verdict", ""), request.POST.get("action", "")
    if "decision" in request.POST:  # the page's buttons: "healthy", "rma", "remediate:<rung>"
        verdict, _, action = request.POST["decision"].partition(":")
    if verdict == "remediate" and action not in machine.RUNGS:
        messages.error(request, "Choose a rung: %s." % ", ".join(machine.RUNGS))
        return redirect(node)
    if verdict in ("healthy", "rma", "remediate") and not selectors.loop_control_offered(node, verdict, action):
        messages.error(request, "Not now: the node is %s and the loop would not act on that (the page offers what "
                                "it would)." % services.loop_of(node).state)
        return redirect(node)
    try:
        transition = services.operator_decide(node=node, user=request.user, verdict=verdict, action=action,
                                              reason=request.POST.get("reason", "")[:400])
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect(node)
    messages.info(request, "%s is %s: %s" % (node.name, transition.to_state, transition.why))
    return redirect(node)


@guarded
@require_POST
def breaker_close(request):
    looked_again = services.breaker_close(user=request.user)
    messages.info(request, "The circuit breaker is closed; %d node%s it held %s looked at again (the limits "
                           "still hold)." % (looked_again, "" if looked_again == 1 else "s",
                                             "was" if looked_again == 1 else "were"))
    return redirect("fleet:node_list")


@guarded
@require_safe
def rma_bundle(request, bundle_id):
    bundle = get_object_or_404(RmaBundle.objects.select_related("transition__node"), id=bundle_id)
    audit.record("loop.bundle_downloaded", obj=bundle.transition.node, bundle=bundle.name,
                 transition=bundle.transition_id, sha256=bundle.sha256)
    response = HttpResponse(bytes(bundle.data), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="%s"' % bundle.name
    return response
