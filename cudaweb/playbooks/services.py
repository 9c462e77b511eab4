from cudaweb.playbooks.library import get
from cudaweb.playbooks.models import PlaybookVote


class UnknownPlaybook(ValueError):
    pass


def vote_record(*, run, playbook_id, user, helped):
    """Store (or change) this user's vote on a playbook for a run."""
    if get(playbook_id) is None:
        raise UnknownPlaybook(playbook_id)
    vote, _ = PlaybookVote.objects.update_or_create(run=run, playbook_id=playbook_id, user=user,
                                                    defaults={"helped": helped})
    return vote
