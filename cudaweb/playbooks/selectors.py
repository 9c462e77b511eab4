from django.db.models import Count, Q

from cudaweb.playbooks.matcher import triage_check
from cudaweb.playbooks.models import PlaybookVote

INLINE_STATUSES = ("fail", "warn", "error")


def vote_counts():
    """{playbook_id: {"followed": n, "helped": k}} over every vote, in one query."""
    rows = PlaybookVote.objects.values("playbook_id").annotate(
        followed=Count("id"), helped=Count("id", filter=Q(helped=True)))
    return {r["playbook_id"]: {"followed": r["followed"], "helped": r["helped"]} for r in rows}


def run_playbooks(*, run, checks, user):
    """For each failing or warning check of a run: its triage, with this run's votes per playbook."""
    votes = {}
    for vote in PlaybookVote.objects.filter(run=run).select_related("user"):
        entry = votes.setdefault(vote.playbook_id, {"helped": 0, "not_helped": 0, "mine": None})
        entry["helped" if vote.helped else "not_helped"] += 1
        if vote.user_id == user.id:
            entry["mine"] = vote.helped
    result = {}
    for check in checks:
        if check.status in INLINE_STATUSES:
            result[check.check_id] = {"triage": triage_check(check), "votes": votes}
    return result
