"""Roles: the groups the migration creates, `role_of`, `role_required`, `manage.py set_role`, and the local admin
of `make run`."""

import io

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.http import HttpResponse
from django.test import RequestFactory

from cudaweb.accounts.models import AuditEvent
from cudaweb.accounts.roles import ROLES, role_of, role_required
from cudaweb.fleet.management.commands.runlocal import Command as RunLocal
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db


def test_the_migration_creates_the_three_groups():
    assert set(Group.objects.filter(name__in=ROLES).values_list("name", flat=True)) == set(ROLES)


def test_role_of_is_the_highest_group(django_user_model):
    user = user_with_role(django_user_model, "u", "viewer")
    user.groups.add(Group.objects.get(name="operator"))
    assert role_of(django_user_model.objects.get(id=user.id)) == "operator"
    assert role_of(AnonymousUser()) is None


def test_role_required_asks_for_a_login_first_then_the_role(django_user_model):
    view = role_required("operator")(lambda request: HttpResponse("ok"))
    request = RequestFactory().get("/nodes/")
    request.user = AnonymousUser()
    assert view(request).status_code == 302 and view(request).url.startswith("/login/?next=/nodes/")
    request.user = user_with_role(django_user_model, "v", "viewer")
    with pytest.raises(PermissionDenied):
        view(request)
    request.user = user_with_role(django_user_model, "a", "admin")
    assert view(request).content == b"ok"
    with pytest.raises(ValueError):
        role_required("root")


def test_set_role_gives_exactly_one_role_and_is_audited(django_user_model):
    user = user_with_role(django_user_model, "bob", "viewer")
    out = io.StringIO()
    call_command("set_role", "bob", "admin", stdout=out)
    assert out.getvalue().strip() == "bob: admin"
    assert list(user.groups.values_list("name", flat=True)) == ["admin"]
    assert list(AuditEvent.objects.filter(action="role.changed", object_id=str(user.id)).order_by("id")
                .values_list("detail", flat=True))[-2:] == [{"removed": "viewer"}, {"added": "admin"}]
    call_command("set_role", "bob", "none", stdout=out)
    assert role_of(django_user_model.objects.get(id=user.id)) is None
    with pytest.raises(CommandError):
        call_command("set_role", "nobody", "viewer")


def test_the_local_admin_of_make_run_is_in_the_admin_group(django_user_model, monkeypatch):
    monkeypatch.setenv("CUDAWEB_ADMIN_PASSWORD", "a-long-test-password")
    command = RunLocal(stdout=io.StringIO())
    command._ensure_admin()
    admin = django_user_model.objects.get(username="admin")
    assert admin.is_superuser and list(admin.groups.values_list("name", flat=True)) == ["admin"]
    admin.groups.clear()
    command._ensure_admin()  # an admin created before roles gets the group
    assert list(admin.groups.values_list("name", flat=True)) == ["admin"]
