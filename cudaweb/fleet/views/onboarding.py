"""Onboarding a new node: host key, a full validation with live progress, then accept or quarantine."""

import uuid

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.accounts import audit
from cudaweb.fleet import evidence, services
from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import DecisionForm, OnboardValidateForm
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.fleet.onboarding import decidable_run, onboarding_state
from cudaweb.fleet.views.runs import run_context
from cudaweb.nodes.models import HostKey, Node
from cudaweb.validation import burnin
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.services import run_request


def _uuid(value):
    """A form's run id, or None when it is not a UUID (a tampered form is a message, not a 500)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


@guarded
def node_onboard(request, node_id):
    """Steps 2-4 of onboarding: the host key, a full validation with live progress, the decision (on the newest
    finished run with a verdict, whatever started it), and "validate again" after any ending."""
    node = get_object_or_404(Node, id=node_id)
    state = onboarding_state(node=node)
    template = "fleet/_onboard_step.html" if request.GET.get("fragment") else "fleet/node_onboard.html"
    return render(request, template, dict(run_context(request, state["run"]), node=node, decision_form=DecisionForm(),
                                          validate_form=OnboardValidateForm(), **state))


@guarded
@require_POST
def onboard_validate(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    form = OnboardValidateForm(request.POST)
    if not node.can_validate:
        messages.error(request, "Accept the node's host key first.")
    elif not form.is_valid():
        messages.error(request, "Choose full or full + burn-in, and the burn-in's length (%d to %d s)." % (
            burnin.MIN_SECONDS, burnin.MAX_SECONDS))
    else:
        try:
            run_request(node=node, mode=form.cleaned_data["mode"], requested_by=request.user,
                        trigger=ValidationRun.Trigger.WIZARD, burnin_seconds=form.cleaned_data["burnin_seconds"])
        except BrokerUnavailable as exc:
            messages.error(request, "%s. Nothing was queued; try again once Redis is back." % exc)
    return redirect("fleet:node_onboard", node_id=node.id)


@guarded
@require_POST
def onboard_decide(request, node_id):
    node = get_object_or_404(Node, id=node_id)
    run = ValidationRun.objects.filter(id=_uuid(request.POST.get("run")), node=node).first()
    if run is None:
        messages.error(request, "That run is not one of this node's: decide on the run the page shows.")
        return redirect("fleet:node_onboard", node_id=node.id)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose accept or quarantine.")
        return redirect("fleet:node_onboard", node_id=node.id)
    newest = decidable_run(node=node)
    if newest is not None and newest.id != run.id and not AcceptanceRecord.objects.filter(
            node=node, run=run, token=form.cleaned_data["token"]).exists():
        messages.error(request, "A newer run of this node has finished: the decision rests on it (run %s)." % (
            newest.id,))
        return redirect("fleet:node_onboard", node_id=node.id)
    try:
        record = services.acceptance_decide(node=node, run=run, decision=form.cleaned_data["decision"],
                                            user=request.user, note=form.cleaned_data["note"],
                                            token=form.cleaned_data["token"])
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("fleet:node_onboard", node_id=node.id)
    return redirect(record)


@guarded
def acceptance_detail(request, record_id):
    record = get_object_or_404(AcceptanceRecord.objects.select_related("node", "run", "decided_by"), id=record_id)
    checks = (record.evidence.get("report") or {}).get("checks", [])
    return render(request, "fleet/acceptance_detail.html", {"record": record, "checks": checks,
                                                            "rests_on": evidence.record_rests_on(record),
                                                            "bundle_holds": evidence.bundle_holds(record)})


@guarded
def acceptance_bundle(request, record_id):
    """The RMA evidence bundle (zip): the record, the node's recent history, the burn-in series as CSV if any."""
    record = get_object_or_404(AcceptanceRecord.objects.select_related("node", "decided_by"), id=record_id)
    name, payload = evidence.rma_bundle(record)
    audit.record("acceptance.bundle_exported", obj=record.node, record=str(record.id), bytes=len(payload))
    response = HttpResponse(payload, content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="%s"' % name
    return response


@guarded
def acceptance_json(request, record_id):
    record = get_object_or_404(AcceptanceRecord.objects.select_related("decided_by"), id=record_id)
    response = JsonResponse(services.acceptance_export(record), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="acceptance-%s-%s.json"' % (
        record.evidence["node"]["name"], record.id)
    return response
