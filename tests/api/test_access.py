"""Every API URL x method x role, walked from the API's URL conf, against its rule table (cudaweb/api/access.py):
a new API URL without a rule fails here, and so does one that does not enforce its rule."""

import pytest
from django.utils import timezone
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from cudaweb.accounts.roles import ROLES, has_role
from cudaweb.api import access
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.health.models import HealthEvent
from cudaweb.network.models import NetworkTest
from cudaweb.nodes.models import Node
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from cudaweb.nodes.report_credentials import node_credential_issue
from tests.api.conftest import bearer

pytestmark = pytest.mark.django_db
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
WHO = (None, "bad-token", "no-role") + ROLES + ("node",)  # "node": the URL's node's own credential
XML_ANSWERS = {"api:run_junit"}  # its document is XML; its errors are JSON like every other operation's


def _api_patterns(resolver, inside=False):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _api_patterns(entry, inside or entry.namespace == "api")
        elif isinstance(entry, URLPattern) and inside:
            yield "api:%s" % entry.name, entry.pattern


URLS = dict(_api_patterns(get_resolver()))


def test_the_walk_sees_the_api():
    assert {"api:nodes", "api:node_validate", "api:audit", "api:openapi-json"} <= set(URLS)


def test_every_api_url_has_a_rule_and_every_rule_a_url():
    assert sorted(set(URLS) - set(access.RULES)) == [], "add these URLs to cudaweb/api/access.py RULES"
    assert sorted(set(access.RULES) - set(URLS)) == [], "rules for API URLs that no longer exist"
    for name, rule in access.RULES.items():
        assert rule and set(rule) <= {"GET", "POST", "PATCH", "DELETE"}, name
        assert set(rule.values()) <= set(ROLES) | {access.PUBLIC, access.NODE}, name


def test_every_api_url_method_and_role(client, token_for, monkeypatch):
    """No or a bad token -> 401 with a Bearer challenge; a role below the rule's -> 403; at or above it -> the
    operation answers (not 401/403); a method without a rule -> 405; JSON (a JUnit document: XML)."""
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    node = Node.objects.create(name="matrix-node", transport=Node.Transport.LOCAL, labels=["matrix"])
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.FAILED)
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.MATRIX)
    event = HealthEvent.objects.create(node=node, check_id="driver.xid", signature="gpu_fallen_off_bus",
                                       severity="fail", klass="hardware", first_seen=timezone.now(),
                                       last_seen=timezone.now())
    kwargs = {"name": node.name, "run_id": run.id, "test_id": test.id, "event_id": event.id}
    tokens = {who: token_for(None if who == "no-role" else who) for who in WHO
              if who not in (None, "bad-token", "node")}
    tokens["bad-token"] = "cw_" + "x" * 43
    # a decision kept on the node: an admin's DELETE of it answers 409 (the record is evidence), so the walk keeps it
    AcceptanceRecord.objects.create(node=node, run=run, decision=AcceptanceRecord.Decision.QUARANTINED,
                                    decided_by=_user_of(tokens["admin"]), decided_at=timezone.now(), evidence={},
                                    digest="0" * 64)
    wrong = []
    for name, pattern in sorted(URLS.items()):
        url = reverse(name, kwargs={key: kwargs[key] for key in pattern.converters})
        # an admin's POST to api:node_credential issues a new one, revoking this: the node's current credential
        tokens["node"] = node_credential_issue(node=node, by="test")[1]
        for method in METHODS:
            needed = access.role_needed(name, method)
            for who in WHO:
                headers = bearer(tokens[who]) if who else {}
                response = client.generic(method, url, "{}", content_type="application/json", **headers)
                status = response.status_code
                if name == "api:api-root":
                    ok = status == 404
                elif needed is None:
                    ok = status == 405
                elif needed == access.PUBLIC:
                    ok = status == 200
                elif who in (None, "bad-token"):
                    ok = status == 401 and response["WWW-Authenticate"].startswith("Bearer")
                elif needed == access.NODE:  # the node's own credential answers; a user's token, whatever its role: 403
                    ok = status not in (401, 403, 405) and status < 500 if who == "node" else status == 403
                elif who == "node":  # a node's credential is no user's token
                    ok = status == 401
                elif who != "no-role" and has_role(_user_of(tokens[who]), needed):
                    ok = status not in (401, 403, 405) and status < 500
                else:
                    ok = status == 403
                answers = "application/xml" if name in XML_ANSWERS and status == 200 else "application/json"
                ok = ok and response["Content-Type"].startswith(answers)
                if not ok:
                    wrong.append("%s %s as %s: %s (needs %s)" % (method, name, who, status, needed))
    assert wrong == []


def _user_of(token):
    from cudaweb.api.services import token_user
    return token_user(token)
