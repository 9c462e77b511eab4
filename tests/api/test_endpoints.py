"""The API's answers: nodes, validation (one live run per node, Redis down), runs, triage, audit, network tests;
every error JSON with the right status."""

import json

import pytest
from django.conf import settings
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.network.models import NetworkTest
from cudaweb.network.tasks import run_network_test
from cudaweb.nodes.models import HostKey, Node
from cudaweb.playbooks.matcher import triage
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as a request runs: queueing happens at once
OOM_LOG = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of " \
          "79.11 GiB of which 1.50 GiB is free."


@pytest.fixture
def fleet():
    a = Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL, labels=["rack-1", "h200"])
    b = Node.objects.create(name="gpu-b", transport=Node.Transport.SSH, address="198.18.0.2", labels=["rack-2"])
    stored_run(a, real_report())
    return {"a": a, "b": b}


def _json(response):
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return json.loads(response.content)


def test_nodes_list_filters_and_shows_the_last_run(client, token_for, fleet):
    token = token_for("viewer")
    every = _json(client.get("/api/v1/nodes/", **bearer(token)))
    assert [n["name"] for n in every["nodes"]] == ["gpu-a", "gpu-b"] and every["count"] == 2
    a = every["nodes"][0]
    assert a["last_run"]["status"] in ("PASSED", "WARNED") and a["metrics"]["matmul_bf16_tflops"] > 100
    assert a["gpu_model"] and a["can_validate"] and not every["nodes"][1]["can_validate"]
    assert [n["name"] for n in _json(client.get("/api/v1/nodes/?label=rack-2", **bearer(token)))["nodes"]] == ["gpu-b"]
    assert _json(client.get("/api/v1/nodes/?status=new", **bearer(token)))["count"] == 1
    bad = client.get("/api/v1/nodes/?status=bogus", **bearer(token))
    assert bad.status_code == 400 and _json(bad)["error"] == "bad_request" and "status" in _json(bad)["detail"]


def test_node_detail_and_unknowns_are_json_404s(client, token_for, fleet):
    token = token_for("viewer")
    detail = _json(client.get("/api/v1/nodes/gpu-a/", **bearer(token)))
    assert detail["name"] == "gpu-a" and len(detail["runs"]) == 1 and detail["live_run"] is None
    for url in ("/api/v1/nodes/nope/", "/api/v1/runs/not-a-uuid/", "/api/v1/runs/%s/" % fleet["a"].id,
                "/api/v1/network-tests/%s/" % fleet["a"].id, "/api/v1/no-such-thing/"):
        response = client.get(url, **bearer(token))
        assert response.status_code == 404 and _json(response)["error"] == "not_found", url
    response = client.get("/api/v1/nodes/a%00b/", **bearer(token))  # a NUL: no URL of ours holds one (malformed)
    assert response.status_code == 400 and _json(response)["error"] == "bad_request"


def test_run_detail_has_status_reason_and_report(client, token_for, fleet):
    run = ValidationRun.objects.get()
    body = _json(client.get("/api/v1/runs/%s/" % run.id, **bearer(token_for("viewer"))))
    assert body["node"] == "gpu-a" and body["status"] == run.status and body["reason"].startswith("agent verdict")
    assert body["report"]["verdict"] == run.report["verdict"] and body["report"]["checks"]


def test_validate_queues_once_and_answers_with_the_live_run(client, token_for, fleet, monkeypatch):
    queued = []
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: queued.extend(run.id for run, _ in runs))
    token = token_for("operator")
    first = client.post("/api/v1/nodes/gpu-a/validate/", {"mode": "standard"}, content_type="application/json",
                        **bearer(token))
    second = client.post("/api/v1/nodes/gpu-a/validate/", {"mode": "full"}, content_type="application/json",
                         **bearer(token))
    assert first.status_code == second.status_code == 202
    assert _json(first)["run"] == _json(second)["run"] and _json(first)["status"] == "PENDING"
    run = ValidationRun.objects.get(id=_json(first)["run"])
    assert run.mode == "standard" and run.requested_by.username.startswith("api-operator") and queued == [run.id]
    event = audit.AuditEvent.objects.filter(action="validation.requested").first()
    assert event.actor_name == run.requested_by.username


