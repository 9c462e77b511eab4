"""The loop's policies page (admins): every LoopPolicy and the defaults, each created, changed and deleted there with
the ladder checked, audited with its settings before and after, and in effect at once (policy_of)."""

import pytest
from django.urls import reverse

from cudaweb.accounts.models import AuditEvent
from cudaweb.health.models import LoopPolicy
from cudaweb.health.policy import policy_of
from tests.conftest import user_with_role
from tests.health.conftest import make_node

pytestmark = pytest.mark.django_db

FORM = {"label": "rack-a", "priority": 10, "mode": "act", "ladder": "revalidate, reset", "auto": "on",
        "interval_s": 30, "repeat_limit": 3, "repeat_window_days": 14}


def test_only_admins_open_or_change_the_policies(client, django_user_model):
    for role in ("viewer", "operator"):
        client.force_login(user_with_role(django_user_model, "p-%s" % role, role))
        assert client.get(reverse("fleet:loop_policies")).status_code == 403
        assert client.post(reverse("fleet:loop_policies"), FORM).status_code == 403
        assert 'id="loop-policies-link"' not in client.get(make_node("gpu-p-%s" % role).get_absolute_url()
                                                           ).content.decode()
    assert not LoopPolicy.objects.exists()
    client.force_login(user_with_role(django_user_model, "p-admin", "admin"))
    page = client.get(reverse("fleet:loop_policies")).content.decode()
    assert 'id="policy-defaults"' in page and 'id="nav-policies"' in page
    assert 'id="loop-policies-link"' in client.get(make_node("gpu-p-admin").get_absolute_url()).content.decode()


def test_a_policy_made_changed_and_deleted_on_the_page_is_audited_and_takes_effect(client, django_user_model,
                                                                                   settings):
    settings.CUDAWEB_LOOP_MODE = "record"
    node = make_node("gpu-pol", labels=("rack-a",))
    admin = user_with_role(django_user_model, "p-admin-2", "admin")
    client.force_login(admin)
    assert policy_of(node).mode == "record" and policy_of(node).label == ""
    client.post(reverse("fleet:loop_policies"), FORM)
    policy = LoopPolicy.objects.get(label="rack-a")
    now = policy_of(node)
    assert (now.label, now.mode, now.ladder, now.auto, now.interval_s, now.repeat_limit) == (
        "rack-a", "act", ("revalidate", "reset"), True, 30, 3)
    created = AuditEvent.objects.get(action="loop_policy.created")
    assert created.actor == admin and created.detail["before"] is None and created.detail["after"]["mode"] == "act"

    client.post(reverse("fleet:loop_policy_edit", args=[policy.id]), dict(FORM, mode="off", ladder="revalidate"))
    assert policy_of(node).mode == "off" and policy_of(node).ladder == ("revalidate",)
    changed = AuditEvent.objects.get(action="loop_policy.changed")
    assert (changed.detail["before"]["mode"], changed.detail["after"]["mode"]) == ("act", "off")
    assert changed.detail["before"]["ladder"] == ["revalidate", "reset"] and changed.detail["fields"] == [
        "ladder", "mode"]
    assert "watched every 30 s" in client.get(node.get_absolute_url()).content.decode()

    client.post(reverse("fleet:loop_policy_delete", args=[policy.id]))
    assert not LoopPolicy.objects.exists() and policy_of(node).mode == "record"
    deleted = AuditEvent.objects.get(action="loop_policy.deleted")
    assert deleted.detail["before"]["label"] == "rack-a" and deleted.detail["after"] is None


def test_a_bad_ladder_or_label_is_refused_and_nothing_is_kept(client, django_user_model, settings):
    settings.CUDAWEB_REBOOT_COMMAND = ""
    client.force_login(user_with_role(django_user_model, "p-admin-3", "admin"))
    for bad in (dict(FORM, ladder="revalidate, reflash"), dict(FORM, ladder="reboot"), dict(FORM, label="a b"),
                dict(FORM, repeat_limit=0), dict(FORM, interval_s=0)):
        page = client.post(reverse("fleet:loop_policies"), bad).content.decode()
        assert 'class="message error"' in page, bad
    assert not LoopPolicy.objects.exists() and not AuditEvent.objects.filter(action__startswith="loop_policy").exists()
    assert "unknown rung(s) reflash" in client.post(reverse("fleet:loop_policies"),
                                                    dict(FORM, ladder="reflash")).content.decode()
