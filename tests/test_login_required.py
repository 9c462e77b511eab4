"""Every page asks for a login: walk the URL patterns rather than a hand-kept list."""

import uuid

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db


def _patterns(resolver, namespace=None):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.app_name == "admin":
                continue  # Django's admin has its own login
            yield from _patterns(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern) and entry.name not in ("login", "logout"):
            yield ("%s:%s" % (namespace, entry.name)) if namespace else entry.name, entry.pattern


def test_every_page_redirects_anonymous_users_to_login(client):
    names = list(_patterns(get_resolver()))
    assert len(names) >= 8
    for name, pattern in names:
        kwargs = {key: 7 if type(conv).__name__ == "IntConverter" else "oom" if type(conv).__name__ == "SlugConverter"
                  else uuid.uuid4() for key, conv in pattern.converters.items()}
        url = reverse(name, kwargs=kwargs)
        for method in (client.get, client.post):
            response = method(url)
            assert response.status_code == 302, (name, method)
            assert response.url.startswith(reverse("login")), (name, response.url)
