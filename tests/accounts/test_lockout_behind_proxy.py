"""Login lockouts per client behind the proxy: under CUDAWEB_HTTPS=1 django-axes keys a lockout on the address our
proxy saw (X-Forwarded-For), not on the proxy's own, so one client cannot lock an account for every client."""

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from cudaweb.accounts import audit

pytestmark = pytest.mark.django_db
PROXY = "10.0.0.2"  # every request reaches the web server from the proxy


@pytest.fixture
def behind_proxy(settings, django_user_model):
    settings.CUDAWEB_HTTPS = True  # the flag the address rule reads (the module-level TLS settings are not needed)
    settings.CUDAWEB_PROXY_COUNT = 1
    django_user_model.objects.create_user("admin", password="correct-horse-battery")


def login(client, client_ip, password, forwarded=None):
    client.cookies.clear()
    return client.post(reverse("login"), {"username": "admin", "password": password}, REMOTE_ADDR=PROXY,
                       HTTP_X_FORWARDED_FOR=forwarded or client_ip)


def test_axes_takes_the_address_from_our_rule():
    assert django_settings.AXES_CLIENT_IP_CALLABLE == "cudaweb.accounts.audit.client_address"


def test_one_client_locked_out_leaves_the_account_open_to_the_others(client, behind_proxy):
    for _ in range(10):
        login(client, "203.0.113.5", "wrong")
    assert login(client, "203.0.113.5", "correct-horse-battery").status_code == 429  # locked, even so
    answer = login(client, "198.51.100.7", "correct-horse-battery")
    assert answer.status_code == 302 and client.session["_auth_user_id"]


def test_a_client_cannot_dodge_its_lockout_by_claiming_another_address(client, behind_proxy):
    for n in range(10):  # what the client puts first changes; what our proxy appends does not
        login(client, "", "wrong", forwarded="192.0.2.%d, 203.0.113.5" % n)
    assert login(client, "", "correct-horse-battery", forwarded="192.0.2.99, 203.0.113.5").status_code == 429


def test_the_rule_counts_proxies_from_the_right_and_refuses_what_is_no_address(rf, settings):
    settings.CUDAWEB_HTTPS, settings.CUDAWEB_PROXY_COUNT = True, 2
    request = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.5, 10.0.0.9")
    assert audit.client_address(request) == "203.0.113.5"  # the outer proxy's view; the inner one's is 10.0.0.9
    for forwarded in ("not-an-ip, 10.0.0.9", "203.0.113.5", "", "<script>, x"):  # garbage, or too few entries
        request = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
        assert audit.client_address(request) == PROXY, forwarded
    settings.CUDAWEB_HTTPS = False
    assert audit.client_address(rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")) == PROXY


def test_without_the_proxy_setting_the_forwarded_header_is_ignored(client, settings, django_user_model):
    settings.CUDAWEB_HTTPS = False
    django_user_model.objects.create_user("admin", password="correct-horse-battery")
    for n in range(10):
        login(client, "203.0.113.%d" % n, "wrong")  # a client making up addresses is still one client
    assert login(client, "198.51.100.7", "correct-horse-battery").status_code == 429
