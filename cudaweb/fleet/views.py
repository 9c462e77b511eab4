from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from cudaweb.drift import selectors as drift_selectors
from cudaweb.drift.services import baseline_pin
from cudaweb.fleet import selectors, services
from cudaweb.fleet.forms import BulkValidateForm, DecisionForm, FleetFilterForm, NodeForm, ValidateForm
from cudaweb.fleet.models import AcceptanceRecord, HostKey, Node
from cudaweb.playbooks.selectors import run_playbooks
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_request
from cudaweb.validation.transports.base import TransportError

RUNS_PER_PAGE = 25


def _back(request, node):
    """Where a host-key step returns: the onboarding page when it came from there, else the node page."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(node)


@login_required
def node_list(request):
    form = FleetFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    context = selectors.fleet_page(**{k: v for k, v in filters.items() if v}, page=request.GET.get("page", 1))
    query = request.GET.copy()
    query.pop("page", None)
    context.update(filter_form=form, bulk_form=BulkValidateForm(), query=query.urlencode())
    return render(request, "fleet/node_list.html", context)


@login_required
@require_POST
def nodes_validate(request):
    """Validate the selected nodes (or every node with a label) together; show each one's progress."""
    form = BulkValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose nodes or a label, and a mode.")
        return redirect("fleet:node_list")
    nodes = list(form.cleaned_data["nodes"]) or list(selectors.nodes_with_label(form.cleaned_data["label"]))
    runs, skipped = [], []
    for node in nodes:
        if not node.can_validate:
            skipped.append(node.name)
            continue
        runs.append(run_request(node=node, mode=form.cleaned_data["mode"], requested_by=request.user,
                                trigger=ValidationRun.Trigger.BULK))
    if skipped:
        messages.warning(request, "Not validated (host key not accepted): %s" % ", ".join(skipped))
    if not runs:
        return redirect("fleet:node_list")
    return redirect("%s?ids=%s" % (reverse("validation:batch"), ",".join(str(r.id) for r in runs)))


@login_required
def node_add(request):
    """Step 1 of onboarding: address, user, key (or an existing credential)."""
    form = NodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        node = services.node_create(
            name=data["name"], address=data["address"], port=data["port"], username=data["username"],
            python_path=data["python_path"], labels=data["labels"], private_key=data["private_key"] or None,
            key_path=data["key_path"], credential=data.get("credential"), created_by=request.user)
        messages.info(request, "Node %s added. Check its host key fingerprint." % node.name)
        return redirect("fleet:node_onboard", node_id=node.id)
    return render(request, "fleet/node_add.html", {"form": form})


@login_required
def node_onboard(request, node_id):
    """Steps 2-4 of onboarding: the host key, a full validation with live progress, the decision."""
    node = get_object_or_404(Node, id=node_id)
    host_key = HostKey.objects.filter(node=node).first()
    run = node.runs.filter(trigger=ValidationRun.Trigger.WIZARD).first()
    record = node.acceptance_records.select_related("decided_by").first()
    if node.is_local or (host_key and host_key.accepted):
        step = "validate" if run is None else ("running" if run.is_live else "decide")
    else:
        step = "host_key"
    if record is not None and run is not None and record.run_id == run.id:
        step = "done"
    checks = list(run.checks.all()) if run else []
    template = "fleet/_onboard_step.html" if request.GET.get("fragment") else "fleet/node_onboard.html"
    return render(request, template, {
        "node": node, "host_key": host_key, "run": run, "record": record, "step": step,
        "decision_form": DecisionForm(), "checks": checks,
        "playbooks": run_playbooks(run=run, checks=checks, user=request.user) if run else {}})


@login_required
@require_POST
def onboard_validate(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    if not node.can_validate:
        messages.error(request, "Accept the node's host key first.")
    else:
        run_request(node=node, mode=ValidationRun.Mode.FULL, requested_by=request.user,
                    trigger=ValidationRun.Trigger.WIZARD)
    return redirect("fleet:node_onboard", node_id=node.id)


@login_required
@require_POST
def onboard_decide(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    run = get_object_or_404(ValidationRun, id=request.POST.get("run"), node=node)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose accept or quarantine.")
        return redirect("fleet:node_onboard", node_id=node.id)
    try:
        record = services.acceptance_decide(node=node, run=run, decision=form.cleaned_data["decision"],
                                            user=request.user, note=form.cleaned_data["note"])
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("fleet:node_onboard", node_id=node.id)
    return redirect(record)


@login_required
def acceptance_detail(request, record_id):
    record = get_object_or_404(AcceptanceRecord.objects.select_related("node", "run", "decided_by"), id=record_id)
    checks = (record.evidence.get("report") or {}).get("checks", [])
    return render(request, "fleet/acceptance_detail.html", {"record": record, "checks": checks})


@login_required
def acceptance_json(request, record_id):
    record = get_object_or_404(AcceptanceRecord.objects.select_related("decided_by"), id=record_id)
    response = JsonResponse(services.acceptance_export(record), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="acceptance-%s-%s.json"' % (
        record.evidence["node"]["name"], record.id)
    return response


@login_required
def node_detail(request, node_id):
    node = get_object_or_404(Node.objects.select_related("baseline", "last_run"), id=node_id)
    host_key = HostKey.objects.filter(node=node).select_related("accepted_by").first()
    runs = Paginator(node.runs.select_related("requested_by").defer("report", "raw_output", "progress"),
                     RUNS_PER_PAGE).get_page(request.GET.get("page", 1))
    return render(request, "fleet/node_detail.html", {
        "node": node, "host_key": host_key, "runs": runs, "validate_form": ValidateForm(),
        "charts": drift_selectors.node_charts(node),
        "records": node.acceptance_records.select_related("decided_by")[:10],
    })


@login_required
@require_POST
def host_key_fetch(request, node_id):
    node = get_object_or_404(Node, id=node_id, transport=Node.Transport.SSH)
    try:
        services.host_key_fetch(node=node)
    except TransportError as exc:
        messages.error(request, "Could not read the host key: %s" % exc)
    return _back(request, node)


@login_required
@require_POST
def host_key_accept(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    host_key = get_object_or_404(HostKey, node=node)
    # Accept exactly the key the operator was shown, not whatever is stored by now.
    if request.POST.get("fingerprint") != host_key.fingerprint_sha256:
        messages.error(request, "The host key changed since the page was shown; review it again.")
        return _back(request, node)
    services.host_key_accept(node=node, user=request.user)
    messages.info(request, "Host key %s accepted." % host_key.fingerprint_sha256)
    return _back(request, node)


@login_required
@require_POST
def node_validate(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    form = ValidateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown mode.")
        return redirect(node)
    if not node.can_validate:
        messages.error(request, "Accept the node's host key before validating it.")
        return redirect(node)
    run = run_request(node=node, mode=form.cleaned_data["mode"], requested_by=request.user)
    return redirect(run)


@login_required
@require_POST
def node_baseline(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    run = get_object_or_404(ValidationRun, id=request.POST.get("run"), node=node)
    try:
        baseline_pin(node=node, run=run)
        messages.info(request, "Run of %s pinned as the baseline." % run.created.strftime("%Y-%m-%d %H:%M"))
    except ValueError as exc:
        messages.error(request, str(exc))
    return redirect(node)
