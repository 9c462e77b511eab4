"""The audit log: who did what, to which object, when and from where. Rows are only ever added."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AppendOnly(Exception):
    pass


class AuditEventQuerySet(models.QuerySet):
    """No delete, update or bulk_update through the ORM. (Deleting a user sets the actor to null: Django's
    collector does that with an UPDATE query of its own, not through this queryset.)"""

    def delete(self):
        raise AppendOnly("audit events are never deleted")

    def update(self, **kwargs):
        raise AppendOnly("audit events are never changed")

    def bulk_update(self, objs, fields, batch_size=None):
        raise AppendOnly("audit events are never changed")


class AuditEvent(models.Model):
    """One thing a person (or the dashboard on their behalf) did. Append-only: save refuses to update a row and
    delete refuses to remove one; the actor's name is copied so the row outlives the user (who then reads as
    deleted: the foreign key is set to null, nothing else changes)."""

    when = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True, help_text="the username when it happened")
    action = models.CharField(max_length=64, help_text="e.g. node.created, login.failed (audit.ACTIONS)")
    object_type = models.CharField(max_length=100, blank=True, help_text="app_label.model")
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    client_address = models.GenericIPAddressField(null=True, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-when", "-id"]
        indexes = [
            # The audit page, newest first, unfiltered or by date range.
            models.Index(fields=["-when"], name="audit_when_idx"),
            # The page's action filter.
            models.Index(fields=["action", "-when"], name="audit_action_idx"),
            # The page's actor filter (by name, so deleted users can still be found).
            models.Index(fields=["actor_name", "-when"], name="audit_actor_idx"),
            # Everything that happened to one object (object type filter, and an object's history).
            models.Index(fields=["object_type", "object_id", "-when"], name="audit_object_idx"),
        ]

    def __str__(self):
        return "%s %s %s %s" % (self.when.isoformat(timespec="seconds"), self.actor_name or "-", self.action,
                                self.object_repr)

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnly("an audit event cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("an audit event cannot be deleted")
