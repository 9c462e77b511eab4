"""One row per message a hook sends out (a webhook, a Slurm drain, a Kubernetes cordon): its life and its tries."""

from django.db import models
from django.utils import timezone


class HookDelivery(models.Model):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLURM_DRAIN = "slurm_drain"
        SLURM_RESUME = "slurm_resume"
        K8S_CORDON = "k8s_cordon"
        K8S_UNCORDON = "k8s_uncordon"
        K8S_HEALTH = "k8s_health"  # the node condition GPUHealthy and per-GPU events

    class Event(models.TextChoices):
        RUN_FAILED = "run_failed"
        DRIFT = "drift"
        QUARANTINED = "quarantined"
        ACCEPTED = "accepted"
        RUN_FINISHED = "run_finished"
        # the loop (cudaweb.health): a new fault seen by the watch, a node's state, the circuit breaker
        HEALTH_EVENT = "health_event"
        NODE_STATE = "node_state"
        BREAKER_OPEN = "breaker_open"

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # tries spent, or refused for good (a 4xx, an auth failure)
        SKIPPED = "skipped"  # nothing to do (e.g. a Slurm node drained by someone else is not resumed)

    kind = models.CharField(max_length=16, choices=Kind.choices)
    event = models.CharField(max_length=16, choices=Event.choices)
    node = models.ForeignKey("nodes.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    run = models.ForeignKey("validation.ValidationRun", null=True, on_delete=models.SET_NULL, related_name="+")
    target = models.CharField(max_length=500, blank=True,
                              help_text="the webhook's scheme and host when it happened (never its secret path)")
    payload = models.JSONField(help_text="what is sent: the webhook's JSON, the scontrol arguments, the node's name")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    touched = models.DateTimeField(default=timezone.now, help_text="the last try, queueing or sweep")
    secret = models.TextField(blank=True, editable=False,
                              help_text="the webhook URL as configured when it happened, encrypted (nodes.crypto)")

    class Meta:
        ordering = ["-created"]
        indexes = [
            # the admin's list: newest first, by status
            models.Index(fields=["status", "-created"], name="hook_status_created_idx"),
        ]

    def __str__(self):
        return "%s %s %s" % (self.kind, self.event, self.status)