def test_validate_refuses_bad_input_an_unaccepted_host_key_and_viewers(client, token_for, fleet, monkeypatch):
    monkeypatch.setattr(queue, "enqueue_many", lambda runs: None)
    operator = token_for("operator")
    for body, status in (({"mode": "turbo"}, 400), ("not json", 400), ([1, 2], 400)):
        response = client.post("/api/v1/nodes/gpu-a/validate/", json.dumps(body) if body != "not json" else body,
                               content_type="application/json", **bearer(operator))
        assert response.status_code == status and _json(response)["error"] == "bad_request", body
    unaccepted = client.post("/api/v1/nodes/gpu-b/validate/", {}, content_type="application/json", **bearer(operator))
    assert unaccepted.status_code == 409 and "host key" in _json(unaccepted)["detail"]
    HostKey.objects.create(node=fleet["b"], key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:x",
                           accepted_at=timezone.now())
    assert client.post("/api/v1/nodes/gpu-b/validate/", {}, content_type="application/json",
                       **bearer(operator)).status_code == 202
    viewer = client.post("/api/v1/nodes/gpu-a/validate/", {}, content_type="application/json",
                         **bearer(token_for("viewer")))
    assert viewer.status_code == 403 and "operator" in _json(viewer)["detail"]
    assert client.get("/api/v1/nodes/gpu-a/validate/", **bearer(operator)).status_code == 405


def test_redis_down_is_a_503_and_nothing_is_kept(client, token_for, fleet, monkeypatch):
    def down(runs):
        raise queue.BrokerUnavailable("the task queue (Redis) does not answer: Error 111 connecting")
    monkeypatch.setattr(queue, "enqueue_many", down)
    before = ValidationRun.objects.count()
    response = client.post("/api/v1/nodes/gpu-a/validate/", {"mode": "quick"}, content_type="application/json",
                           **bearer(token_for("operator")))
    assert response.status_code == 503 and _json(response)["error"] == "service_unavailable"
    assert "nothing was queued" in _json(response)["detail"] and response["Retry-After"]
    assert ValidationRun.objects.count() == before


def test_triage_gives_what_triage_log_json_gives_and_caps_the_size(client, token_for, settings):
    token = token_for("viewer")
    response = client.post("/api/v1/triage/", {"text": OOM_LOG}, content_type="application/json", **bearer(token))
    body = _json(response)
    assert response.status_code == 200 and body == json.loads(json.dumps(triage(OOM_LOG).as_dict()))
    assert body["playbooks"] and body["playbooks"][0]["category"] == "oom"
    settings.CUDAWEB_TRIAGE_CAP = 1000
    big = client.post("/api/v1/triage/", {"text": "x" * 1001}, content_type="application/json", **bearer(token))
    assert big.status_code == 413 and _json(big)["error"] == "payload_too_large"
    huge = client.post("/api/v1/triage/", {"text": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)},
                       content_type="application/json", **bearer(token))
    assert huge.status_code == 413 and _json(huge)["error"] == "payload_too_large"
    assert client.post("/api/v1/triage/", {}, content_type="application/json", **bearer(token)).status_code == 400


def test_audit_filters_like_the_page_and_is_for_admins(client, token_for, fleet):
    admin = token_for("admin", "api-admin")
    audit.record("node.created", obj=fleet["a"], via="test")
    events = _json(client.get("/api/v1/audit/?action=token.issued&actor=", **bearer(admin)))
    assert events["count"] == 1 and events["events"][0]["action"] == "token.issued"
    assert _json(client.get("/api/v1/audit/?object_type=nodes.node", **bearer(admin)))["events"][0]["object_repr"] \
        == "gpu-a"
    today = timezone.now().date()
    assert _json(client.get("/api/v1/audit/?since=%s&until=%s" % (today, today), **bearer(admin)))["count"] >= 2
    assert client.get("/api/v1/audit/?since=yesterday", **bearer(admin)).status_code == 400
    assert client.get("/api/v1/audit/?until=0", **bearer(admin)).status_code == 400  # not a Unix time
    assert client.get("/api/v1/audit/?acter=bob", **bearer(admin)).status_code == 400  # a misspelt filter
    assert client.get("/api/v1/audit/?action=no.such", **bearer(admin)).status_code == 400
    assert client.get("/api/v1/audit/", **bearer(token_for("operator"))).status_code == 403


def test_network_tests_by_name_or_label(client, token_for, fleet, monkeypatch):
    published = []
    monkeypatch.setattr(run_network_test, "apply_async", lambda args, **kw: published.append(args[0]))
    operator = token_for("operator")
    c = Node.objects.create(name="gpu-c", transport=Node.Transport.LOCAL, labels=["rack-1"])

    def start(body):
        return client.post("/api/v1/network-tests/", body, content_type="application/json", **bearer(operator))
    assert start({"nodes": ["gpu-a", "nope"]}).status_code == 404
    assert start({}).status_code == 400 and start({"nodes": [], "label": ""}).status_code == 400
    assert start({"nodes": ["gpu-a"]}).status_code == 400  # the schema: two names or more
    assert start({"label": "rack-2"}).status_code == 409  # one node has it
    assert start({"nodes": ["gpu-a", "gpu-b"]}).status_code == 409  # gpu-b's host key is not accepted
    response = start({"label": "rack-1"})
    body = _json(response)
    assert response.status_code == 202 and body["nodes"] == ["gpu-a", "gpu-c"] and published == [body["network_test"]]
    detail = _json(client.get("/api/v1/network-tests/%s/" % body["network_test"], **bearer(token_for("viewer"))))
    assert detail["nodes"] == ["gpu-a", "gpu-c"] and detail["status"] == "PENDING" and detail["pairs"] == []
    assert c.network_tests.count() == 1


