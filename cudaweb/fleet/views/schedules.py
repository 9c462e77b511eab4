"""Scheduled revalidation: list, create, delete."""

from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import ScheduleForm
from cudaweb.validation import schedules


@guarded
def schedule_list(request):
    form = ScheduleForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            schedules.schedule_create(every_hours=data["every_hours"], mode=data["mode"], node=data["node"],
                                      label=data["label"], burnin_seconds=data["burnin_seconds"])
            return redirect("runs:schedules")
        except ValueError as exc:
            form.add_error(None, str(exc))
    return render(request, "runs/schedules.html", {"form": form, "schedules": schedules.schedules()})


@guarded
@require_POST
def schedule_delete(request, schedule_id):
    schedules.schedule_delete(schedule_id=schedule_id)
    return redirect("runs:schedules")
