"""The requests that once answered 500, each with its cause fixed: a run id that is no UUID on the baseline and
decision posts, the last day there is in the audit filters (page, exports, API), a `next` that is no path on the host
key steps, a 50,000-character search (SQLite refuses such a LIKE pattern)."""

import pytest
from django.urls import reverse

from cudaweb.accounts import audit
from cudaweb.nodes.models import HostKey, Node
from tests.api.conftest import bearer, token_for  # noqa: F401 (a fixture)
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="gpu-a", address="10.0.4.42", transport=Node.Transport.SSH, labels=["rack-1"])


@pytest.mark.parametrize("value", ["not-a-uuid", "", "1' OR '1'='1", "0" * 5000])
def test_a_run_that_is_no_uuid_is_a_message(operator_client, node, value):
    for name in ("fleet:node_baseline", "fleet:onboard_decide"):
        response = operator_client.post(reverse(name, args=[node.id]), {"run": value, "decision": "accepted"})
        assert response.status_code == 302, name


def test_a_baseline_of_a_real_run_is_still_pinned(operator_client, node):
    run = stored_run(node, real_report())
    operator_client.post(reverse("fleet:node_baseline", args=[node.id]), {"run": str(run.id)})
    node.refresh_from_db()
    assert node.baseline_id == run.id


@pytest.mark.parametrize("query", ["until=9999-12-31", "since=9999-12-31&until=9999-12-31", "since=0001-01-01",
                                   "until=0001-01-01"])
def test_the_audit_filters_take_any_day(operator_client, client, token_for, query):
    audit.record("node.created", actor=None, name="x")
    for url in ("/audit/", "/audit/export.csv", "/audit/export.json"):
        response = operator_client.get("%s?%s" % (url, query))
        assert response.status_code == 200, url
        if response.streaming:  # the CSV export streams: read it through
            b"".join(response.streaming_content)
    token = token_for("admin")
    every = client.get("/api/v1/audit/", **bearer(token)).json()["count"]
    api = client.get("/api/v1/audit/?%s" % query, **bearer(token))
    assert api.status_code == 200
    assert api.json()["count"] == (every if query in ("until=9999-12-31", "since=0001-01-01") else 0) and every


@pytest.mark.parametrize("target", ["http://[", "https://evil.example/", "//evil.example/x", "/\\evil.example",
                                    "javascript:alert(1)", "/ok\nLocation: x", "\x00", "x" * 10000])
def test_a_next_that_is_no_path_of_ours_returns_to_the_node(operator_client, node, target):
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:k")
    response = operator_client.post(reverse("fleet:host_key_accept", args=[node.id]),
                                    {"fingerprint": "SHA256:k", "next": target})  # host_key_fetch shares _back
    assert response.status_code == 302 and response.url == node.get_absolute_url()


def test_a_next_on_this_site_is_followed(operator_client, node):
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:k")
    back = reverse("fleet:node_onboard", args=[node.id])
    response = operator_client.post(reverse("fleet:host_key_accept", args=[node.id]),
                                    {"fingerprint": "SHA256:k", "next": back})
    assert response.url == back


def test_a_50000_character_search_or_label_matches_nothing(operator_client, node, client, token_for):
    for query in ("q=" + "a" * 50000, "label=" + "a" * 50000, "q=%25" * 2000):
        response = operator_client.get("/?" + query)
        assert response.status_code == 200 and "No nodes match these filters" in response.content.decode()
    api = client.get("/api/v1/nodes/?label=" + "a" * 190, **bearer(token_for("viewer")))
    assert api.status_code == 200 and api.json()["count"] == 0


def test_a_failing_check_no_playbook_matches_renders_on_the_run_and_onboarding_pages(operator_client, client,
                                                                                   django_user_model):
    from tests.conftest import user_with_role

    node = Node.objects.create(name="gpu-b", transport=Node.Transport.LOCAL)
    report = real_report()
    check = next(c for c in report["checks"] if c["id"] == "comm.gloo")
    check.update(status="fail", summary="qqq nothing any rule knows", evidence="zzz\nyyy", signatures=[])
    report["verdict"] = "fail"
    run = stored_run(node, report)
    viewer = user_with_role(django_user_model, "viewer-1", "viewer")
    client.force_login(viewer)  # any viewer hit it
    for who in (operator_client, client):
        for url in (run.get_absolute_url(), reverse("runs:run_fragment", args=[run.id]),
                    reverse("fleet:node_onboard", args=[node.id])):
            response = who.get(url)
            assert response.status_code == 200 and "qqq nothing any rule knows" in response.content.decode(), url


def _burnin_report_keyed(key):
    """The real H200 burn-in report with its sustained-load series filed under GPU `key`."""
    report = real_report("burnin/h200-burnin-300s.json")
    gpus = next(c for c in report["checks"] if c["id"] == "stress.sustained")["series"]["gpus"]
    gpus[key] = gpus.pop("0")
    return report


@pytest.mark.parametrize("key", ["²", "٣", "9" * 5000])
def test_a_burnin_series_under_a_key_that_is_no_ascii_number_renders_and_exports(operator_client, admin_user, key):
    """"²" passes str.isdigit() and int() refuses it; "٣" is a digit of another script; 5000 digits are over
    Python's limit: the series is left out, the pages and the evidence bundle answer."""
    from cudaweb.fleet.services import acceptance_decide

    node = Node.objects.create(name="h200-odd", transport=Node.Transport.LOCAL)
    run = stored_run(node, _burnin_report_keyed(key), mode="burnin")
    for url in (run.get_absolute_url(), reverse("fleet:node_onboard", args=[node.id])):
        response = operator_client.get(url)
        assert response.status_code == 200 and 'id="stress-series"' not in response.content.decode(), url
    record = acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user)
    response = operator_client.get(reverse("fleet:acceptance_bundle", args=[record.id]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"


HUGE_GPU = "GPU %s has fallen off the bus" % ("9" * 5000)  # Python's int() refuses more than 4300 digits


def test_a_triage_text_with_a_5000_digit_number_is_answered(operator_client, client, token_for):
    page = operator_client.post(reverse("playbooks:triage"), {"text": HUGE_GPU})
    assert page.status_code == 200 and "fallen off the bus" in page.content.decode()
    api = client.post("/api/v1/triage/", {"text": HUGE_GPU}, content_type="application/json",
                      **bearer(token_for("viewer")))
    assert api.status_code == 200 and "gpu" not in api.json()["facts"]  # no GPU index: not one a host has
