"""Reads of nodes that every upper app shares."""

from django.db.models import TextField
from django.db.models.functions import Cast

from cudaweb.nodes.models import Node

LABEL_CAP = 1000


def with_label(nodes, label):
    """Nodes carrying `label`: labels is a JSON list, whose text form holds each label quoted on PostgreSQL and
    SQLite alike. A label longer than LABEL_CAP matches nothing (SQLite refuses a LIKE pattern over 50,000 bytes)."""
    if len(label) > LABEL_CAP:
        return nodes.none()
    return nodes.annotate(labels_text=Cast("labels", TextField())).filter(labels_text__contains='"%s"' % label)


def nodes_with_label(label):
    return with_label(Node.objects.all(), label)
