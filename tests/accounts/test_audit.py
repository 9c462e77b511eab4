"""The audit log: who, what, which object, from where; append-only; and each action the issue names, recorded
where it happens."""

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from cudaweb.accounts import audit
from cudaweb.accounts.models import AppendOnly, AuditEvent
from cudaweb.fleet.services import acceptance_decide
from cudaweb.network.services import network_test_request
from cudaweb.nodes import services as node_services
from cudaweb.nodes.models import Node
from cudaweb.remote.connect import transport_for
from cudaweb.validation import schedules
from cudaweb.validation.services import runs_request
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


def _actions():
    """What happened, leaving out the role given to the fixtures' users."""
    return list(AuditEvent.objects.exclude(action="role.changed").order_by("id").values_list("action", flat=True))


def test_an_event_keeps_who_what_the_object_and_the_address(admin_user):
    node = Node.objects.create(name="gpu-1", transport=Node.Transport.LOCAL)
    request = RequestFactory().post("/", REMOTE_ADDR="198.18.0.9", HTTP_X_FORWARDED_FOR="10.9.9.9")
    request.user = admin_user
    event = audit.record("node.changed", request=request, obj=node, fields=["labels"])
    assert (event.actor, event.actor_name, event.action) == (admin_user, "operator", "node.changed")
    assert (event.object_type, event.object_id, event.object_repr) == ("nodes.node", str(node.id), "gpu-1")
    assert event.detail == {"fields": ["labels"]} and event.client_address == "198.18.0.9"


def test_x_forwarded_for_counts_only_behind_a_trusted_proxy(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.18.0.5")
    assert audit.client_address(request) == "10.0.0.2"
    settings.CUDAWEB_TRUSTED_PROXIES = ["10.0.0.2"]
    assert audit.client_address(request) == "198.18.0.5"  # what our proxy saw; the first entry is the client's claim


def test_an_unknown_action_is_refused():
    with pytest.raises(ValueError):
        audit.record("node.renamed")


def test_events_are_append_only_and_outlive_their_user(django_user_model):
    user = django_user_model.objects.create_user("gone")
    event = audit.record("token.issued", actor=user, name="ci")
    event.action = "login.failed"
    with pytest.raises(AppendOnly):
        event.save()
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.filter(id=event.id).update(action="login.failed")
    with pytest.raises(AppendOnly):
        AuditEvent.objects.bulk_update([event], ["action"])
    user.delete()
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.actor_name) == ("token.issued", None, "gone")


def test_logins_that_succeed_and_fail(client, admin_user):
    client.post(reverse("login"), {"username": "operator", "password": "wrong"}, REMOTE_ADDR="198.18.0.1")
    client.post(reverse("login"), {"username": "operator", "password": "correct-horse-battery"})
    failed, succeeded = AuditEvent.objects.filter(action__startswith="login.").order_by("id")
    assert failed.action == "login.failed" and failed.detail == {"username": "operator"}
    assert failed.actor is None and failed.client_address == "198.18.0.1" and "wrong" not in str(failed.detail)
    assert succeeded.action == "login.succeeded" and succeeded.actor == admin_user


def test_adding_a_node_with_a_key_records_the_node_and_the_credential(admin_user):
    node_services.node_create(name="gpu-2", address="198.18.0.2", port=22, username="ops", key_path="/keys/id",
                              created_by=admin_user)
    assert _actions() == ["credential.created", "node.created"]
    assert set(AuditEvent.objects.exclude(action="role.changed").values_list("actor_name", flat=True)) == {"operator"}


def test_host_keys_fetched_and_accepted_and_a_transport_built_is_no_use_of_the_credential(admin_user, monkeypatch):
    """The credential is recorded as used when a login is made with it (tests/remote/test_connect.py, a real sshd)."""
    from cudaweb.remote import connect

    node = node_services.node_create(name="gpu-3", address="198.18.0.3", port=2222, username="ops",
                                     private_key="not parsed here", created_by=admin_user)
    monkeypatch.setattr(connect.ssh, "fetch_host_key", lambda *a: ("ssh-ed25519", "AAAA", "SHA256:abc"))
    connect.host_key_fetch(node=node)
    node_services.host_key_accept(node=Node.objects.get(id=node.id), user=admin_user)
    transport = transport_for(node, purpose="run 42", on_behalf_of=admin_user)  # built, not connected
    assert transport.host_key == ("ssh-ed25519", "AAAA")
    assert _actions()[-2:] == ["host_key.fetched", "host_key.accepted"]
    assert not AuditEvent.objects.filter(action="credential.used").exists()


