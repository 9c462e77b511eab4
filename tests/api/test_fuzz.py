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
from schemathesis.generation.meta import ParameterLocation
from tests.drift.helpers import real_report, stored_run

SEEN = {}  # operation -> Counter of the statuses it answered
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
    response = case.call_and_validate(headers=_auth(case, admin_token))
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
