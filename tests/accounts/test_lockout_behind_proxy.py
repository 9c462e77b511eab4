"""Login lockouts per client behind the proxy: django-axes keys a lockout on the address our proxy saw
(X-Forwarded-For), not on the proxy's own, so one client cannot lock an account for every client; the header is
believed only from a proxy named in CUDAWEB_TRUSTED_PROXIES, so a client cannot dodge its lockout by making one up.
Failures from many addresses together lock the user name for every address, at a higher count."""

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from cudaweb.accounts import audit

pytestmark = pytest.mark.django_db
PROXY = "10.0.0.2"  # every request reaches the web server from the proxy


@pytest.fixture
def behind_proxy(settings, django_user_model):
    settings.CUDAWEB_TRUSTED_PROXIES = ["10.0.0.0/24"]
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


def test_failures_for_one_name_spread_over_many_addresses_lock_the_name_for_every_address(client, behind_proxy):
    limit = django_settings.CUDAWEB_LOGIN_USER_FAILURE_LIMIT
    assert limit == 25 > django_settings.CUDAWEB_LOGIN_FAILURE_LIMIT
    for n in range(limit - 1):  # one failure from each address: no address comes near its own limit
        login(client, "203.0.113.%d" % n, "wrong")
    assert login(client, "198.51.100.7", "correct-horse-battery").status_code == 302  # one short: still open
    for n in range(limit):
        login(client, "192.0.2.%d" % n, "wrong")
    assert login(client, "198.51.100.8", "correct-horse-battery").status_code == 429  # an address never seen, too


def test_a_client_cannot_dodge_its_lockout_by_claiming_another_address(client, behind_proxy):
    for n in range(10):  # what the client puts first changes; what our proxy appends does not
        login(client, "", "wrong", forwarded="192.0.2.%d, 203.0.113.5" % n)
    assert login(client, "", "correct-horse-battery", forwarded="192.0.2.99, 203.0.113.5").status_code == 429


def test_the_rule_follows_the_named_hops_and_refuses_what_is_no_address(rf, settings):
    settings.CUDAWEB_TRUSTED_PROXIES = ["192.0.2.0/24", "10.0.0.0/24"]  # outer, then inner
    request = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="1.1.1.1, 203.0.113.5, 192.0.2.9")
    assert audit.client_address(request) == "203.0.113.5"  # what the outer proxy saw; before it, the client's claim
    for forwarded in ("not-an-ip, 192.0.2.9", "203.0.113.5, 198.51.100.1", "", "<script>, x"):  # wrong hop, garbage
        request = rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
        assert audit.client_address(request) == PROXY, forwarded
    settings.CUDAWEB_TRUSTED_PROXIES = []
    assert audit.client_address(rf.get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.5")) == PROXY


@pytest.mark.parametrize("https", [True, False])
def test_a_client_that_is_no_named_proxy_cannot_dodge_the_lockout_with_a_new_header_each_time(
        client, settings, django_user_model, https):
    """The issue's attack: 14 failures with a new X-Forwarded-For each, straight to the web server (compose
    published it on every interface), then the right password."""
    settings.CUDAWEB_HTTPS = https  # what trusted the header before, whoever sent it
    settings.CUDAWEB_TRUSTED_PROXIES = ["10.0.0.2"]
    django_user_model.objects.create_user("admin", password="correct-horse-battery")
    for n in range(14):
        client.cookies.clear()
        client.post(reverse("login"), {"username": "admin", "password": "wrong"}, REMOTE_ADDR="198.51.100.50",
                    HTTP_X_FORWARDED_FOR="203.0.113.%d" % n, secure=https)
    client.cookies.clear()
    answer = client.post(reverse("login"), {"username": "admin", "password": "correct-horse-battery"},
                         REMOTE_ADDR="198.51.100.50", HTTP_X_FORWARDED_FOR="203.0.113.99", secure=https)
    assert answer.status_code == 429
    from cudaweb.accounts.models import AuditEvent
    seen = set(AuditEvent.objects.filter(action="login.failed").values_list("client_address", flat=True))
    assert seen == {"198.51.100.50"}  # the forged addresses are not in the audit log


def test_without_the_proxy_setting_the_forwarded_header_is_ignored(client, settings, django_user_model):
    settings.CUDAWEB_TRUSTED_PROXIES = []
    django_user_model.objects.create_user("admin", password="correct-horse-battery")
    for n in range(10):
        login(client, "203.0.113.%d" % n, "wrong")  # a client making up addresses is still one client
    assert login(client, "198.51.100.7", "correct-horse-battery").status_code == 429
