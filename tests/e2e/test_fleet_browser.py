"""The fleet page in a real headless Chromium (issue 29): the bulk form on one row with the burn-in length shown
only in burn-in mode, the overview and rows refreshed by live.js without a reload (and not while a box is ticked),
the node badge, tile and filter saying one word, and axe-core still clean."""

import pytest

from cudaweb.nodes.models import Node
from tests.e2e.test_browser import Accessibility, _login, _page, browser  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_bulk_form_and_self_refreshing_fleet_page(browser, live_server, admin_user):  # noqa: F811
    Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL, status=Node.Status.PASSING)
    page = _page(browser)
    refused = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    _login(page, live_server.url)
    page.goto(live_server.url + "/?sort=name")
    bulk = page.locator("p.filters.bulk")
    assert not page.locator("p.filters.bulk .burnin-length").first.is_visible()  # quick mode: no burn-in length
    page.select_option("#bulk-form select[name=mode]", "burnin")
    assert page.locator("p.filters.bulk .burnin-length").first.is_visible()
    page.select_option("#bulk-form select[name=mode]", "quick")
    box = bulk.bounding_box()
    assert box["height"] < 60, box  # one row (it wrapped onto 4 lines)
    # a node added meanwhile appears without a reload (live.js, every 15 s), in the rows and the tiles
    page.evaluate("window.__sameDocument = 'yes'")
    Node.objects.create(name="gpu-b", transport=Node.Transport.LOCAL, status=Node.Status.FAILING)
    page.wait_for_selector("#fleet-rows b:has-text('gpu-b')", timeout=25_000)
    page.wait_for_selector("#status-counts .what:has-text('Failing')", timeout=25_000)
    assert page.evaluate("window.__sameDocument") == "yes"
    a11y = Accessibility()
    a11y.check(page, "fleet")
    assert a11y.blocking == [], a11y.blocking
    assert refused == []
