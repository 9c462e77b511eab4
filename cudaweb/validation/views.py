from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from cudaweb.playbooks.selectors import run_playbooks
from cudaweb.validation.models import ValidationRun


def _run(run_id):
    return get_object_or_404(ValidationRun.objects.select_related("node", "requested_by"), id=run_id)


def _context(request, run):
    checks = list(run.checks.all())
    return {"run": run, "checks": checks, "playbooks": run_playbooks(run=run, checks=checks, user=request.user)}


@login_required
def run_detail(request, run_id):
    return render(request, "validation/run_detail.html", _context(request, _run(run_id)))


@login_required
def run_fragment(request, run_id):
    """The live part of the run page, polled while the run is PENDING or RUNNING."""
    return render(request, "validation/_run_live.html", _context(request, _run(run_id)))
