"""GET /api/v1/runs/<id>/junit.xml: the run as JUnit XML (cudaweb/validation/junit.py, whose document
tests/validation/test_junit.py checks against the schemas), for viewers, and in the OpenAPI document."""

import json
import uuid

import pytest

from cudaweb.nodes.models import Node
from tests.api.conftest import bearer
from tests.drift.helpers import stored_run
from tests.validation.test_junit import _failing_report, _valid

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="gpu-0042", transport=Node.Transport.LOCAL)


def test_the_api_serves_it_to_viewers_only(client, token_for, node):
    run = stored_run(node, _failing_report())
    url = "/api/v1/runs/%s/junit.xml" % run.id
    assert client.get(url).status_code == 401
    assert client.get(url, **bearer(token_for(None))).status_code == 403
    response = client.get(url, **bearer(token_for("viewer")))
    assert response.status_code == 200 and response["Content-Type"].startswith("application/xml")
    assert _valid(response.content).find("testsuite/properties/property").get("value").startswith("driver.gpu_health")
    assert client.get("/api/v1/runs/%s/junit.xml" % uuid.uuid4(), **bearer(token_for("viewer"))).status_code == 404


def test_the_openapi_document_names_the_junit_operation(client):
    doc = json.loads(client.get("/api/v1/openapi.json").content)
    operation = doc["paths"]["/api/v1/runs/{run_id}/junit.xml"]["get"]
    assert "application/xml" in operation["responses"]["200"]["content"]
