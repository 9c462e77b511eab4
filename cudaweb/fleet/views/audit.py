"""The audit log (admins): filters, and the same selection exported as CSV or JSON."""

import csv
import json

from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.accounts.selectors import EXPORT_FIELDS, audit_event_export, audit_events, audit_object_types
from cudaweb.accounts.spreadsheet import inert_cell
from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import AuditFilterForm

EVENTS_PER_PAGE = 100


def _filtered(request):
    """The events the query string selects; none when a filter is invalid (a bad date must not export it all)."""
    form = AuditFilterForm(request.GET or None, object_types=audit_object_types())
    if not form.is_bound:
        return form, audit_events()
    if not form.is_valid():
        return form, AuditEvent.objects.none()
    return form, audit_events(**{k: v for k, v in form.cleaned_data.items() if v})


@guarded
def audit_list(request):
    form, events = _filtered(request)
    query = request.GET.copy()
    query.pop("page", None)
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page", 1))
    return render(request, "audit/list.html", {"form": form, "events": page, "query": query.urlencode()})


def _filename(extension):
    return 'attachment; filename="cudaweb-audit-%s.%s"' % (timezone.now().strftime("%Y%m%dT%H%M%SZ"), extension)


class _Echo:
    def write(self, value):
        return value


@guarded
def audit_export_csv(request):
    _, events = _filtered(request)
    writer = csv.writer(_Echo())

    def rows():
        yield writer.writerow(EXPORT_FIELDS)
        for event in events.iterator(chunk_size=2000):
            data = audit_event_export(event)
            data["detail"] = json.dumps(data["detail"], sort_keys=True)
            yield writer.writerow([inert_cell(data[field]) for field in EXPORT_FIELDS])

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = _filename("csv")
    return response


@guarded
def audit_export_json(request):
    _, events = _filtered(request)
    body = json.dumps({"events": [audit_event_export(e) for e in events.iterator(chunk_size=2000)]}, indent=1)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = _filename("json")
    return response
