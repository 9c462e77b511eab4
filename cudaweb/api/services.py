"""Issuing, revoking and checking API tokens."""

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.api.models import ApiToken

TOKEN_PREFIX = "cw_"  # recognisable in a leaked file or a secret scanner
LAST_USED_EVERY = timedelta(minutes=1)  # at most one write per token per minute, not one per request


def token_digest(token):
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def token_issue(*, user, name=""):
    """A new token for `user`: (the stored ApiToken, the token text, which is kept nowhere and shown once)."""
    text = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, digest=token_digest(text), prefix=text[:10])
    audit.record("token.issued", obj=token, user=user.get_username(), name=name, token_id=token.id)
    return token, text


def token_revoke(*, token):
    """Revoke `token` (once; revoking again changes nothing). Returns whether it was active."""
    revoked = ApiToken.objects.filter(id=token.id, revoked=None).update(revoked=timezone.now()) == 1
    if revoked:
        audit.record("token.revoked", obj=token, user=token.user.get_username(), name=token.name, token_id=token.id)
    return revoked


def token_user(text):
    """The active user an active token acts as, or None."""
    if not text or len(text) > 200:
        return None
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(text), revoked=None).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
        ApiToken.objects.filter(id=token.id).update(last_used=now)
    return token.user
