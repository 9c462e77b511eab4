"""The events pages: the list filtered by open / acknowledged / closed, class and node, newest first; a page per
event with its evidence escaped, the GPU, the node's loop around it, the run and the playbook; an operator's
acknowledgement, which needs a note and is audited."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cudaweb.accounts.models import AuditEvent
from cudaweb.health import services
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import HealthEvent, Transition
from tests.conftest import user_with_role
from tests.drift.helpers import real_report, stored_run
from tests.health.conftest import act_policy, loop_settings, make_node  # noqa: F401 (fixtures)
from tests.health.standin import UUID, watch_report

pytestmark = pytest.mark.django_db


def _event(node, signature="gpu_fallen_off_bus", klass="hardware", ago=0, **fields):
    """An event seen `ago` minutes ago, on a GPU of its own (one open event per node, GPU, check and signature)."""
    at = timezone.now() - timedelta(minutes=ago)
    fields.setdefault("gpu_uuid", "GPU-%08d-0000-0000-0000-000000000000" % HealthEvent.objects.count())
    return HealthEvent.objects.create(node=node, check_id="driver.xid", signature=signature, severity="fail",
                                      klass=klass, first_seen=at, last_seen=at, **fields)


def _rows(page):
    """The event ids the list shows, in order."""
    import re
    return [int(i) for i in re.findall(r'href="/events/(\d+)/"', page)]


def test_the_list_filters_by_state_class_and_node_newest_first(client, django_user_model):
    a, b = make_node("gpu-ev-a"), make_node("gpu-ev-b")
    old_open = _event(a, ago=30)
    new_open = _event(b, ago=1)
    application = _event(a, signature="xid_application", klass="application", ago=5)
    acknowledged = _event(b, ago=10, acknowledged_at=timezone.now(), acknowledged_by_name="op", ack_note="on it")
    closed = _event(a, ago=20, open=False)
    client.force_login(user_with_role(django_user_model, "viewer-ev", "viewer"))
    get = lambda **q: _rows(client.get(reverse("fleet:events"), q).content.decode())  # noqa: E731
    assert get() == [new_open.id, application.id, acknowledged.id, closed.id, old_open.id]
    assert get(state="open") == [new_open.id, application.id, old_open.id]
    assert get(state="acknowledged") == [acknowledged.id]
    assert get(state="closed") == [closed.id]
    assert get(klass="application") == [application.id]
    assert get(state="open", klass="hardware", node="gpu-ev-a") == [old_open.id]
    assert get(state="bogus") == []  # an invalid filter shows nothing, not everything


def test_the_list_pages(client, django_user_model, monkeypatch):
    from cudaweb.fleet.views import events as view

    monkeypatch.setattr(view, "EVENTS_PER_PAGE", 2)
    node = make_node("gpu-ev-p")
    made = [_event(node, ago=i) for i in range(5)]
    client.force_login(user_with_role(django_user_model, "viewer-p", "viewer"))
    assert _rows(client.get(reverse("fleet:events"), {"page": 3}).content.decode()) == [made[4].id]


def test_the_event_page_shows_escaped_evidence_the_gpu_the_loop_around_it_the_run_and_playbook(
        client, django_user_model, loop_settings, act_policy):
    node = make_node("gpu-ev-d")
    run = stored_run(node, real_report())
    report_ingest(node, watch_report("xid79"))
    event = HealthEvent.objects.get(node=node, signature="gpu_fallen_off_bus")
    HealthEvent.objects.filter(id=event.id).update(evidence="NVRM: <script>alert('x')</script> & more")
    long_ago = Transition.objects.create(node=node, version=999, from_state="ready", to_state="suspect", by="loop",
                                         why="a day before: out of the window", at=event.first_seen - timedelta(days=1))
    client.force_login(user_with_role(django_user_model, "viewer-d", "viewer"))
    page = client.get(reverse("fleet:event_detail", args=[event.id])).content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    assert UUID in page and 'id="event-gpu"' in page
    assert "gpu_fallen_off_bus seen" in page and long_ago.why not in page  # ready -> suspect at the event
    assert reverse("runs:run_detail", args=[run.id]) in page
    assert reverse("playbooks:detail", args=["gpu_hardware"]) in page
    assert node.get_absolute_url() in page
    assert 'id="event-acknowledge"' not in page  # a viewer may not acknowledge


def test_acknowledging_needs_a_note_is_audited_and_kept_once(client, django_user_model):
    node = make_node("gpu-ev-k")
    event = _event(node)
    url = reverse("fleet:event_acknowledge", args=[event.id])
    client.force_login(user_with_role(django_user_model, "viewer-k", "viewer"))
    assert client.post(url, {"note": "x"}).status_code == 403
    operator = user_with_role(django_user_model, "operator-k", "operator")
    client.force_login(operator)
    assert 'id="event-acknowledge"' in client.get(reverse("fleet:event_detail", args=[event.id])).content.decode()
    client.post(url, {"note": "   "})
    event.refresh_from_db()
    assert event.acknowledged_at is None and not AuditEvent.objects.filter(action="event.acknowledged").exists()
    with pytest.raises(ValueError, match="say what is being done"):  # the service too, whatever calls it
        services.event_acknowledge(event=event, user=operator, note=" \x00 \t")
    client.post(url, {"note": "swapping the card, ticket 4411"})
    event.refresh_from_db()
    assert (event.acknowledged_by, event.acknowledged_by_name, event.ack_note) == (
        operator, "operator-k", "swapping the card, ticket 4411")
    (audited,) = AuditEvent.objects.filter(action="event.acknowledged")
    assert (audited.actor, audited.object_id, audited.detail["event"], audited.detail["note"]) == (
        operator, str(node.id), event.id, "swapping the card, ticket 4411")
    with pytest.raises(ValueError, match="acknowledged already by operator-k"):
        services.event_acknowledge(event=event, user=operator, note="again")
    event.refresh_from_db()
    assert event.ack_note == "swapping the card, ticket 4411"
    page = client.get(reverse("fleet:event_detail", args=[event.id])).content.decode()
    assert 'id="event-acknowledge"' not in page and "swapping the card, ticket 4411" in page


def test_the_navigation_links_the_events_page_for_every_role(client, django_user_model):
    client.force_login(user_with_role(django_user_model, "viewer-n", "viewer"))
    page = client.get(reverse("fleet:node_list")).content.decode()
    assert 'id="nav-events"' in page and 'id="nav-policies"' not in page
