"""Every URL x method x role, walked from the URL conf, against the rule table (cudaweb/fleet/access.py): a new URL
without a rule fails here, and so does a view that does not enforce its rule."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from cudaweb.accounts.roles import ROLES, has_role
from cudaweb.fleet import access
from cudaweb.fleet.services import acceptance_decide
from cudaweb.health import services as health_services
from cudaweb.health.machine import SEND_RMA, Stimulus
from cudaweb.health.models import HealthEvent, LoopPolicy
from cudaweb.network.models import NetworkTest
from cudaweb.nodes.models import Node
from cudaweb.playbooks import library
from cudaweb.validation import schedules
from tests.conftest import user_with_role
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db
OPEN_TO_ALL = ("login", "logout")
WHO = (None, "no-role") + ROLES  # anonymous, a user in no role group, then each role
ALLOWED_ANSWERS = (200, 302, 400, 404, 405)


def _patterns(resolver, namespace=None, exempt=False):
    """(name, pattern, exempt) of every URL: exempt when access.EXEMPT names it or its namespace."""
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.app_name == "admin":
                continue  # Django's admin: staff only, its own login
            yield from _patterns(entry, entry.namespace or namespace, exempt or entry.namespace in access.EXEMPT)
        elif isinstance(entry, URLPattern) and entry.name not in OPEN_TO_ALL:
            name = ("%s:%s" % (namespace, entry.name)) if namespace else entry.name
            yield name, entry.pattern, exempt or name in access.EXEMPT


ALL_URLS = list(_patterns(get_resolver()))
URLS = {name: pattern for name, pattern, exempt in ALL_URLS if not exempt}


@pytest.fixture
def path_kwargs(admin_user):
    """Real objects for every kind of path argument the URL conf has."""
    node = Node.objects.create(name="matrix-node", transport=Node.Transport.LOCAL)
    first, second = stored_run(node, real_report()), stored_run(node, real_report())
    record = acceptance_decide(node=node, run=first, decision="accepted", user=admin_user)
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.MATRIX)
    schedule = schedules.schedule_create(every_hours=6, mode="quick", label="matrix")
    sent = health_services.apply(node, Stimulus(SEND_RMA), by=admin_user.username, actor=admin_user)
    bundle = health_services.bundle_attach(transition=sent, name="evidence-matrix.zip", data=b"PK")
    policy = LoopPolicy.objects.create(label="matrix", mode="record")
    event = HealthEvent.objects.create(node=node, check_id="driver.xid", signature="gpu_fallen_off_bus",
                                       severity="fail", klass="hardware", first_seen=timezone.now(),
                                       last_seen=timezone.now())
    return {"policy_id": policy.id, "event_id": event.id,
            "bundle_id": bundle.id, "node_id": node.id, "run_id": second.id, "run_a": first.id, "run_b": second.id, "record_id": record.id,
            "test_id": test.id, "schedule_id": schedule.id, "playbook_id": next(iter(library.load())),
            "check_id": "driver.xid"}


def test_the_walk_sees_every_area():
    assert {name.split(":")[0] for name in URLS} >= {"fleet", "runs", "playbooks", "network", "audit"}


def test_every_exemption_names_urls_that_exist_and_is_not_also_ruled():
    exempt = {name for name, _, is_exempt in ALL_URLS if is_exempt}
    for key in access.EXEMPT:
        assert key in exempt or any(name.startswith(key + ":") for name in exempt), key
    assert not exempt & set(access.RULES)


def test_every_rule_names_a_url_and_a_role():
    assert set(access.RULES) <= set(URLS), "rules for URLs that no longer exist"
    for name, rule in access.RULES.items():
        assert rule and set(rule) <= {"GET", "POST"} and set(rule.values()) <= set(ROLES), name


def test_every_url_has_a_rule():
    assert sorted(set(URLS) - set(access.RULES)) == [], "add these URLs to cudaweb/fleet/access.py RULES"


def test_every_url_method_and_role(path_kwargs, client, django_user_model):
    """Anonymous -> the login page; a user without the role -> 403; with it -> the view answers (not 403)."""
    users = {who: None if who is None else user_with_role(django_user_model, "matrix-%s" % who,
                                                         None if who == "no-role" else who) for who in WHO}
    wrong = []
    for name, pattern in sorted(URLS.items()):
        missing = set(pattern.converters) - set(path_kwargs)
        assert not missing, "make an object for the path argument(s) %s in path_kwargs" % missing
        url = reverse(name, kwargs={key: path_kwargs[key] for key in pattern.converters})
        for method in ("GET", "POST"):
            needed = access.role_needed(name, method)
            for who, user in users.items():
                client.logout()
                if user is not None:
                    client.force_login(user)
                response = getattr(client, method.lower())(url)
                to_login = response.status_code == 302 and response.url.startswith(reverse("login"))
                if user is None:
                    ok = to_login
                elif needed is not None and has_role(user, needed):
                    ok = response.status_code in ALLOWED_ANSWERS and not to_login
                else:
                    ok = response.status_code == 403
                if not ok:
                    wrong.append("%s %s as %s: %s (needs %s)" % (method, name, who, response.status_code, needed))
    assert wrong == []


def test_roles_rank_and_superusers_are_admins(django_user_model):
    viewer = user_with_role(django_user_model, "v", "viewer")
    operator = user_with_role(django_user_model, "o", "operator")
    root = django_user_model.objects.create_superuser("root", "", "pw-for-tests")
    assert has_role(operator, "viewer") and has_role(operator, "operator") and not has_role(operator, "admin")
    assert has_role(viewer, "viewer") and not has_role(viewer, "operator")
    assert has_role(root, "admin") and not has_role(AnonymousUser(), "viewer")
    assert not has_role(user_with_role(django_user_model, "nobody", None), "viewer")


def test_a_method_without_its_own_rule_needs_the_lowest_role():
    assert access.role_needed("fleet:node_validate", "GET") == "operator"  # then 405 from the view
    assert access.role_needed("runs:schedules", "HEAD") == "viewer"
    assert access.role_needed("no:such-url", "GET") is None


def test_pages_show_only_the_buttons_a_role_can_use(client, django_user_model):
    node = Node.objects.create(name="gpu-1", transport=Node.Transport.SSH, address="198.18.0.1", username="ops")
    stored_run(node, real_report())
    seen = {}
    for role in ROLES:
        client.force_login(user_with_role(django_user_model, "ui-%s" % role, role))
        seen[role] = client.get(node.get_absolute_url()).content.decode() + \
            client.get(reverse("fleet:node_list")).content.decode()
    assert 'id="validate"' not in seen["viewer"] and 'id="bulk-validate"' not in seen["viewer"]
    assert 'id="validate"' in seen["operator"] and 'id="bulk-validate"' in seen["operator"]
    assert 'id="fetch-host-key"' not in seen["operator"] and 'id="fetch-host-key"' in seen["admin"]
    assert "Validate a new node" not in seen["operator"] and "Validate a new node" in seen["admin"]


def test_a_user_without_a_role_logs_in_and_is_told_why_nothing_opens(client, django_user_model):
    user_with_role(django_user_model, "newcomer", None, password="correct-horse-battery")
    response = client.post(reverse("login"), {"username": "newcomer", "password": "correct-horse-battery"},
                           follow=True)
    assert response.status_code == 403
    assert "manage.py set_role newcomer" in response.content.decode()
