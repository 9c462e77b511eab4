"""A method a read-only URL does not take is answered 405 with Allow, not 403 by the CSRF check that ran first
(issue 29); static files carry the Content-Security-Policy and nosniff like the pages (make run serves them)."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/metrics", "/api/v1/openapi.json", "/healthz"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_a_write_to_a_read_only_url_is_405(url, method):
    answer = getattr(Client(enforce_csrf_checks=True), method)(url)
    assert answer.status_code == 405 and "GET" in answer["Allow"]


def test_static_files_carry_the_policy_and_nosniff():
    answer = Client().get("/static/cudaweb/style.css")
    assert answer.status_code == 200
    assert "default-src 'self'" in answer["Content-Security-Policy"]
    assert answer["X-Content-Type-Options"] == "nosniff"
