"""The run page's burn-in plots in a real headless Chromium under the dashboard's Content-Security-Policy: drawn
(each line has a size on the page, coloured by the stylesheet), and nothing refused by the policy."""

import pytest

from cudaweb.nodes.models import Node
from tests.e2e.test_browser import _login, _page, browser  # noqa: F401  (the fixture)
from tests.fleet.test_burnin_pages import burnin_report, flaky_run, store

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_burnin_series_draws_under_the_csp(browser, live_server, admin_user):  # noqa: F811
    node = Node.objects.create(name="h200-burnt", transport=Node.Transport.LOCAL)
    flaky_run(node)
    run = store(node, burnin_report(), mode="burnin", burnin_seconds=300)
    page = _page(browser)
    refused = []
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text
            else None)
    _login(page, live_server.url)
    page.goto(live_server.url + run.get_absolute_url())
    page.wait_for_selector("#stress-series")
    lines = page.locator("#stress-series polyline")
    assert lines.count() == 6
    boxes = {page.eval_on_selector("#stress-series figure:nth-of-type(%d)" % (i + 1), "e => e.id"):
             lines.nth(i).bounding_box() for i in range(lines.count())}
    assert all(box["width"] > 300 for box in boxes.values()), boxes  # drawn across the page
    # 1395 to 1965 MHz (the load's last seconds): the line spans the panel's height; the locked memory clock is flat
    assert boxes["stress-sm_clock_mhz"]["height"] > 80 and boxes["stress-mem_clock_mhz"]["height"] < 10, boxes
    stroke = page.eval_on_selector("#stress-sm_clock_mhz polyline", "e => getComputedStyle(e).stroke")
    assert stroke == "rgb(9, 105, 218)"  # the stylesheet's colour for GPU 0, not the default (none)
    assert page.locator("text=full + burn-in 5 min").count() >= 1
    assert refused == []
