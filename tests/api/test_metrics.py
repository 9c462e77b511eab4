"""/metrics: per node status, verdict, last validation, headline figures and drift; runs by state; queue depth
(absent with Redis down); a token of any role or CUDAWEB_METRICS_TOKEN; queries bounded whatever the fleet."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from cudaweb.embedded import free_port
from cudaweb.nodes.models import Node
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db


def _samples(response):
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


def _value(samples, name, **labels):
    found = [v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture
def broker_down(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:%d/0" % free_port()


def test_per_node_series_runs_by_state_and_no_queue_depth_with_redis_down(client, token_for, broker_down):
    node = Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL, labels=["rack-07", "h200"])
    stored_run(node, real_report())
    Node.objects.filter(id=node.id).update(baseline=ValidationRun.objects.get())
    stored_run(node, scaled(real_report(), {"matmul_bf16_tflops": 0.5}))  # half the baseline: drift
    Node.objects.create(name="gpu-new", transport=Node.Transport.LOCAL)
    samples = _samples(client.get("/metrics", **bearer(token_for("viewer"))))
    node.refresh_from_db()
    labels = {"node": "gpu-a", "gpu_model": node.gpu_model, "labels": "h200,rack-07"}
    assert node.gpu_model and _value(samples, "cudaweb_node_status", status=node.status, **labels) == 1
    assert sum(v for (n, ls), v in samples.items() if n == "cudaweb_node_status" and ("node", "gpu-a") in ls) == 1
    assert _value(samples, "cudaweb_node_last_verdict", verdict=node.last_run.verdict, **labels) == 1
    assert _value(samples, "cudaweb_node_last_validation_timestamp_seconds", **labels) == \
        pytest.approx(node.last_run.finished.timestamp())
    assert _value(samples, "cudaweb_node_matmul_bf16_tflops", **labels) == pytest.approx(
        node.metrics["matmul_bf16_tflops"])
    assert _value(samples, "cudaweb_node_h2d_pinned_gigabytes_per_second", **labels) > 0
    assert _value(samples, "cudaweb_node_drifted", **labels) == 1
    assert _value(samples, "cudaweb_node_drift", kind="baseline", metric="matmul_bf16_tflops", **labels) == 1
    # gpu-new is this host (local) and no run has judged it: the fleet page's and the API's word, not "new"
    assert _value(samples, "cudaweb_node_status", node="gpu-new", status="not_validated") == 1
    assert _value(samples, "cudaweb_runs", state=node.last_run.status) == 2
    assert _value(samples, "cudaweb_runs", state="RUNNING") == 0
    assert _value(samples, "cudaweb_broker_up") == 0
    assert not [name for name, _ in samples if name == "cudaweb_queue_depth"]


def test_the_queue_depth_is_the_celery_list_length(client, token_for, redis_server):
    from cudaweb.celery import app

    # A queue no test worker consumes from (a worker the session started may be listening on the real one).
    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, "cudaweb-test-depth"
    client_ = queue.broker_client()
    try:
        client_.delete("cudaweb-test-depth")
        client_.rpush("cudaweb-test-depth", "a", "b", "c")
        samples = _samples(client.get("/metrics", **bearer(token_for("viewer"))))
        assert _value(samples, "cudaweb_queue_depth") == 3 and _value(samples, "cudaweb_broker_up") == 1
    finally:
        client_.delete("cudaweb-test-depth")
        client_.close()
        app.conf.task_default_queue = default_queue


def test_a_scrape_costs_the_same_queries_for_3_or_30_nodes(client, token_for, broker_down):
    token = token_for("viewer")
    client.get("/metrics", **bearer(token))  # the token's first use writes its last_used

    def queries(count):
        for i in range(Node.objects.count(), count):
            stored_run(Node.objects.create(name="n-%03d" % i, transport=Node.Transport.LOCAL, labels=["r"]),
                       real_report())
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/metrics", **bearer(token)).status_code == 200
        return len(captured)
    assert queries(3) == queries(30)


def test_who_may_scrape(client, token_for, settings, broker_down):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", **bearer("nope")).status_code == 401
    assert client.get("/metrics", **bearer(token_for(None))).status_code == 401  # a user in no role group
    settings.CUDAWEB_METRICS_TOKEN = "m" * 40
    assert client.get("/metrics", **bearer("m" * 40)).status_code == 200
    assert client.post("/metrics", **bearer("m" * 40)).status_code == 405


def _xid_failure():
    report = scaled(real_report(), statuses={"driver.gpu_health": "fail"})
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health").update(
        summary="GPU 3 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"])
    return report


def test_failing_nodes_have_their_root_cause_in_bounded_queries(client, token_for, broker_down):
    token = token_for("viewer")
    client.get("/metrics", **bearer(token))
    stored_run(Node.objects.create(name="gpu-ok", transport=Node.Transport.LOCAL), real_report())
    unreachable = ValidationRun.objects.create(node=Node.objects.create(name="gpu-off", transport="local"),
                                               status=ValidationRun.Status.RUNNING)
    run_finish(run=unreachable, status=ValidationRun.Status.UNREACHABLE, reason="cannot reach it")

    def scrape(failing):
        for i in range(Node.objects.filter(name__startswith="bad-").count(), failing):
            stored_run(Node.objects.create(name="bad-%03d" % i, transport=Node.Transport.LOCAL), _xid_failure())
        with CaptureQueriesContext(connection) as captured:
            samples = _samples(client.get("/metrics", **bearer(token)))
        return samples, len(captured)
    few, few_queries = scrape(2)
    many, many_queries = scrape(20)
    assert few_queries == many_queries
    info = {dict(ls)["node"]: dict(ls) for (n, ls), v in many.items()
            if n == "cudaweb_node_root_cause_info" and v == 1}
    assert set(info) == {"gpu-off"} | {"bad-%03d" % i for i in range(20)}  # gpu-ok passed: no series
    assert info["bad-007"] == {"node": "bad-007", "check": "driver.gpu_health", "playbook": "gpu_hardware"}
    assert info["gpu-off"] == {"node": "gpu-off", "check": "UNREACHABLE", "playbook": ""}


def test_node_status_speaks_the_state_words_of_the_pages_and_the_api(client, token_for, broker_down):
    """A node no run has judged is key_to_accept or not_validated on /metrics, as on the fleet page and in the API's
    `state`, never the stored new / ready; every state the pages know is a value of the label."""
    from cudaweb.nodes.states import STATES

    Node.objects.create(name="gpu-key", address="10.0.0.1", username="ops", status=Node.Status.NEW)
    Node.objects.create(name="gpu-accepted", address="10.0.0.2", username="ops", status=Node.Status.READY)
    Node.objects.create(name="gpu-here", transport=Node.Transport.LOCAL, status=Node.Status.NEW)
    stored_run(Node.objects.create(name="gpu-judged", transport=Node.Transport.LOCAL), real_report())
    token = token_for("viewer")
    samples = _samples(client.get("/metrics", **bearer(token)))
    on_metrics = {dict(ls)["node"]: dict(ls)["status"] for (n, ls), v in samples.items()
                  if n == "cudaweb_node_status" and v == 1}
    api = client.get("/api/v1/nodes/", **bearer(token)).json()
    assert on_metrics == {node["name"]: node["state"] for node in api["nodes"]}
    assert on_metrics == {"gpu-key": "key_to_accept", "gpu-accepted": "not_validated", "gpu-here": "not_validated",
                          "gpu-judged": Node.objects.get(name="gpu-judged").status}
    assert {dict(ls)["status"] for (n, ls) in samples if n == "cudaweb_node_status"} == set(STATES)
