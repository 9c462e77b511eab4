"""Tokens: only a digest kept, shown once, revocable, each issue and revocation in the audit log."""

import hashlib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from cudaweb.accounts.models import AuditEvent
from cudaweb.api.models import ApiToken
from cudaweb.api.services import token_user
from tests.api.conftest import bearer
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db


def _issue(username, *args):
    out, err = StringIO(), StringIO()
    call_command("api_token", username, *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_the_command_prints_the_token_once_and_keeps_only_its_digest(django_user_model):
    alice = user_with_role(django_user_model, "alice", "viewer")
    token, note = _issue("alice", "--name", "ci")
    stored = ApiToken.objects.get()
    assert token.startswith("cw_") and len(token) > 40 and "role: viewer" in note
    assert stored.digest == hashlib.sha256(token.encode()).hexdigest() and stored.name == "ci"
    assert token not in str(list(ApiToken.objects.values_list()))  # nowhere in the row
    assert token_user(token) == alice
    event = AuditEvent.objects.get(action="token.issued")
    assert event.object_id == str(stored.id) and event.detail["user"] == "alice" and token not in str(event.detail)
    listing, _ = _issue("alice", "--list")
    assert stored.prefix in listing and token not in listing and "active" in listing


def test_a_revoked_token_is_refused_and_revoking_is_audited(client, django_user_model):
    user_with_role(django_user_model, "bob", "operator")
    token, _ = _issue("bob")
    assert client.get("/api/v1/nodes/", **bearer(token)).status_code == 200
    stored = ApiToken.objects.get()
    said, _ = _issue("bob", "--revoke", str(stored.id))
    assert "revoked" in said
    response = client.get("/api/v1/nodes/", **bearer(token))
    assert response.status_code == 401 and 'error="invalid_token"' in response["WWW-Authenticate"]
    assert AuditEvent.objects.filter(action="token.revoked", object_id=str(stored.id)).count() == 1
    assert "already" in _issue("bob", "--revoke", str(stored.id))[0]
    assert AuditEvent.objects.filter(action="token.revoked").count() == 1


def test_tokens_are_revoked_only_by_their_user_and_users_must_exist(django_user_model):
    user_with_role(django_user_model, "carol", "viewer")
    user_with_role(django_user_model, "dave", "viewer")
    _issue("carol")
    with pytest.raises(CommandError, match="dave has no token"):
        _issue("dave", "--revoke", str(ApiToken.objects.get().id))
    with pytest.raises(CommandError, match="no user"):
        _issue("nobody")


def test_an_inactive_user_token_acts_no_more(client, django_user_model):
    erin = user_with_role(django_user_model, "erin", "admin")
    token, _ = _issue("erin")
    erin.is_active = False
    erin.save()
    assert client.get("/api/v1/nodes/", **bearer(token)).status_code == 401
