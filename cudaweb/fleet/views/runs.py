"""The run page (live while the run is), a batch of runs, and two runs compared."""

import re
import uuid
from collections import Counter

from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render

from cudaweb.drift.figures import run_figures
from cudaweb.drift.selectors import compare_runs
from cudaweb.fleet.access import guarded
from cudaweb.fleet.selectors import run_sections
from cudaweb.fleet.stress_charts import stress_panels
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.playbooks.selectors import run_playbooks
from cudaweb.validation.models import CheckResult, ValidationRun


def _run(run_id):
    return get_object_or_404(ValidationRun.objects.select_related("node", "requested_by"), id=run_id)


def run_context(request, run):
    """What the run's live part shows (the run page, and the onboarding page's validation step)."""
    checks = list(run.checks.all()) if run else []
    playbooks = run_playbooks(run=run, checks=checks, user=request.user) if run else {}
    cause = run_root_cause(run=run) if run else None
    return {"run": run, "checks": checks, "playbooks": playbooks,
            "sections": run_sections(checks=checks, playbooks=playbooks, cause=cause),
            "figures": run_figures(run=run) if run else [],
            "retried": [check for check in checks if check.retry],
            "stress": stress_panels(run.report) if run and run.report else None}


@guarded
def run_detail(request, run_id):
    return render(request, "runs/run_detail.html", run_context(request, _run(run_id)))


@guarded
def run_fragment(request, run_id):
    """The live part of the run page, polled while the run is PENDING or RUNNING."""
    return render(request, "runs/_run_live.html", run_context(request, _run(run_id)))


@guarded
def check_evidence(request, run_id, check_id):
    """A check's whole evidence as a text file (the page shows its start and its end)."""
    check = get_object_or_404(CheckResult, run_id=run_id, check_id=check_id)
    response = HttpResponse(check.evidence, content_type="text/plain; charset=utf-8")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", check.check_id)  # the check id came from the host
    response["Content-Disposition"] = 'attachment; filename="%s-%s.txt"' % (run_id, name)
    return response


def _uuids(parts):
    ids = []
    for part in parts[:500]:
        try:
            ids.append(uuid.UUID(part))
        except ValueError:
            continue
    return ids


def _batch_runs(request):
    """The runs of ?batch=<id> (a bulk request), or of ?ids=<id>,<id>... (up to 500)."""
    batch = _uuids([request.GET.get("batch", "")])
    runs = ValidationRun.objects.filter(batch=batch[0]) if batch else \
        ValidationRun.objects.filter(id__in=_uuids(request.GET.get("ids", "").split(",")))
    return list(runs.select_related("node").defer("report", "raw_output", "progress").order_by("node__name"))


def _batch_state(runs):
    """The batch's runs, whether any is live and, once none is, what came of them ("1 passed, 1 failed"): a batch
    that ended is titled by its result, not "validating"."""
    live = any(r.is_live for r in runs)
    outcome = Counter(r.status for r in runs) if not live else {}
    ended = ", ".join("%d %s" % (n, status.lower().replace("_", " ")) for status, n in sorted(outcome.items()))
    return {"runs": runs, "live": live, "ended": ended}


@guarded
def batch(request):
    """Several runs requested together: each one's progress, polled while any is live."""
    runs = _batch_runs(request)
    return render(request, "runs/batch.html", dict(_batch_state(runs), query=request.GET.urlencode()))


@guarded
def batch_fragment(request):
    return render(request, "runs/_batch_rows.html", _batch_state(_batch_runs(request)))


@guarded
def compare(request, run_a, run_b):
    """Two runs side by side (b against a)."""
    first = get_object_or_404(ValidationRun.objects.select_related("node"), id=run_a)
    second = get_object_or_404(ValidationRun.objects.select_related("node"), id=run_b)
    return render(request, "runs/compare.html", {"a": first, "b": second,
                                                       "cmp": compare_runs(first, second)})


@guarded
def compare_pick(request):
    """The node page's "compare the two selected runs": older as A, newer as B."""
    chosen = list(ValidationRun.objects.filter(id__in=_uuids(request.GET.getlist("cmp"))).order_by("created")
                  .values_list("id", flat=True))
    if len(chosen) != 2:
        return HttpResponseBadRequest("choose exactly two runs")
    return redirect("runs:compare", run_a=chosen[0], run_b=chosen[1])
