"""Webhooks on a failed run, a quarantine and new drift: Slack-compatible JSON POSTed from a Celery task to a real
local HTTP server, tried again with backoff after a 500."""

import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import TestCase

from cudaweb.drift.services import baseline_pin
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.fleet.services import acceptance_decide
from cudaweb.hooks import services
from cudaweb.hooks.models import HookDelivery
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_finish
from tests.drift.helpers import real_report, scaled, stored_run
from tests.hooks.servers import WebhookReceiver


@pytest.fixture
def receiver(settings):
    server = WebhookReceiver(statuses=[500])  # the first try fails, the second is accepted
    settings.CUDAWEB_WEBHOOK_URL = server.url + "/hooks/slack"
    settings.CUDAWEB_BASE_URL = "https://cudaweb.example.org"
    settings.CUDAWEB_HOOK_BACKOFF_S = 0.01
    yield server
    server.close()


@pytest.fixture
def node(db):
    return Node.objects.create(name="gpu-0042", transport=Node.Transport.LOCAL)


def failing_report():
    return scaled(real_report(), statuses={"driver.gpu_health": "fail"})


@pytest.mark.django_db
def test_a_failed_run_is_posted_and_retried_after_a_500(receiver, node, eager_celery):
    run = stored_run(node, failing_report())
    assert run.status == ValidationRun.Status.FAILED
    assert [r["answered"] for r in receiver.requests] == [500, 200]  # the retry is seen
    assert receiver.requests[0]["json"] == receiver.requests[1]["json"]
    message = receiver.requests[1]["json"]
    url = "https://cudaweb.example.org/runs/%s/" % run.id
    assert "*gpu-0042* failed validation (fail): L1 driver.gpu_health:" in message["text"] and url in message["text"]
    fields = {f["title"]: f["value"] for f in message["attachments"][0]["fields"]}
    assert fields["Node"] == "gpu-0042" and fields["Verdict"] == "fail (FAILED)" and fields["Run"] == url
    assert fields["Root cause"].startswith("L1 driver.gpu_health: ")
    assert receiver.requests[1]["path"] == "/hooks/slack"
    assert receiver.requests[1]["headers"]["Content-Type"] == "application/json"
    delivery = HookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.event) == ("delivered", 2, "run_failed")
    assert "try 1: " in delivery.last_error or delivery.last_error == ""


@pytest.mark.django_db
def test_a_passing_run_sends_nothing(receiver, node, eager_celery):
    stored_run(node, real_report())
    assert receiver.requests == [] and not HookDelivery.objects.exists()


@pytest.mark.django_db
def test_an_unreachable_node_names_the_reason(receiver, node, eager_celery):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    with TestCase.captureOnCommitCallbacks(execute=True):
        run_finish(run=run, status=ValidationRun.Status.UNREACHABLE, reason="cannot reach 10.0.4.42:22: No route")
    assert receiver.wait_for(2)
    fields = {f["title"]: f["value"] for f in receiver.requests[-1]["json"]["attachments"][0]["fields"]}
    assert fields["Root cause"] == "cannot reach 10.0.4.42:22: No route" and fields["Verdict"] == "UNREACHABLE (UNREACHABLE)"


@pytest.mark.django_db
def test_tries_are_bounded(settings, node, eager_celery):
    server = WebhookReceiver(statuses=[503] * 10)
    settings.CUDAWEB_WEBHOOK_URL, settings.CUDAWEB_HOOK_TRIES, settings.CUDAWEB_HOOK_BACKOFF_S = server.url, 3, 0.01
    try:
        stored_run(node, failing_report())
    finally:
        server.close()
    assert [r["answered"] for r in server.requests] == [503, 503, 503]
    delivery = HookDelivery.objects.get()
    assert delivery.status == "failed" and delivery.attempts == 3 and "gave up after 3 tries" in delivery.last_error


@pytest.mark.django_db
def test_a_4xx_is_not_tried_again(settings, node, eager_celery):
    server = WebhookReceiver(statuses=[404])
    settings.CUDAWEB_WEBHOOK_URL = server.url
    try:
        stored_run(node, failing_report())
    finally:
        server.close()
    assert len(server.requests) == 1 and HookDelivery.objects.get().status == "failed"


