"""The fleet app: the pages that compose the lower apps, and the onboarding decision they record."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse


class AcceptanceRecord(models.Model):
    """An operator's decision on a new node (accept into the fleet / quarantine) and the evidence it rests on.

    Immutable: written once, never updated or deleted (the run it rests on is protected too), so it can be
    attached to a vendor ticket as it is.
    """

    class Decision(models.TextChoices):
        ACCEPTED = "accepted", "Accepted into the fleet"
        QUARANTINED = "quarantined", "Quarantined"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    node = models.ForeignKey("nodes.Node", on_delete=models.PROTECT, related_name="acceptance_records")
    run = models.ForeignKey("validation.ValidationRun", on_delete=models.PROTECT, related_name="acceptance_records")
    decision = models.CharField(max_length=12, choices=Decision.choices)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField()
    evidence = models.JSONField(help_text="snapshot of the node, its host key and the run's report")
    digest = models.CharField(max_length=64, help_text="sha256 of the canonical JSON of the evidence")
    token = models.UUIDField(null=True, blank=True, unique=True, editable=False,
                             help_text="the decision form's own id: a second submit of one form records nothing")

    class Meta:
        ordering = ["-decided_at"]

    class Immutable(Exception):
        pass

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise self.Immutable("an acceptance record cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise self.Immutable("an acceptance record cannot be deleted")

    def get_absolute_url(self):
        return reverse("fleet:acceptance_detail", args=[self.id])
