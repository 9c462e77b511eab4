from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet import selectors, services
from cudaweb.fleet.forms import NodeForm, ValidateForm
from cudaweb.fleet.models import HostKey, Node
from cudaweb.validation.services import run_request
from cudaweb.validation.transports.base import TransportError


@login_required
def node_list(request):
    return render(request, "fleet/node_list.html", {"nodes": selectors.node_list_with_last_run()})


@login_required
def node_add(request):
    form = NodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        node = services.node_create(
            name=data["name"], address=data["address"], port=data["port"], username=data["username"],
            python_path=data["python_path"], labels=data["labels"], private_key=data["private_key"] or None,
            key_path=data["key_path"], created_by=request.user)
        messages.info(request, "Node %s added. Fetch its host key and check the fingerprint." % node.name)
        return redirect(node)
    return render(request, "fleet/node_add.html", {"form": form})


@login_required
def node_detail(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    host_key = HostKey.objects.filter(node=node).select_related("accepted_by").first()
    return render(request, "fleet/node_detail.html", {
        "node": node, "host_key": host_key, "runs": node.runs.all()[:50], "validate_form": ValidateForm(),
    })


@login_required
@require_POST
def host_key_fetch(request, node_id):
    node = get_object_or_404(Node, id=node_id, transport=Node.Transport.SSH)
    try:
        services.host_key_fetch(node=node)
    except TransportError as exc:
        messages.error(request, "Could not read the host key: %s" % exc)
    return redirect(node)


@login_required
@require_POST
def host_key_accept(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    host_key = get_object_or_404(HostKey, node=node)
    # Accept exactly the key the operator was shown, not whatever is stored by now.
    if request.POST.get("fingerprint") != host_key.fingerprint_sha256:
        messages.error(request, "The host key changed since the page was shown; review it again.")
        return redirect(node)
    services.host_key_accept(node=node, user=request.user)
    messages.info(request, "Host key %s accepted." % host_key.fingerprint_sha256)
    return redirect(node)


@login_required
@require_POST
def node_validate(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    form = ValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown mode.")
        return redirect(node)
    if not node.is_local and not HostKey.objects.filter(node=node, accepted_at__isnull=False).exists():
        messages.error(request, "Accept the node's host key before validating it.")
        return redirect(node)
    run = run_request(node=node, mode=form.cleaned_data["mode"], requested_by=request.user)
    return redirect(run)