def test_backoff_doubles_and_is_capped(settings):
    settings.CUDAWEB_HOOK_BACKOFF_S, settings.CUDAWEB_HOOK_BACKOFF_MAX_S = 10, 60
    waits = [services.backoff_s(attempt) for attempt in (1, 2, 3, 4, 5)]
    assert 7.5 <= waits[0] <= 10 and 15 <= waits[1] <= 20 and 30 <= waits[2] <= 40 and 45 <= waits[4] <= 60


@pytest.mark.django_db
def test_new_drift_is_posted_once(receiver, node, eager_celery):
    receiver.statuses.clear()
    baseline_pin(node=node, run=stored_run(node, real_report()))
    stored_run(node, scaled(real_report(), {"h2d_pinned_gbs": 0.8}))
    stored_run(node, scaled(real_report(), {"h2d_pinned_gbs": 0.8}))  # the same drift again: not news
    drift = [r["json"] for r in receiver.requests]
    assert len(drift) == 1 and "drifted from its baseline or its peers" in drift[0]["text"]
    fields = {f["title"]: f["value"] for f in drift[0]["attachments"][0]["fields"]}
    assert "20% worse than its baseline" in fields["Drift"]


@pytest.mark.django_db
def test_a_quarantine_is_posted_with_the_root_cause(receiver, node, admin_user, eager_celery):
    receiver.statuses.clear()
    run = stored_run(node, failing_report())
    with TestCase.captureOnCommitCallbacks(execute=True):
        acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user)
    quarantine = receiver.requests[-1]["json"]
    assert quarantine["text"].startswith("*gpu-0042* was quarantined (fail): L1 driver.gpu_health:")
    assert HookDelivery.objects.filter(event="quarantined", status="delivered").count() == 1


@pytest.mark.django_db
def test_a_rolled_back_decision_sends_nothing(receiver, node, admin_user, eager_celery):
    receiver.statuses.clear()
    run = stored_run(node, real_report())
    with TestCase.captureOnCommitCallbacks(execute=True), pytest.raises(RuntimeError):
        with transaction.atomic():
            acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user)
            raise RuntimeError("the request failed after the decision")
    assert receiver.requests == [] and not AcceptanceRecord.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_after_a_500(receiver, node, admin_user, celery_worker):
    """The whole path: the decision commits, the task goes through Redis to a Celery worker, which tries, waits
    its backoff and tries again."""
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING)
    run_finish(run=run, status=ValidationRun.Status.TIMED_OUT, reason="the agent ran past 180 s")
    assert receiver.wait_for(2, timeout=60), receiver.requests
    assert [r["answered"] for r in receiver.requests] == [500, 200]
    delivery = HookDelivery.objects.get()
    deadline = time.monotonic() + 10
    while delivery.status == "pending" and time.monotonic() < deadline:  # the row is written after the answer
        time.sleep(0.1)
        delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 2


@pytest.mark.django_db
def test_the_webhook_secret_is_neither_stored_nor_shown(receiver, node, eager_celery):
    stored_run(node, failing_report())
    delivery = HookDelivery.objects.get()
    assert delivery.status == "delivered" and "/hooks/slack" not in delivery.target
    assert delivery.target.startswith("http://127.0.0.1/")
    assert "/hooks/slack" not in delivery.last_error  # the try that got a 500 names the host only


@pytest.mark.django_db
def test_a_delivery_that_cannot_be_sent_ends_failed_and_a_lost_one_is_queued_again(node, settings):
    settings.CUDAWEB_SLURM_CONTROLLER = "ctl"
    Node.objects.create(name="ctl", address="198.18.0.9", username="root")  # no credential
    delivery = HookDelivery.objects.create(kind="slurm_drain", event="quarantined", node=node,
                                           payload={"slurm_name": "gpu-0042", "argv": ["update"]})
    assert services.delivery_attempt(delivery_id=delivery.id) is None
    delivery.refresh_from_db()
    assert delivery.status == "failed" and "has no SSH credential" in delivery.last_error  # not PENDING for good
    lost = HookDelivery.objects.create(kind="webhook", event="drift", node=node, payload={"text": "x"})
    HookDelivery.objects.filter(id=lost.id).update(touched=lost.touched - timedelta(hours=1))
    queued = []
    from cudaweb.hooks import tasks
    original, tasks.deliver.apply_async = tasks.deliver.apply_async, lambda args, **kw: queued.append(args)
    try:
        assert services.deliveries_sweep(older_than_s=60) == 1 and queued == [[lost.id]]
        assert services.deliveries_sweep(older_than_s=60) == 0  # touched now: not swept twice
    finally:
        tasks.deliver.apply_async = original


