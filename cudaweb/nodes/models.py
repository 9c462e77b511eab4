"""The floor of the dashboard: the nodes, the keys the worker logs in with, and their pinned host keys."""

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

from cudaweb.nodes import crypto, keyfiles
from cudaweb.nodes.validators import node_name_validator


class SSHCredential(models.Model):
    """A private key the worker uses to log in: stored encrypted, or a path on the worker host."""

    name = models.CharField(max_length=100, unique=True)
    private_key_encrypted = models.TextField(blank=True)
    key_path = models.CharField(max_length=500, blank=True,
                                help_text="a key file in the worker host's key directory (CUDAWEB_KEY_DIR)")
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    def __str__(self):
        return self.name

    def set_private_key(self, text):
        self.private_key_encrypted = crypto.encrypt(text)

    def private_key_text(self):
        if self.private_key_encrypted:
            return crypto.decrypt(self.private_key_encrypted)
        return keyfiles.read_key_file(self.key_path)


class Node(models.Model):
    class Transport(models.TextChoices):
        SSH = "ssh", "SSH"
        LOCAL = "local", "Local (this host)"

    class Status(models.TextChoices):
        NEW = "new", "New"
        READY = "ready", "Ready"
        PASSING = "passing", "Passing"
        WARNING = "warning", "Warning"
        FAILING = "failing", "Failing"
        UNREACHABLE = "unreachable", "Unreachable"
        QUARANTINED = "quarantined", "Quarantined"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100, unique=True, validators=[node_name_validator])
    address = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=22)
    username = models.CharField(max_length=64, blank=True)
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.SSH)
    python_path = models.CharField(max_length=500, default="python3",
                                   help_text="interpreter on the node that runs the agent (the one with torch)")
    labels = models.JSONField(default=list, blank=True)
    credential = models.ForeignKey(SSHCredential, null=True, blank=True, on_delete=models.PROTECT)
    agent_timeout_s = models.PositiveIntegerField(null=True, blank=True,
                                                  help_text="overrides the mode's time budget for this node")
    network_interface = models.CharField(max_length=64, blank=True, help_text="interface for node-to-node tests "
                                         "(NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME); empty: NCCL and gloo choose")
    visible_devices = models.CharField(
        max_length=200, blank=True,
        validators=[RegexValidator(r"^[A-Za-z0-9,:-]*$", "GPU indexes or UUIDs, comma separated")],
        help_text="CUDA_VISIBLE_DEVICES for this node's agent, when one host is split into several nodes "
                  "(e.g. 0, or 2,3); blank: every GPU of the host")
    pair_port_min = models.PositiveIntegerField(default=29600, help_text="first TCP port a pair test may listen on")
    pair_port_max = models.PositiveIntegerField(default=29699, help_text="last TCP port a pair test may listen on")
    class DcgmLevel(models.TextChoices):
        OFF = "", "off"
        R1 = "r1", "r1 (quick, about a minute)"
        R2 = "r2", "r2 (medium, a few minutes)"
        R3 = "r3", "r3 (long, up to 30 minutes)"

    dcgm_level = models.CharField(max_length=2, choices=DcgmLevel.choices, blank=True, default=DcgmLevel.OFF,
                                  help_text="also run DCGM's diagnostic (dcgmi diag -r N) in each validation, where "
                                            "the node has DCGM: the agent's --with-dcgm")
    slurm_name = models.CharField(max_length=100, blank=True, validators=[node_name_validator],
                                  help_text="the node's NodeName in Slurm (drained on quarantine); empty: its name")
    kubernetes_name = models.CharField(max_length=253, blank=True, validators=[node_name_validator],
                                       help_text="the node's name in Kubernetes (cordoned on quarantine); empty: its "
                                                 "name")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.NEW)
    created = models.DateTimeField(auto_now_add=True)
    # Denormalised from the latest runs (cudaweb.drift.services.run_summarize, on validation's run_finished
    # signal) so the fleet page reads one row per node, whatever the number of runs. The floor names the run
    # table by string only: no import goes up.
    last_run = models.ForeignKey("validation.ValidationRun", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    layer_status = models.JSONField(default=dict, blank=True, help_text="worst status per layer of the last report")
    gpu_model = models.CharField(max_length=200, blank=True)
    gpu_count = models.PositiveIntegerField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True, help_text="latest value of each headline metric")
    baseline = models.ForeignKey("validation.ValidationRun", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+", help_text="the run new runs are compared with")
    drifted = models.BooleanField(default=False)
    attention = models.CharField(max_length=300, blank=True, help_text="why the node needs a look (e.g. a failed "
                                 "scheduled run)")

    class Meta:
        ordering = ["name"]
        indexes = [
            # fleet page filters and counts
            models.Index(fields=["status"], name="node_status_idx"),
            models.Index(fields=["gpu_model"], name="node_gpu_model_idx"),
        ]

    contact_requested = models.DateTimeField(null=True, blank=True, help_text="when reading the host key was asked")
    contact_error = models.CharField(max_length=500, blank=True, help_text="why the last host key read failed")

    def agent_env(self):
        """Environment the agent runs with on this node (None when it needs none)."""
        if not self.visible_devices:
            return None
        # CUDAWEB_NODE_DEVICES tells the agent the hidden GPUs are other nodes, not a mistake (cuda.available)
        return {"CUDA_VISIBLE_DEVICES": self.visible_devices, "CUDAWEB_NODE_DEVICES": self.visible_devices}

    def __str__(self):
        return self.name

    def clean(self):
        """The node rule (validators) for the admin's form too: it edits every field."""
        from django.core.exceptions import ValidationError

        from cudaweb.nodes import validators
        try:
            self.labels = validators.labels_clean(self.labels or [])
            if self.transport == self.Transport.SSH:
                self.address = validators.ssh_node_check(name=self.name, address=self.address, port=self.port,
                                                         username=self.username)["address"]
        except validators.NodeFieldError as exc:
            raise ValidationError({exc.field: str(exc)}) from None

    def get_absolute_url(self):
        return reverse("fleet:node_detail", args=[self.id])

    @property
    def scheduler_names(self):
        """(Slurm NodeName, Kubernetes node name): the node's own name unless set."""
        return self.slurm_name or self.name, self.kubernetes_name or self.name

    @property
    def is_local(self):
        return self.transport == self.Transport.LOCAL

    @property
    def host_key_accepted(self):
        try:
            return self.host_key.accepted_at is not None  # one query, none with select_related("host_key")
        except HostKey.DoesNotExist:
            return False

    @property
    def can_validate(self):
        """A run may reach this node: it is the dashboard's own host, or its SSH host key was accepted."""
        return self.is_local or self.host_key_accepted


class HostKey(models.Model):
    """The SSH host key pinned for a node: seen on first contact, trusted once an operator accepts it."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="host_key")
    key_type = models.CharField(max_length=64)
    key_base64 = models.TextField()
    fingerprint_sha256 = models.CharField(max_length=100)
    first_seen = models.DateTimeField(auto_now_add=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    accepted_at = models.DateTimeField(null=True, blank=True)

    @property
    def accepted(self):
        return self.accepted_at is not None


class FabricExpectation(models.Model):
    """What a node's fabric should reach, for one node or for every node with a label; passed to its agent
    (--ib-rate), so a port slower than this fails fabric.infiniband."""

    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="fabric_expectations")
    label = models.CharField(max_length=100, blank=True, help_text="every node with this label (or name one node)")
    ib_rate_gbps = models.PositiveIntegerField(help_text="the InfiniBand rate each port should run at, Gb/s (400 NDR)")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=(models.Q(node__isnull=False, label="") |
                                              (models.Q(node__isnull=True) & ~models.Q(label=""))),
                                   name="fabric_expectation_node_or_label"),
            models.UniqueConstraint(fields=["node"], condition=models.Q(node__isnull=False),
                                    name="fabric_expectation_one_per_node"),
            models.UniqueConstraint(fields=["label"], condition=~models.Q(label=""),
                                    name="fabric_expectation_one_per_label"),
        ]

    def __str__(self):
        return "%s: IB %d Gb/s" % (self.node or "label %s" % self.label, self.ib_rate_gbps)

    @classmethod
    def ib_rate_for(cls, node):
        """The node's own setting, else the highest of its labels' settings (the strictest), else None."""
        rows = list(cls.objects.filter(models.Q(node=node) | models.Q(label__in=list(node.labels or []))))
        own = [row.ib_rate_gbps for row in rows if row.node_id == node.id]
        labels = [row.ib_rate_gbps for row in rows if row.node_id is None]
        return own[0] if own else (max(labels) if labels else None)


class NodeCredential(models.Model):
    """The credential a node reports with (the node-local health command, the watcher): it speaks for its own node
    and only posts that node's reports. Only a digest is kept; the text is shown once, when issued. A node has at
    most one active credential: issuing a new one revokes the one before."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="report_credentials")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the credential, hex")
    prefix = models.CharField(max_length=12, help_text="the credential's first characters, to tell them apart")
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, help_text="who issued it (a user name, or how)")
    last_used = models.DateTimeField(null=True, blank=True)
    last_address = models.GenericIPAddressField(null=True, blank=True, help_text="where its last report came from")
    revoked = models.DateTimeField(null=True, blank=True)
    # reports in the current minute: the per-node rate limit, counted on this row (one UPDATE a report)
    minute = models.DateTimeField(null=True, blank=True)
    minute_reports = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["node", "-created"]
        constraints = [
            # one active credential per node: the node page and the commands show "the" credential
            models.UniqueConstraint(fields=["node"], condition=models.Q(revoked__isnull=True),
                                    name="node_credential_one_active"),
        ]

    def __str__(self):
        return "%s: %s… (%s)" % (self.node.name, self.prefix, "revoked" if self.revoked else "active")

    @property
    def is_active(self):
        return self.revoked is None
