"""Not found and server error pages in the site's layout: the navigation when logged in, a way back, axe-clean
markup (a lang, a title, one h1, a main landmark)."""

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from cudaweb.nodes.models import Node

pytestmark = pytest.mark.django_db


def test_a_missing_page_is_the_sites_not_found_page_with_its_navigation(operator_client):
    response = operator_client.get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert '<html lang="en">' in page and "<title>Not found · cudaweb</title>" in page and "<main>" in page
    assert '<nav aria-label="Main">' in page and page.count("<h1") == 1
    assert "/no/such/page/" in page and 'href="%s"' % reverse("fleet:node_list") in page


def test_the_local_nodes_edit_address_is_the_same_page_not_djangos_bare_one(operator_client):
    local = Node.objects.create(name="this-host", transport=Node.Transport.LOCAL)
    response = operator_client.get(reverse("fleet:node_edit", args=[local.id]))
    assert response.status_code == 404 and '<nav aria-label="Main">' in response.content.decode()


def test_a_missing_page_asks_a_visitor_to_log_in_not_for_navigation(client):
    page = client.get("/no/such/page/").content.decode()
    assert "Not found" in page and '<nav aria-label="Main">' not in page and reverse("login") in page


def test_the_server_error_page_renders_without_a_request_or_a_database():
    page = render_to_string("500.html")  # as django.views.defaults.server_error renders it: no context at all
    assert "<title>Server error · cudaweb</title>" in page and '<html lang="en">' in page and "<main>" in page