@pytest.mark.django_db
def test_a_failed_run_carries_its_root_cause_as_data(receiver, node, eager_celery):
    receiver.statuses.clear()
    report = failing_report()
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(summary="GPU 3 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"])
    stored_run(node, report)
    message = receiver.requests[-1]["json"]
    assert message["root_cause"]["check"] == "driver.gpu_health" and message["root_cause"]["layer"] == "L1"
    assert message["root_cause"]["playbook"]["id"] == "gpu_hardware"
    fields = {f["title"]: f["value"] for f in message["attachments"][0]["fields"]}
    assert fields["Playbook"].startswith("GPU hardware fault")
    assert fields["Root cause"].startswith("L1 driver.gpu_health [gpu_hardware]: GPU 3")


HOSTILE = "<!channel> pay here <http://evil.example/|Click here> & more"
ESCAPED = "&lt;!channel&gt; pay here &lt;http://evil.example/|Click here&gt; &amp; more"


def _texts(message):
    attachment = message["attachments"][0]
    yield message["text"]
    yield attachment["fallback"]
    yield attachment["title"]
    for field in attachment["fields"]:
        yield field["value"]


@pytest.mark.django_db
def test_host_written_text_cannot_post_mentions_or_links(receiver, node, eager_celery):
    receiver.statuses.clear()
    report = failing_report()
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(summary=HOSTILE, signatures=[HOSTILE])
    run = stored_run(node, report)
    message = receiver.requests[-1]["json"]
    texts = list(_texts(message))
    assert not [t for t in texts if "<!" in t or "<http://evil" in t]
    assert ESCAPED in message["text"]
    assert message["text"].endswith("<https://cudaweb.example.org/runs/%s/|run>" % run.id)  # our own link stays
    assert message["root_cause"]["summary"] == ESCAPED and message["root_cause"]["signatures"] == [ESCAPED]


@pytest.mark.django_db
def test_an_operator_note_and_a_node_name_are_escaped(receiver, admin_user, eager_celery):
    receiver.statuses.clear()
    node = Node.objects.create(name="gpu<!here>", transport=Node.Transport.LOCAL)  # a name from before the validator
    run = stored_run(node, real_report())
    with TestCase.captureOnCommitCallbacks(execute=True):
        acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user, note=HOSTILE)
    message = receiver.requests[-1]["json"]
    assert ESCAPED in message["text"] and message["text"].startswith("*gpu&lt;!here&gt;* was quarantined")
    assert not [t for t in _texts(message) if "<!" in t or "<http://evil" in t]


@pytest.mark.django_db
def test_a_summary_with_controls_and_a_fake_second_line_is_posted_as_one_clean_line(receiver, node, eager_celery):
    from tests.hooks.test_outbound import HOSTILE, assert_clean

    receiver.statuses.clear()
    report = failing_report()
    next(c for c in report["checks"] if c["id"] == "driver.gpu_health").update(summary=HOSTILE)
    stored_run(node, report)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the loop's delivery is queued on commit
        services.loop_webhook(event="node_state", node=node, headline="is rma (was suspect)", cause=HOSTILE)
    assert receiver.wait_for(2)
    failed, loop = (r["json"] for r in receiver.requests[-2:])
    assert failed["text"].startswith("*gpu-0042* failed validation") and loop["text"].startswith("*gpu-0042* is rma")
    for message in (failed, loop):
        for text in _texts(message):
            assert_clean(text)
            assert "*gpu-a05* is ready" not in text and "<!channel>" not in text
    assert_clean(failed["root_cause"]["summary"])
    assert_clean(loop["loop"]["cause"])
