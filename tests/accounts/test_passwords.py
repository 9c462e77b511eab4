"""Passwords: 12 characters or more, not like the user's name nor containing it, not common, not all digits; every
place the project sets one (make run's admin) checks them."""

import io
import re

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from cudaweb.cli import InputError
from cudaweb.fleet.management.commands.runlocal import Command as RunLocal

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("password, refusal", [
    ("Zq8#mK2!pL4", "must contain at least 12 characters"),  # 11 characters
    ("viewer1viewer1", "contains the user name"),  # under Django's similarity ratio, refused all the same
    ("viewer1-pass", "too similar to the username"),
    ("password1234", "too common"),
    ("804215937761", "entirely numeric"),
])
def test_a_password_is_refused_saying_why(django_user_model, password, refusal):
    with pytest.raises(ValidationError, match=refusal):
        validate_password(password, user=django_user_model(username="viewer1"))


@pytest.mark.parametrize("password, refusal", [
    ("Zq8#mK2!pL4", "must contain at least 12 characters"),
    ("adminadmin12", "contains the user name"),
])
def test_make_run_refuses_an_admin_password_too_short_or_holding_the_name(django_user_model, monkeypatch,
                                                                          password, refusal):
    monkeypatch.setenv("CUDAWEB_ADMIN_PASSWORD", password)
    with pytest.raises(InputError, match="CUDAWEB_ADMIN_PASSWORD is refused: .*%s" % refusal) as refused:
        RunLocal(stdout=io.StringIO())._ensure_admin()
    assert refused.value.returncode == 2 and not django_user_model.objects.filter(username="admin").exists()


def test_the_admin_password_make_run_makes_up_passes_the_rules(django_user_model, monkeypatch, tmp_path):
    monkeypatch.delenv("CUDAWEB_ADMIN_PASSWORD", raising=False)
    monkeypatch.setattr("cudaweb.local_state.VAR_DIR", tmp_path)
    notice = RunLocal(stdout=io.StringIO())._ensure_admin()  # printed once the server is up
    password = re.search(r"password: (\S+) \(shown once\)", notice).group(1)
    admin = django_user_model.objects.get(username="admin")
    assert admin.check_password(password)
    validate_password(password, user=admin)
