"""Property (issue 29): no URL answers a server error, whatever hostile request reaches it: a form in another
charset (latin-1, utf-16, ascii, UTF8, a name that is no codec), a NUL in the path (/runs/<id>/evidence/%00.txt), the
query (admin list filters) or the sessionid cookie, a Content-Length of "abc" (/api/v1/triage/), a form that is not
UTF-8. Run it on PostgreSQL too (DATABASE_URL), where a NUL in text is refused by the database itself."""

import os

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings, strategies as st

from cudaweb.api.services import token_issue
from tests import hostile_requests

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("CUDAWEB_PROPERTY_EXAMPLES", "200"))


@pytest.fixture
def world():
    values = hostile_requests.seed()
    client = Client(raise_request_exception=False)
    client.force_login(values["user"])
    token = token_issue(user=values["user"], name="fuzz")[1]
    return client, token, hostile_requests.every_url(values), values


@pytest.mark.parametrize("charset", hostile_requests.CHARSETS)
@pytest.mark.parametrize("url", ["/login/", "/playbooks/triage/", "/nodes/add/", "/runs/schedules/"])
def test_a_form_in_another_charset_is_400_on_any_page(world, charset, url):
    client = world[0] if url != "/login/" else Client()
    answer = hostile_requests.ask(client, "charset:%s" % charset, url)
    assert answer.status_code == 400 and b"forms are sent as UTF-8" in answer.content


def test_the_named_inputs_are_400_not_500(world):
    client, token, _, values = world
    assert client.get("/runs/%s/evidence/%%00.txt" % values["run_id"]).status_code == 400
    assert client.get("/", HTTP_COOKIE="sessionid=abc\x00def").status_code == 400
    assert client.get("/admin/nodes/node/", {"status__exact": "a\x00b"}).status_code == 400
    answer = client.post("/api/v1/triage/", data=b'{"text": "x"}', content_type="application/json",
                         CONTENT_LENGTH="abc", HTTP_AUTHORIZATION="Bearer %s" % token)
    assert answer.status_code == 400 and answer.json()["error"] == "bad_request"
    answer = client.post("/playbooks/triage/", data=b"text=\xff", content_type="application/x-www-form-urlencoded")
    assert answer.status_code == 400
    assert client.post("/playbooks/triage/", {"text": "CUDA out of memory"}).status_code == 200  # UTF-8 still read


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_url_answers_a_hostile_request_with_a_server_error(world, data):
    client, token, urls, _ = world
    url = data.draw(st.sampled_from(urls), label="url")
    kind = data.draw(st.sampled_from(hostile_requests.KINDS), label="kind")
    text = data.draw(st.one_of(st.sampled_from(["é", "\x00", "<b>", "%00", "'\"", "x" * 5000]),
                               st.text(max_size=40)), label="text")
    answer = hostile_requests.ask(client, kind, url, text, token)
    assert answer.status_code < 500, (kind, url, text, answer.content[:300])
