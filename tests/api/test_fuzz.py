"""A schema-driven fuzz run (schemathesis) over every operation of the OpenAPI document, against the Django WSGI
app with an admin's token: no server error, and every response as the document says (status, content type,
headers, body)."""

from collections import Counter

import pytest
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

import schemathesis
from cudaweb.nodes.models import Node
from cudaweb.nodes.report_credentials import node_credential_issue
from schemathesis.generation.meta import ParameterLocation
from schemathesis.specs.openapi.checks import positive_data_acceptance
from tests.drift.helpers import real_report, stored_run

SEEN = {}  # operation -> Counter of the statuses it answered
RULES_NO_SCHEMA_STATES = {"POST /api/v1/nodes/", "PATCH /api/v1/nodes/{name}/",
                          "POST /api/v1/nodes/{name}/host-key/accept/"}
EXAMPLES = 25  # per operation: the whole run stays within seconds
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture
def in_test_transaction():
    """As Django's test client does: the WSGI app must not close the connection that holds the test's transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def admin_token(token_for, in_test_transaction):
    # Nodes the explicit examples name (gpu-0042, and a label) so that some requests reach the operations' work.
    node = Node.objects.create(name="gpu-0042", transport=Node.Transport.LOCAL, labels=["rack-07"])
    Node.objects.create(name="gpu-0043", transport=Node.Transport.LOCAL, labels=["rack-07"])
    stored_run(node, real_report())
    return token_for("admin", "fuzz-admin")


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_the_api_answers_every_generated_request_as_its_schema_says(case, admin_token):
    # The watch report's body is documented by its outline only; the whole schema is the agent's (schema.json, with
    # every figure's range: issue 35), so a body that fits the outline may still be refused, 400 with the field.
    excluded = [positive_data_acceptance] if case.operation.label.endswith("/watch-report/") else None
    # A node's address must resolve inside CUDAWEB_ALLOWED_NETWORKS and a key must be one SSH reads (the node rule,
    # cudaweb/nodes/validators.py; paramiko): no schema states either, so a body of the document's shape may be
    # refused, 400 naming the field. Everything else about these operations is checked as for the others.
    if case.operation.label in RULES_NO_SCHEMA_STATES:
        excluded = [positive_data_acceptance]
    token = admin_token
    if case.operation.label.endswith("/watch-report/"):
        # a node's report takes that node's own credential: gpu-0042's, issued anew (the credential operation may
        # have replaced the one before)
        token = node_credential_issue(node=Node.objects.get(name="gpu-0042"), by="fuzz")[1]
    response = case.call_and_validate(headers=_auth(case, token), excluded_checks=excluded)
    SEEN.setdefault(case.operation.label, Counter())[response.status_code] += 1


def _auth(case, token):
    """The admin's token, except on a case whose headers are the wrong part (a missing or broken Authorization):
    adding the token there would turn a request that must be refused into a valid one."""
    header = (case._meta.components if case._meta else {}).get(ParameterLocation.HEADER)
    if header is not None and header.mode.is_negative:
        return {}
    return {"Authorization": "Bearer %s" % token}


def test_the_fuzz_run_reached_every_operation_and_past_the_errors():
    """Runs after the operations' tests: each was called, and some calls got through to the work (2xx)."""
    print("\nschemathesis: %d operations, %d requests: %s" % (
        len(SEEN), sum(sum(c.values()) for c in SEEN.values()),
        "; ".join("%s %s" % (op, dict(sorted(c.items()))) for op, c in sorted(SEEN.items()))))
    assert len(SEEN) == len(list(schema.get_all_operations()))
    succeeded = {op for op, counts in SEEN.items() if any(200 <= status < 300 for status in counts)}
    assert {"GET /api/v1/nodes/", "GET /api/v1/nodes/{name}/", "POST /api/v1/nodes/{name}/validate/",
            "POST /api/v1/triage/", "GET /api/v1/audit/", "POST /api/v1/network-tests/"} <= succeeded


HOSTILE_HEADERS = [  # the inputs issue 29 found ending in 500s, sent to every operation of the document
    {"Content-Length": "abc"},
    {"Content-Type": "application/x-www-form-urlencoded; charset=utf-16"},
    {"Content-Type": "application/x-www-form-urlencoded; charset=latin-1"},
    {"Cookie": "sessionid=abc\x00def"},
]


@pytest.mark.django_db
@pytest.mark.parametrize("headers", HOSTILE_HEADERS, ids=lambda h: "/".join("%s:%s" % kv for kv in h.items())[:40])
def test_every_operation_refuses_the_hostile_inputs_without_a_server_error(admin_token, headers):
    """Each operation of the document, its path filled with the explicit examples' node (gpu-0042) or a fresh id,
    asked with a hostile header and a body that is not UTF-8: a 4xx, never a 5xx."""
    import uuid

    from django.test import Client
    client = Client(raise_request_exception=False)
    for result in schema.get_all_operations():
        operation = result.ok()
        path = operation.full_path.replace("{name}", "gpu-0042")
        for name in ("{run_id}", "{test_id}"):
            path = path.replace(name, str(uuid.uuid4()))
        path = path.replace("{event_id}", "1")
        extra = {"HTTP_AUTHORIZATION": "Bearer %s" % admin_token}
        for key, value in headers.items():
            extra["CONTENT_LENGTH" if key == "Content-Length" else "CONTENT_TYPE" if key == "Content-Type"
                  else "HTTP_" + key.upper()] = value
        answer = client.generic(operation.method.upper(), path, "text=\xe9".encode("latin-1"), **extra)
        assert answer.status_code < 500, (operation.label, headers, answer.content[:300])
