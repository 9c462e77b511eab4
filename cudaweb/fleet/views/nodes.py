"""A node's page and its actions: add, host key, its report credential, validate, pin a baseline."""

import posixpath
import re
import uuid

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from cudaweb.drift import selectors as drift_selectors
from cudaweb.drift.services import baseline_pin
from cudaweb.fleet import selectors as fleet_selectors
from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import NodeEditForm, NodeForm, ValidateForm
from cudaweb.health import selectors as health_selectors
from cudaweb.nodes import report_credentials
from cudaweb.nodes import services as node_services
from cudaweb.nodes.models import HostKey, Node
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.remote import connect
from cudaweb.validation.gpus import node_uuid_conflicts
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.selectors import node_flakiness
from cudaweb.validation.services import run_request

RUNS_PER_PAGE = 25
LOCAL_PATH = re.compile(r"^/(?![/\\])[\x21-\x7e]{0,2000}\Z")  # "/..." printable ASCII, not "//" or "/\\"


def _back(request, node):
    """Where a host-key step returns: the onboarding page when it came from there, else the node page. Only a
    path of this site is followed; anything else (a URL, a malformed one, control characters) is ignored."""
    target = request.POST.get("next", "")
    try:
        local = bool(LOCAL_PATH.match(target)) and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()})
    except ValueError:  # urllib refuses it (e.g. an unclosed "[")
        local = False
    return redirect(target) if local else redirect(node)


@guarded
def node_add(request):
    """Step 1 of onboarding: address, user, key (or an existing credential)."""
    form = NodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        node = connect.ssh_node_create(
            name=data["name"], address=data["address"], port=data["port"], username=data["username"],
            python_path=data["python_path"], labels=data["labels"], private_key=data["private_key"] or None,
            key_path=data["key_path"], credential=data.get("credential"), created_by=request.user)
        # no fingerprint to check yet: the step below asks a worker to read the key, and says to compare it once shown
        messages.info(request, "Node %s added. Next: read its host key." % node.name)
        return redirect("fleet:node_onboard", node_id=node.id)
    return render(request, "fleet/node_add.html", {"form": form})


@guarded
def node_edit(request, node_id):
    """An admin changes an SSH node's address, port, user, Python or labels; a new address drops the host key."""
    node = get_object_or_404(Node, id=node_id, transport=Node.Transport.SSH)
    initial = {"address": node.address, "port": node.port, "username": node.username,
               "python_path": node.python_path, "labels": ", ".join(node.labels or [])}
    form = NodeEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        node, changes = node_services.node_edit(node=node, changed_by=request.user, **form.cleaned_data)
        if "address" in changes or "port" in changes:
            messages.warning(request, "Address changed: the host key was dropped. Fetch the new one and compare its "
                                      "fingerprint before accepting it; no run reaches the node until then.")
        else:
            messages.info(request, "Saved." if changes else "Nothing changed.")
        return redirect(node)
    return render(request, "fleet/node_edit.html", {"node": node, "form": form})


@guarded
def node_detail(request, node_id):
    node = get_object_or_404(Node.objects.select_related("baseline", "last_run"), id=node_id)
    host_key = HostKey.objects.filter(node=node).select_related("accepted_by").first()
    runs = Paginator(node.runs.select_related("requested_by").defer("report", "raw_output", "progress"),
                     RUNS_PER_PAGE).get_page(request.GET.get("page", 1))
    return render(request, "fleet/node_detail.html", {
        "node": node, "host_key": host_key, "runs": runs, "validate_form": ValidateForm(),
        "charts": drift_selectors.node_charts(node),
        "records": node.acceptance_records.select_related("decided_by")[:10],
        "flaky": node_flakiness(node),
        "root_cause": run_root_cause(run=node.last_run),
        "gpus": fleet_selectors.node_gpus(node=node),
        "loop": health_selectors.node_timeline(node),
        "gpu_conflicts": node_uuid_conflicts(node=node),
        "credential": report_credentials.node_credential_active(node),
        "credential_path": settings.CUDAWEB_NODE_CREDENTIAL_PATH,
    })


@guarded
@require_POST
def node_credential(request, node_id):
    """An admin issues the node's report credential (shown on this answer only, never stored or flashed) or revokes
    it."""
    node = get_object_or_404(Node, id=node_id)
    if request.POST.get("action") == "revoke":
        done = report_credentials.node_credential_revoke(node=node, by=request.user.get_username())
        messages.success(request, "The credential of %s is revoked." % node.name if done else
                         "%s had no active credential." % node.name)
        return redirect(node)
    earlier = report_credentials.node_credential_active(node) is not None
    _, text = report_credentials.node_credential_issue(node=node, by=request.user.get_username())
    path = settings.CUDAWEB_NODE_CREDENTIAL_PATH
    response = render(request, "fleet/node_credential_issued.html", {
        "node": node, "text": text, "revoked_earlier": earlier, "credential_path": path,
        "credential_dir": posixpath.dirname(path)})
    response["Cache-Control"] = "no-store"  # a secret: no cache keeps this page
    return response


@guarded
@require_POST
def host_key_fetch(request, node_id):
    node = get_object_or_404(Node, id=node_id, transport=Node.Transport.SSH)
    try:
        connect.host_key_request(node=node, user=request.user)
    except connect.QueueDown as exc:
        messages.error(request, "%s. Nothing was asked; try again once Redis is back." % exc)
        return _back(request, node)
    # No flash message: the page says a worker is reading the key where the key will be, and that sentence gives
    # way to the key or to why it could not be read (a flash would stay above the error, saying it is still read).
    return _back(request, node)


@guarded
@require_POST
def host_key_accept(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    host_key = get_object_or_404(HostKey, node=node)
    # Accept exactly the key the operator was shown, not whatever is stored by now.
    try:
        host_key = node_services.host_key_accept(node=node, user=request.user,
                                                 fingerprint=request.POST.get("fingerprint", ""))
    except node_services.HostKeyChanged:
        messages.error(request, "The host key changed since the page was shown; review it again.")
        return _back(request, node)
    messages.info(request, "Host key %s accepted." % host_key.fingerprint_sha256)
    return _back(request, node)


@guarded
@require_POST
def node_validate(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    form = ValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown mode or burn-in length: %s" % "; ".join(
            "%s: %s" % (field, " ".join(errors)) for field, errors in form.errors.items()))
        return redirect(node)
    if not node.can_validate:
        messages.error(request, "Accept the node's host key before validating it.")
        return redirect(node)
    try:
        run = run_request(node=node, mode=form.cleaned_data["mode"], requested_by=request.user,
                          burnin_seconds=form.cleaned_data["burnin_seconds"])
    except BrokerUnavailable as exc:
        messages.error(request, "%s. Nothing was queued; try again once Redis is back." % exc)
        return redirect(node)
    return redirect(run)


@guarded
@require_POST
def node_baseline(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    try:
        run_id = uuid.UUID(request.POST.get("run", ""))
    except ValueError:
        messages.error(request, "Choose a run of this node to pin.")
        return redirect(node)
    run = get_object_or_404(ValidationRun, id=run_id, node=node)
    try:
        baseline_pin(node=node, run=run)
        messages.info(request, "Run of %s pinned as the baseline." % run.created.strftime("%Y-%m-%d %H:%M"))
    except ValueError as exc:
        messages.error(request, str(exc))
    return redirect(node)
