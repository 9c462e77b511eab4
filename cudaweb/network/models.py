"""Tests of the network between nodes: the agent's pair mode run at both ends of each pair at once."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from cudaweb.nodes.models import Node


class NetworkTest(models.Model):
    """One test of a set of nodes: every pair (a small set) or a ring (a large one), in rounds of disjoint pairs."""

    class Status(models.TextChoices):
        PENDING = "PENDING"
        RUNNING = "RUNNING"
        DONE = "DONE"
        FAILED = "FAILED"  # the allreduce plan's collective over every node failed (the summary says why, cause first)
        DASHBOARD_ERROR = "DASHBOARD_ERROR"

    class Plan(models.TextChoices):
        MATRIX = "matrix", "every pair"
        RING = "ring", "ring (each node with its two neighbours)"
        ALLREDUCE = "allreduce", "one all-reduce over all the nodes, bisected when slow"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    plan = models.CharField(max_length=16, choices=Plan.choices)
    nodes = models.ManyToManyField(Node, related_name="network_tests")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    summary = models.TextField(blank=True)
    suspects = models.JSONField(default=list, blank=True, help_text="nodes that fail with every partner")

    class Meta:
        ordering = ["-created"]

    def get_absolute_url(self):
        return reverse("network:detail", args=[self.id])


class PairResult(models.Model):
    """One pair of one test: node_a listens (rank 0), node_b connects (rank 1)."""

    class Status(models.TextChoices):
        PASS = "pass"
        FAIL = "fail"

    test = models.ForeignKey(NetworkTest, on_delete=models.CASCADE, related_name="pairs")
    round = models.PositiveSmallIntegerField()
    node_a = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    node_b = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=4, choices=Status.choices)
    failure = models.CharField(max_length=80, blank=True, help_text="what went wrong, named (see services.FAILURES)")
    signatures = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    gloo_latency_us = models.FloatField(null=True, blank=True)
    gloo_busbw_gbs = models.FloatField(null=True, blank=True)
    nccl_busbw_gbs = models.FloatField(null=True, blank=True)
    transport = models.CharField(max_length=64, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    evidence = models.TextField(blank=True)

    class Meta:
        ordering = ["round", "id"]
        indexes = [
            # the matrix page's history of one pair, newest first
            models.Index(fields=["node_a", "node_b", "-id"], name="pair_history_idx"),
        ]


class CollectiveResult(models.Model):
    """One all-reduce of the allreduce plan: all the test's nodes in round 0, then halves, then pairs (bisection)."""

    class Status(models.TextChoices):
        PASS = "pass"
        SLOW = "slow"
        FAIL = "fail"

    test = models.ForeignKey(NetworkTest, on_delete=models.CASCADE, related_name="collectives")
    round = models.PositiveSmallIntegerField()
    members = models.JSONField(default=list, help_text="node names, rank 0 first")
    role = models.CharField(max_length=32, blank=True, help_text="all, half, pair with a good node, ...")
    status = models.CharField(max_length=4, choices=Status.choices)
    failure = models.CharField(max_length=80, blank=True)
    reason = models.TextField(blank=True)
    backend = models.CharField(max_length=8, blank=True, help_text="nccl where the nodes have GPUs, else gloo")
    busbw_gbs = models.FloatField(null=True, blank=True, help_text="the slowest rank's, 4 MiB gloo / 256 MiB NCCL")
    latency_us = models.FloatField(null=True, blank=True, help_text="the slowest rank's 4 KiB all-reduce")
    expected_gbs = models.FloatField(null=True, blank=True, help_text="what the slowest link should allow")
    duration_s = models.FloatField(null=True, blank=True)
    evidence = models.TextField(blank=True)

    class Meta:
        ordering = ["round", "id"]

    @property
    def share_of_expected(self):
        if self.busbw_gbs is None or not self.expected_gbs:
            return None
        return self.busbw_gbs / self.expected_gbs
