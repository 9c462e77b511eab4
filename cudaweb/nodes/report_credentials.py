"""Node credentials: each node its own, bound to that node and to posting its own reports (the node-local health
command, the watcher). Issued (the earlier one revoked), revoked, checked; only a digest is kept. A node's reports
are also limited per minute here, counted on the credential's row (docs/adr/0029-a-node-speaks-for-itself.md)."""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.nodes.models import Node, NodeCredential

PREFIX = "cwn_"  # not an API token's cw_: a secret scanner and a person can tell a node's credential from a user's
LAST_USED_EVERY = timedelta(minutes=1)
MAX_TEXT = 200


def credential_digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def credential_text():
    """A new credential's text (not yet stored: node_credential_issue makes it the node's)."""
    return PREFIX + secrets.token_urlsafe(32)


def node_credential_issue(*, node, by, text=None):
    """A new credential for `node`, the active one revoked: (the stored NodeCredential, its text, shown once).
    `text`: one made by credential_text() and already written where the node reads it."""
    text = text or credential_text()
    now = timezone.now()
    for _ in range(3):
        try:
            with transaction.atomic():
                NodeCredential.objects.filter(node=node, revoked=None).update(revoked=now)
                credential = NodeCredential.objects.create(node=node, digest=credential_digest(text),
                                                           prefix=text[:10], created_by=by[:150])
            break
        except IntegrityError:  # another issue for this node committed between the revoke and the create
            continue
    else:
        raise RuntimeError("could not issue a credential for %s: issued concurrently, try again" % node.name)
    audit.record("node_credential.issued", obj=node, node=node.name, prefix=credential.prefix, by=by)
    return credential, text


def node_credential_revoke(*, node, by):
    """Revoke `node`'s active credential; whether there was one."""
    revoked = NodeCredential.objects.filter(node=node, revoked=None).update(revoked=timezone.now()) > 0
    if revoked:
        audit.record("node_credential.revoked", obj=node, node=node.name, by=by)
    return revoked


def node_credential_active(node):
    return NodeCredential.objects.filter(node=node, revoked=None).first()


def node_credential_find(text):
    """The active credential `text` is, with its node, or None."""
    if not text or len(text) > MAX_TEXT or not text.startswith(PREFIX):
        return None
    return NodeCredential.objects.select_related("node").filter(digest=credential_digest(text), revoked=None).first()


def node_report_admit(credential, *, address=None, now=None):
    """Count one report against the node's limit (CUDAWEB_NODE_REPORTS_PER_MINUTE): whether it may be taken.
    One conditional UPDATE in the common case; it also keeps when and from where the credential was last used."""
    now = now or timezone.now()
    minute = now.replace(second=0, microsecond=0)
    limit = settings.CUDAWEB_NODE_REPORTS_PER_MINUTE
    rows = NodeCredential.objects.filter(id=credential.id, revoked=None)
    if rows.filter(minute=minute, minute_reports__lt=limit).update(
            minute_reports=F("minute_reports") + 1, last_used=now, last_address=address):
        return True
    # a new minute starts the count again; in the same minute the limit is reached
    return rows.exclude(minute=minute).update(minute=minute, minute_reports=1, last_used=now,
                                              last_address=address) == 1


def nodes_credentials_issue(*, nodes, by):
    """A new credential for each node: [(node, text)], in the order given."""
    return [(node, node_credential_issue(node=node, by=by)[1]) for node in nodes]