def test_validation_requests_single_and_bulk_but_not_scheduled(admin_user):
    nodes = [Node.objects.create(name="n%d" % i, transport=Node.Transport.LOCAL) for i in range(3)]
    runs_request(nodes=nodes[:1], mode="quick", requested_by=admin_user, trigger="manual")
    runs_request(nodes=nodes, mode="standard", requested_by=admin_user, trigger="bulk")
    runs_request(nodes=nodes, mode="quick", trigger="scheduled")
    single, bulk = AuditEvent.objects.exclude(action="role.changed").order_by("id")
    assert single.action == "validation.requested" and single.object_repr == "n0" and single.detail["queued"] == 1
    assert bulk.action == "validation.bulk_requested"
    assert (bulk.detail["nodes"], bulk.detail["queued"], bulk.detail["already_live"]) == (3, 2, 1)


def test_acceptance_quarantine_schedules_and_network_tests(admin_user, monkeypatch,
                                                           django_capture_on_commit_callbacks):
    from cudaweb.network.tasks import run_network_test

    monkeypatch.setattr(run_network_test, "apply_async", lambda *a, **k: None)  # queued: recorded after it
    node = Node.objects.create(name="h200-a", transport=Node.Transport.LOCAL)
    acceptance_decide(node=node, run=stored_run(node, real_report()), decision="quarantined", user=admin_user)
    acceptance_decide(node=node, run=stored_run(node, real_report()), decision="accepted", user=admin_user)
    schedule = schedules.schedule_create(every_hours=6, mode="quick", node=node)
    schedules.schedule_delete(schedule_id=schedule.id)
    other = Node.objects.create(name="h200-b", transport=Node.Transport.LOCAL)
    with django_capture_on_commit_callbacks(execute=True):
        network_test_request(nodes=[node, other], requested_by=admin_user)
    assert _actions() == ["node.quarantined", "node.accepted", "schedule.created", "schedule.deleted",
                          "network_test.requested"]
    deleted = AuditEvent.objects.get(action="schedule.deleted")
    assert deleted.object_id == str(schedule.id) and "h200-a" in deleted.object_repr


def test_changes_in_the_admin_are_recorded(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "", "pw-for-tests")
    client.force_login(root)
    client.post(reverse("admin:drift_driftthreshold_add"), {"metric": "nccl_busbw_gbs", "threshold_pct": 5})
    node = Node.objects.create(name="old", transport=Node.Transport.LOCAL)
    client.post(reverse("admin:nodes_node_delete", args=[node.id]), {"post": "yes"})
    assert _actions()[-2:] == ["threshold.created", "node.deleted"]
    gone = AuditEvent.objects.get(action="node.deleted")
    assert (gone.actor_name, gone.object_repr, gone.object_id) == ("root", "old", str(node.id))


def test_every_audited_admin_action_is_known():
    for model_admin in admin.site._registry.values():
        if isinstance(model_admin, audit.AuditedAdmin):
            for verb in ("created", "changed", "deleted"):
                assert "%s.%s" % (model_admin.audit_name, verb) in audit.ACTIONS


def test_the_audit_log_is_read_only_in_the_admin(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "", "pw-for-tests"))
    event = audit.record("token.issued")
    assert client.get(reverse("admin:accounts_auditevent_add")).status_code == 403
    assert client.post(reverse("admin:accounts_auditevent_delete", args=[event.id]), {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(id=event.id).exists()


def test_making_someone_superuser_is_recorded(django_user_model):
    user = django_user_model.objects.create_user("promoted")
    user.is_superuser = True
    user.save()
    event = AuditEvent.objects.filter(action="user.flags_changed").latest("id")
    assert event.object_repr == "promoted" and event.detail["is_superuser"] is True
    user.first_name = "P"
    user.save()  # no flag changed: nothing recorded
    assert AuditEvent.objects.filter(action="user.flags_changed").count() == 1
