import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from cudaweb.nodes.models import Node
from cudaweb.validation import burnin, retries


class ValidationRun(models.Model):
    """One validation of one node: its life (pending -> running -> a terminal state) and its report."""

    class Status(models.TextChoices):
        PENDING = "PENDING"
        RUNNING = "RUNNING"
        PASSED = "PASSED"
        WARNED = "WARNED"
        FAILED = "FAILED"
        UNREACHABLE = "UNREACHABLE"
        AUTH_FAILED = "AUTH_FAILED"
        HOST_KEY_MISMATCH = "HOST_KEY_MISMATCH"
        TIMED_OUT = "TIMED_OUT"
        AGENT_ERROR = "AGENT_ERROR"
        DASHBOARD_ERROR = "DASHBOARD_ERROR"  # our own failure (storing, a bug), not the agent's nor the node's
        INTERRUPTED = "INTERRUPTED"

    class Mode(models.TextChoices):
        QUICK = "quick"
        STANDARD = "standard"
        FULL = "full"
        BURNIN = "burnin", "full + burn-in"

    LIVE = (Status.PENDING, Status.RUNNING)
    VERDICT_STATUSES = (Status.PASSED, Status.WARNED, Status.FAILED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.QUICK)
    burnin_seconds = models.PositiveIntegerField(null=True, blank=True,
                                                 help_text="burn-in mode: how long the sustained load lasts")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    agent_version = models.CharField(max_length=32, blank=True)
    verdict = models.CharField(max_length=8, blank=True)
    reason = models.TextField(blank=True, help_text="why the run ended where it did, for the operator")
    report = models.JSONField(null=True, blank=True)
    raw_output = models.TextField(blank=True, help_text="agent output kept when it could not be parsed (capped)")
    report_unstored = models.BooleanField(default=False, help_text="DASHBOARD_ERROR with its report kept in `report` "
                                          "while the database was away: the reaper stores it with its check rows")
    progress = models.JSONField(default=list, blank=True)
    enqueued = models.DateTimeField(null=True, blank=True, help_text="when its task was last put on the queue")
    enqueue_count = models.PositiveSmallIntegerField(default=0)
    batch = models.UUIDField(null=True, blank=True, db_index=True,
                             help_text="the runs requested together (a bulk request): one batch page follows them")
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries",
                                 help_text="the run whose worker died, which this one repeats")

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        BULK = "bulk"
        WIZARD = "wizard"
        SCHEDULED = "scheduled"

    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    # Filled when the run ends (cudaweb.drift.services.run_summarize, on signals.run_finished).
    metrics = models.JSONField(default=dict, blank=True, help_text="headline metrics of the report (worst GPU)")
    inventory = models.JSONField(default=dict, blank=True)
    changes = models.JSONField(default=dict, blank=True, help_text="what changed since the node's run before")
    drift = models.JSONField(default=dict, blank=True, help_text="against the baseline and the fleet peers")
    drifted = models.BooleanField(default=False)
    # Checks that failed or warned on a measured figure, run once more in the same run (cudaweb.validation.retries)
    retry = models.JSONField(default=dict, blank=True, help_text="the second attempt: checks, outcome, its report")
    # The dashboard's own steps between the run's claim and its end (cudaweb.validation.dashboard_timing)
    dashboard_timing = models.JSONField(default=dict, blank=True, help_text="when the worker reached the node, "
                                        "started the agent and had its report (ISO times)")

    class Meta:
        ordering = ["-created"]
        indexes = [
            # node page: a node's runs, newest first
            models.Index(fields=["node", "-created"], name="run_node_created_idx"),
            # the reaper: RUNNING runs by heartbeat
            models.Index(fields=["status", "heartbeat"], name="run_status_heartbeat_idx"),
            # the fleet overview: validations per day and status, the last 14 days, read from the index alone (an
            # index-only scan: the runs of those days lie on every page of the table, one per node and day)
            models.Index(fields=["created", "status"], name="run_created_status_idx"),
        ]
        constraints = [
            # One live run per node: two agents on one GPU host make each other fail. run_request returns the live
            # run instead of creating a second.
            models.UniqueConstraint(fields=["node"], condition=models.Q(status__in=("PENDING", "RUNNING")),
                                    name="one_live_run_per_node"),
        ]

    def __str__(self):
        return "%s %s %s" % (self.node, self.mode, self.status)

    def get_absolute_url(self):
        return reverse("runs:run_detail", args=[self.id])

    @property
    def is_live(self):
        return self.status in self.LIVE

    @property
    def mode_label(self):
        """"standard", "full + burn-in 30 min": the mode in words, with the burn-in's length."""
        return burnin.describe(self.mode, self.burnin_seconds)

    @property
    def duration_s(self):
        if self.started and self.finished:
            return (self.finished - self.started).total_seconds()
        return None


class CheckResult(models.Model):
    """One check of a run's report, as a row so that pages and drift can query it."""

    run = models.ForeignKey(ValidationRun, on_delete=models.CASCADE, related_name="checks")
    position = models.PositiveIntegerField()
    check_id = models.CharField(max_length=64)
    layer = models.CharField(max_length=10)
    title = models.CharField(max_length=200)
    status = models.CharField(max_length=8)
    summary = models.TextField()
    duration_s = models.FloatField(default=0)
    metrics = models.JSONField(default=dict)
    evidence = models.TextField(blank=True)
    signatures = models.JSONField(default=list)
    blocked_by = models.CharField(max_length=64, blank=True)

    class Retry(models.TextChoices):
        FLAKY = "flaky", "flaky (failed, then passed)"
        HARD = "hard", "hard (failed twice)"
        UNCONFIRMED = "unconfirmed", "not confirmed (the second attempt did not measure it)"
        RERUN = "rerun", "run again after the check that blocked it passed"

    retry = models.CharField(max_length=12, choices=Retry.choices, blank=True)
    attempts = models.JSONField(default=list, blank=True, help_text="both attempts of a check run twice, as reported")

    class Meta:
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "check_id"], name="check_unique_per_run")]
        indexes = [
            # selectors.nodes_flaky: the flaky checks of recent runs, per node
            models.Index(fields=["run"], condition=models.Q(retry="flaky"), name="check_flaky_idx"),
        ]

    @property
    def retry_label(self):
        """"flaky (failed, then passed)", "hard (warned twice)", ...: the words the pages show."""
        return retries.label(self.retry, self.attempts)
