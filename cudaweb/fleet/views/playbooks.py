"""The playbook library, a playbook, log triage, and votes on a run's playbooks."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet.access import guarded
from cudaweb.fleet.forms import TriageForm, VoteForm
from cudaweb.playbooks import library, selectors, services
from cudaweb.playbooks.matcher import triage
from cudaweb.validation.models import ValidationRun


@guarded
def playbook_list(request):
    counts = selectors.vote_counts()
    books = [{"book": b, "votes": counts.get(b.id, {"followed": 0, "helped": 0})} for b in library.load().values()]
    return render(request, "playbooks/list.html", {"books": books})


@guarded
def playbook_detail(request, playbook_id):
    book = library.get(playbook_id)
    if book is None:
        raise Http404("no such playbook")
    votes = selectors.vote_counts().get(book.id, {"followed": 0, "helped": 0})
    return render(request, "playbooks/detail.html", {"book": book, "votes": votes})


@guarded
def triage_log(request):
    form = TriageForm(request.POST or None, request.FILES or None)
    result = None
    if request.method == "POST" and form.is_valid():
        result = triage(form.cleaned_data["text"])
    return render(request, "playbooks/triage.html", {"form": form, "result": result})


@guarded
@require_POST
def vote(request, run_id, playbook_id):
    run = get_object_or_404(ValidationRun, id=run_id)
    form = VoteForm(request.POST)
    if not form.is_valid():
        messages.error(request, "choose 'fixed it' or 'did not help'")
    else:
        try:
            services.vote_record(run=run, playbook_id=playbook_id, user=request.user,
                                 helped=form.cleaned_data["helped"])
            messages.success(request, "vote recorded for %s" % playbook_id)
        except services.UnknownPlaybook:
            raise Http404("no such playbook")
    return redirect("runs:run_detail", run_id=run.id)
