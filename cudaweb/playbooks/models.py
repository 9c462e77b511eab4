from django.conf import settings
from django.db import models


class PlaybookVote(models.Model):
    """An operator's word on whether a playbook fixed the problem a run showed (one vote per run, playbook, user)."""

    run = models.ForeignKey("validation.ValidationRun", on_delete=models.CASCADE, related_name="playbook_votes")
    playbook_id = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="playbook_votes")
    helped = models.BooleanField()
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "playbook_id", "user"], name="vote_unique_per_user")]
        # The library page counts votes per playbook.
        indexes = [models.Index(fields=["playbook_id", "helped"], name="vote_playbook_idx")]

    def __str__(self):
        return "%s on %s: %s" % (self.user, self.playbook_id, "fixed it" if self.helped else "did not help")