def test_network_test_with_redis_down_is_a_503_and_nothing_is_kept(client, token_for, fleet, monkeypatch):
    import kombu.exceptions

    def down(args, **kwargs):
        raise kombu.exceptions.OperationalError("Error 111 connecting")
    monkeypatch.setattr(run_network_test, "apply_async", down)
    Node.objects.create(name="gpu-c", transport=Node.Transport.LOCAL, labels=["rack-1"])
    response = client.post("/api/v1/network-tests/", {"label": "rack-1"}, content_type="application/json",
                           **bearer(token_for("operator")))
    assert response.status_code == 503 and _json(response)["error"] == "service_unavailable"
    assert not NetworkTest.objects.exists()


def test_no_token_a_bad_token_and_a_session_get_401_with_a_bearer_challenge(client, admin_user):
    for headers in ({}, bearer("cw_wrong"), {"HTTP_AUTHORIZATION": "Basic YTpi"}):
        response = client.get("/api/v1/nodes/", **headers)
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
        assert _json(response)["error"] == "unauthorized"
    client.force_login(admin_user)  # a browser session is no token (and so needs no CSRF check)
    assert client.post("/api/v1/triage/", {"text": "x"}, content_type="application/json").status_code == 401


def test_the_openapi_document_is_public_and_names_every_operation(client):
    doc = _json(client.get("/api/v1/openapi.json"))
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {"/api/v1/nodes/", "/api/v1/nodes/{name}/", "/api/v1/nodes/{name}/validate/",
                                 "/api/v1/runs/{run_id}/", "/api/v1/runs/{run_id}/junit.xml", "/api/v1/triage/",
                                 "/api/v1/audit/",
                                 "/api/v1/network-tests/", "/api/v1/network-tests/{test_id}/",
                                 "/api/v1/nodes/{name}/watch-report/", "/api/v1/nodes/{name}/credential/",
                                 "/api/v1/events/", "/api/v1/events/{event_id}/",
                                 "/api/v1/events/{event_id}/acknowledge/",
                                 "/api/v1/nodes/{name}/host-key/accept/", "/api/v1/nodes/{name}/decision/"}
    # nodes are added, changed and deleted through the API too (admin), beside reading them
    assert set(doc["paths"]["/api/v1/nodes/"]) == {"get", "post"}
    assert set(doc["paths"]["/api/v1/nodes/{name}/"]) == {"get", "patch", "delete"}
    assert doc["components"]["securitySchemes"]["BearerToken"] == {"type": "http", "scheme": "bearer"}
    # a node's report takes its own credential, a scheme of its own: no user's token is offered there
    assert doc["paths"]["/api/v1/nodes/{name}/watch-report/"]["post"]["security"] == [{"NodeCredentialAuth": []}]
    assert "503" in doc["paths"]["/api/v1/nodes/{name}/validate/"]["post"]["responses"]


def test_the_triage_cap_setting_exists():
    assert settings.CUDAWEB_TRIAGE_CAP > 0


def _xid_failure():
    report = real_report()
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(status="fail", summary="GPU 3 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"])
    report["verdict"] = "fail"
    return report


def test_a_failed_run_and_its_node_give_the_root_cause_as_data(client, token_for, fleet):
    token = token_for("viewer")
    run = stored_run(fleet["b"], _xid_failure())
    body = _json(client.get("/api/v1/runs/%s/" % run.id, **bearer(token)))
    cause = body["root_cause"]
    assert (cause["check"], cause["layer"], cause["status"]) == ("driver.gpu_health", "L1", "fail")
    assert cause["summary"] == "GPU 3 fell off the bus (Xid 79)" and cause["signatures"] == ["gpu_fallen_off_bus"]
    assert cause["playbook"]["id"] == "gpu_hardware" and cause["playbook"]["first_fix"]
    nodes = {n["name"]: n for n in _json(client.get("/api/v1/nodes/", **bearer(token)))["nodes"]}
    assert nodes["gpu-b"]["root_cause"] == cause and nodes["gpu-a"]["root_cause"] is None  # gpu-a passed
    assert _json(client.get("/api/v1/nodes/gpu-b/", **bearer(token)))["root_cause"] == cause
    passed = ValidationRun.objects.filter(node=fleet["a"]).get()
    assert _json(client.get("/api/v1/runs/%s/" % passed.id, **bearer(token)))["root_cause"] is None
