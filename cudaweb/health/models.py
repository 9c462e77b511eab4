"""The loop's rows: what the watch saw (HealthEvent), where each node is (NodeLoop) and how it got there
(Transition), the rungs it took (LoopAction), the policies per label and the circuit breaker."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from cudaweb.health import machine

EVIDENCE_CAP = 4000
SUMMARY_CAP = 500


class HealthEvent(models.Model):
    """One fault or observation of the watch, deduplicated: while it is open, seeing it again (a counter that keeps
    growing, an Xid line per look) makes it grow (count, last_seen, the newest evidence) instead of adding a row."""

    class Severity(models.TextChoices):
        FAIL = "fail"
        WARN = "warn"
        INFO = "info"

    class Klass(models.TextChoices):
        HARDWARE = "hardware"
        APPLICATION = "application"
        OBSERVATION = "observation"

    node = models.ForeignKey("nodes.Node", on_delete=models.CASCADE, related_name="health_events")
    gpu_uuid = models.CharField(max_length=64, blank=True, help_text="the GPU's UUID; empty: the node as a whole")
    check_id = models.CharField(max_length=64)
    signature = models.CharField(max_length=64)
    severity = models.CharField(max_length=4, choices=Severity.choices)
    klass = models.CharField(max_length=12, choices=Klass.choices)
    summary = models.CharField(max_length=SUMMARY_CAP, blank=True)
    evidence = models.TextField(blank=True, help_text="the newest evidence, at most %d characters" % EVIDENCE_CAP)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    count = models.PositiveIntegerField(default=1)
    open = models.BooleanField(default=True, help_text="still seen at the latest look")
    # An operator's acknowledgement: someone works the fault (the note says what); the user's name is kept as a string
    # so that it outlives the user.
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    acknowledged_by_name = models.CharField(max_length=150, blank=True)
    ack_note = models.CharField(max_length=1000, blank=True)

    class Meta:
        ordering = ["-last_seen"]
        constraints = [models.UniqueConstraint(fields=["node", "gpu_uuid", "check_id", "signature"],
                                               condition=Q(open=True), name="health_event_one_open")]
        indexes = [models.Index(fields=["node", "-last_seen"], name="health_event_node_seen_idx"),
                   models.Index(fields=["-last_seen"], name="health_event_seen_idx"),
                   # the events page and GET /api/v1/events/?state=open: the open events nobody acknowledged yet
                   models.Index(fields=["-last_seen", "-id"], name="health_event_unacked_idx",
                                condition=Q(open=True, acknowledged_at__isnull=True))]

    def __str__(self):
        return "%s %s %s" % (self.node_id, self.check_id, self.signature)


class NodeLoop(models.Model):
    """Where a node is in the loop. `version` grows with every transition: a transition is one conditional UPDATE
    on (node, version), so two workers deciding at once make one transition and the other finds nothing to do."""

    State = models.TextChoices("State", [(s.upper(), s) for s in machine.STATES])

    node = models.OneToOneField("nodes.Node", on_delete=models.CASCADE, primary_key=True, related_name="loop")
    state = models.CharField(max_length=12, choices=State.choices, default=machine.READY)
    shadow_state = models.CharField(max_length=12, choices=State.choices, default=machine.READY,
                                    help_text="where the node would be under policy record (shadow mode)")
    version = models.PositiveIntegerField(default=0)
    shadow_version = models.PositiveIntegerField(default=0)
    since = models.DateTimeField(null=True, blank=True)
    root_cause = models.CharField(max_length=64, blank=True)
    shadow_root_cause = models.CharField(max_length=64, blank=True)
    rung = models.PositiveSmallIntegerField(default=0)
    action = models.CharField(max_length=20, blank=True, help_text="the rung in flight")
    waiting = models.CharField(max_length=300, blank=True, help_text="why the loop holds this node")
    next_watch_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_watch_at = models.DateTimeField(null=True, blank=True, help_text="when the latest look began")
    watch_error = models.CharField(max_length=500, blank=True)
    watch_failures = models.PositiveSmallIntegerField(default=0, help_text="looks in a row that failed (no report): "
                                                      "the node is looked at less often, so that hung hosts do not "
                                                      "hold the threads healthy nodes need")
    looking_until = models.DateTimeField(null=True, blank=True, help_text="a look of this node runs (in some worker "
                                         "process) until then at the latest: no second look beside it")
    watch_counters = models.JSONField(default=dict, blank=True, help_text="the fabric error counters of the latest "
                                      "look, handed to the next one (--fabric-previous): growth since it is an event")

    def __str__(self):
        return "%s: %s" % (self.node_id, self.state)


class Transition(models.Model):
    """One move of a node's state (or, shadow=True, of the state it would have under policy record)."""

    node = models.ForeignKey("nodes.Node", on_delete=models.CASCADE, related_name="loop_transitions")
    version = models.PositiveIntegerField(help_text="the node's loop version this transition made")
    shadow = models.BooleanField(default=False)
    from_state = models.CharField(max_length=12)
    to_state = models.CharField(max_length=12)
    by = models.CharField(max_length=150, help_text="the loop, or the operator's user name")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    why = models.CharField(max_length=500)
    event = models.ForeignKey(HealthEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    run = models.ForeignKey("validation.ValidationRun", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    effects = models.JSONField(default=list, blank=True, help_text="drain, resume, bundle, the rung started")
    root_cause = models.CharField(max_length=64, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-version"]
        constraints = [models.UniqueConstraint(fields=["node", "shadow", "version"], name="transition_once")]


class LoopAction(models.Model):
    """One rung taken on a node: claimed PENDING -> RUNNING by a conditional UPDATE, ended with a named outcome.
    The partial unique constraint keeps two rungs from being in flight on one node at once; `key` (node, version)
    keeps a redelivered decision from starting a rung twice."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        BUSY = "busy"
        ABORTED = "aborted"  # the dashboard failed (a worker lost, the database away): nothing said of the node
        SKIPPED = "skipped"  # it does not apply to the fault (a reset with no GPU named): the ladder's next rung
        CANCELLED = "cancelled"  # never started: an operator moved the node on before a worker took it

    LIVE = (Status.PENDING, Status.RUNNING)

    node = models.ForeignKey("nodes.Node", on_delete=models.CASCADE, related_name="loop_actions")
    kind = models.CharField(max_length=20)
    key = models.CharField(max_length=80, unique=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    outcome = models.CharField(max_length=500, blank=True, help_text="what happened, for a person")
    gpu_uuid = models.CharField(max_length=64, blank=True)
    run = models.ForeignKey("validation.ValidationRun", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    requested_by = models.CharField(max_length=150)
    created = models.DateTimeField()
    started = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [models.UniqueConstraint(fields=["node"], condition=Q(status__in=["pending", "running"]),
                                               name="loop_action_one_live_per_node")]


class LoopPolicy(models.Model):
    """What the loop may do to the nodes with a label (admin). A node follows the policy of its first label that
    has one (by `priority`, then label), else the defaults (settings CUDAWEB_LOOP_*)."""

    class Mode(models.TextChoices):
        OFF = "off", "off: record events only"
        RECORD = "record", "record: shadow mode, show what the loop would do"
        ACT = "act", "act: quarantine and remediate"

    label = models.CharField(max_length=100, unique=True)
    priority = models.PositiveSmallIntegerField(default=100)
    mode = models.CharField(max_length=6, choices=Mode.choices, default=Mode.RECORD)
    ladder = models.JSONField(default=list, blank=True, help_text="rungs in order, of: %s" % ", ".join(machine.RUNGS))
    auto = models.BooleanField(default=False, help_text="climb the ladder without an operator's click")
    interval_s = models.PositiveIntegerField(null=True, blank=True, help_text="watch cadence; empty: the default")
    repeat_limit = models.PositiveSmallIntegerField(default=2)
    repeat_window_days = models.PositiveSmallIntegerField(default=7)
    no_scheduler = models.BooleanField(default=False, help_text="these nodes run no scheduler (no Slurm, no "
                                       "Kubernetes): a reset or reboot goes ahead without a drain, only while no "
                                       "process holds any of the node's GPUs")

    class Meta:
        ordering = ["priority", "label"]
        verbose_name_plural = "loop policies"

    def __str__(self):
        return "%s: %s" % (self.label, self.mode)


class Breaker(models.Model):
    """The circuit breaker (one row, id 1). Its row lock also serialises the decisions that drain a node, so two
    workers never both take the last place under the limit."""

    is_open = models.BooleanField(default=False)
    reason = models.CharField(max_length=500, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=150, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)


class RmaBundle(models.Model):
    """The evidence bundle attached when a node goes to rma (made by cudaweb.fleet.evidence.loop_rma_bundle):
    the zip as it was, with its sha256."""

    transition = models.OneToOneField(Transition, on_delete=models.CASCADE, related_name="bundle")
    name = models.CharField(max_length=200)
    data = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    made = models.DateTimeField()
