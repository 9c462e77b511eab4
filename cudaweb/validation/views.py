from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from cudaweb.validation.models import ValidationRun


def _run(run_id):
    return get_object_or_404(ValidationRun.objects.select_related("node", "requested_by"), id=run_id)


@login_required
def run_detail(request, run_id):
    run = _run(run_id)
    return render(request, "validation/run_detail.html", {"run": run, "checks": run.checks.all()})


@login_required
def run_fragment(request, run_id):
    """The live part of the run page, polled while the run is PENDING or RUNNING."""
    run = _run(run_id)
    return render(request, "validation/_run_live.html", {"run": run, "checks": run.checks.all()})
