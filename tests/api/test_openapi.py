"""The OpenAPI document is valid (openapi-spec-validator), so that clients and generators can use it as it is."""

import json

from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator


def _document(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_the_openapi_document_is_valid(client):
    doc = _document(client)
    validator = OpenAPIV31SpecValidator if doc["openapi"].startswith("3.1") else OpenAPIV30SpecValidator
    errors = ["%s at %s" % (e.message[:200], "/".join(str(p) for p in e.absolute_path)) for e in
              validator(doc).iter_errors()]
    assert errors == []


def test_a_default_keeps_to_its_own_schema(client):
    label = _document(client)["components"]["schemas"]["NetworkTestIn"]["properties"]["label"]
    assert "default" not in label or len(label["default"]) >= label.get("minLength", 0)
