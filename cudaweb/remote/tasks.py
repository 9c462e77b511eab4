"""Celery tasks of the remote app: first contact with a node, made by a worker (never by a web request)."""

from celery import shared_task
from django.contrib.auth import get_user_model

from cudaweb.nodes.models import Node
from cudaweb.remote import connect
from cudaweb.remote.transports.base import TransportError


@shared_task(soft_time_limit=120, time_limit=180)
def fetch_host_key(node_id, user_id=None):
    """Read the node's host key and record it for review; on failure, record why (shown on the node page)."""
    node = Node.objects.filter(id=node_id, transport=Node.Transport.SSH).first()
    if node is None:
        return "no such SSH node"
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    try:
        connect.host_key_fetch(node=node, on_behalf_of=user)
    except TransportError as exc:
        Node.objects.filter(id=node.id).update(contact_requested=None, contact_error=str(exc)[:500])
        return str(exc)
    Node.objects.filter(id=node.id).update(contact_requested=None, contact_error="")
    return "ok"
