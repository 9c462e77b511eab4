"""Health events worked like incidents: the list (open / acknowledged / closed, by class and node, newest first) and
a page per event with its evidence, the GPU, the node's loop around it, its run and playbook, and an operator's
acknowledgement. What they show is read by cudaweb.health.selectors."""

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from cudaweb.fleet.access import guarded
from cudaweb.health import selectors, services
from cudaweb.health.models import HealthEvent

EVENTS_PER_PAGE = 50


class EventFilterForm(forms.Form):
    state = forms.ChoiceField(required=False, choices=[("", "any state")] + [(s, s) for s in selectors.EVENT_STATES])
    klass = forms.ChoiceField(required=False, label="class",
                              choices=[("", "any class")] + list(HealthEvent.Klass.choices))
    node = forms.CharField(required=False, max_length=200, widget=forms.TextInput(attrs={"placeholder": "node name"}))

    def clean_node(self):
        return self.cleaned_data["node"].replace("\x00", "").strip()


class AcknowledgeForm(forms.Form):
    note = forms.CharField(max_length=1000, widget=forms.TextInput(attrs={
        "size": 50, "placeholder": "what is being done (required)"}))


@guarded
@require_safe
def event_list(request):
    form = EventFilterForm(request.GET or None)
    chosen = form.cleaned_data if form.is_valid() else {}
    rows = selectors.events_filtered(state=chosen.get("state", ""), klass=chosen.get("klass", ""),
                                     node_name=chosen.get("node", "")) if chosen or not form.is_bound \
        else HealthEvent.objects.none()
    query = request.GET.copy()
    query.pop("page", None)
    page = Paginator(rows, EVENTS_PER_PAGE).get_page(request.GET.get("page", 1))
    return render(request, "fleet/loop/events.html", {"form": form, "events": page, "query": query.urlencode(),
                                                      "counts": selectors.event_counts()})


@guarded
@require_safe
def event_detail(request, event_id):
    event = get_object_or_404(HealthEvent.objects.select_related("node"), id=event_id)
    return render(request, "fleet/loop/event_detail.html", dict(selectors.event_detail(event),
                                                                ack_form=AcknowledgeForm()))


@guarded
@require_POST
def event_acknowledge(request, event_id):
    event = get_object_or_404(HealthEvent.objects.select_related("node"), id=event_id)
    form = AcknowledgeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say what is being done about it: the note is required.")
        return redirect(reverse("fleet:event_detail", args=[event.id]))
    try:
        services.event_acknowledge(event=event, user=request.user, note=form.cleaned_data["note"])
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "Event acknowledged.")
    return redirect(reverse("fleet:event_detail", args=[event.id]))
