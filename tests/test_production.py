"""Production settings: CUDAWEB_HTTPS satisfies `check --deploy`, the Content-Security-Policy allows no inline
script or style (and the templates need none), and django-axes locks a user name + address out after 10 failures."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

REPO = Path(__file__).resolve().parent.parent


def check_deploy(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAWEB_", "DJANGO_"))}
    env.update(DJANGO_SETTINGS_MODULE="cudaweb.settings", SECRET_KEY=secrets.token_urlsafe(48), DEBUG="0",
               CUDAWEB_ALLOWED_HOSTS="cudaweb.example.org", **extra)
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)


def test_check_deploy_reports_no_issues_with_https_on():
    done = check_deploy(CUDAWEB_HTTPS="1", CUDAWEB_TRUSTED_PROXIES="172.18.0.0/16")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_behind_a_proxy_left_unnamed_the_check_says_the_lockout_sees_one_address():
    done = check_deploy(CUDAWEB_HTTPS="1")
    assert done.returncode != 0 and "cudaweb.W001" in done.stderr
    assert "lock that user out for everyone" in done.stderr and "CUDAWEB_TRUSTED_PROXIES" in done.stderr


def test_the_retired_forwarded_for_switch_is_named_when_set():
    done = check_deploy(CUDAWEB_HTTPS="1", CUDAWEB_TRUSTED_PROXIES="10.0.0.2", CUDAWEB_TRUST_X_FORWARDED_FOR="1")
    assert "cudaweb.W002" in done.stderr and "CUDAWEB_TRUST_X_FORWARDED_FOR is no longer read" in done.stderr


def test_a_trusted_proxy_that_is_no_address_stops_the_start():
    done = check_deploy(CUDAWEB_HTTPS="1", CUDAWEB_TRUSTED_PROXIES="proxy.internal")
    assert done.returncode != 0 and "'proxy.internal' is no IP address or network" in done.stderr


def test_without_https_check_deploy_names_what_is_missing():
    done = check_deploy()
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr + done.stdout


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_code(client):
    policy = client.get(reverse("login"))["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"


def test_templates_have_no_inline_script_style_or_handlers():
    offending = []
    for path in sorted((REPO / "templates").rglob("*.html")):
        text = path.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", r"\sstyle=",
                        r"<style", r"\son[a-z]+=", r"javascript:"):
            offending += ["%s: %s" % (path.relative_to(REPO), m.group(0)) for m in re.finditer(pattern, text)]
    assert offending == []


@pytest.mark.django_db
def test_ten_failed_logins_lock_the_user_out_even_with_the_right_password(client, django_user_model, settings):
    assert settings.CUDAWEB_LOGIN_FAILURE_LIMIT == 10
    django_user_model.objects.create_user("ops", password="correct-horse-battery")
    for _ in range(10):
        answer = client.post(reverse("login"), {"username": "ops", "password": "wrong"})
        assert "_auth_user_id" not in client.session
    answer = client.post(reverse("login"), {"username": "ops", "password": "correct-horse-battery"})
    assert answer.status_code == 429 and "_auth_user_id" not in client.session
    # another user from the same address is not locked out
    django_user_model.objects.create_user("other", password="correct-horse-battery")
    answer = client.post(reverse("login"), {"username": "other", "password": "correct-horse-battery"})
    assert answer.status_code == 302 and client.session["_auth_user_id"]


@pytest.mark.django_db
def test_fewer_failures_then_the_right_password_logs_in(client, django_user_model):
    django_user_model.objects.create_user("ops", password="correct-horse-battery")
    for _ in range(9):
        client.post(reverse("login"), {"username": "ops", "password": "wrong"})
    answer = client.post(reverse("login"), {"username": "ops", "password": "correct-horse-battery"})
    assert answer.status_code == 302 and client.session["_auth_user_id"]


def test_compose_publishes_the_web_port_on_loopback_only_by_default():
    """On every interface a client could reach gunicorn past the proxy (and, before CUDAWEB_TRUSTED_PROXIES, write
    its own X-Forwarded-For)."""
    import yaml
    web = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["web"]
    assert web["ports"] == ["${CUDAWEB_BIND:-127.0.0.1}:${CUDAWEB_PORT:-8000}:8000"]
    assert "CUDAWEB_TRUSTED_PROXIES" in yaml.safe_load((REPO / "docker-compose.yml").read_text())["x-app"]["environment"]
