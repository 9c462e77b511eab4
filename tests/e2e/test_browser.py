"""A real headless Chromium (Debian's, driven by Playwright; nothing downloaded) through the one-click flow:
log in, add a node, accept its host key, validate it, watch the progress update without a reload, see the
result and its drift panel; accept the node, validate again and see the run judged against that baseline."""

import os
import sys

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser_page():
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: make test installs it (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM reads are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.set_default_timeout(30_000)
        yield page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


SLOW_HOST = """#!{python}
# A slower host: the real interpreter, its progress lines (stderr) released 0.25 s apart, so the page is
# seen while the run is live whatever the speed of this machine.
import subprocess, sys, time
child = subprocess.Popen([{python!r}] + sys.argv[1:], stderr=subprocess.PIPE)
for line in child.stderr:
    sys.stderr.buffer.write(line)
    sys.stderr.flush()
    time.sleep(0.25)
sys.exit(child.wait())
"""


def _slow_python(tmp_path):
    path = tmp_path / "slow-python"
    path.write_text(SLOW_HOST.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def _wait_live_then_done(page):
    """Mark the document, wait for progress lines and then the end, all without the page reloading."""
    page.evaluate("window.__sameDocument = 'yes'")
    page.wait_for_selector("#run-progress li:has-text('host.system')", timeout=120_000)
    page.wait_for_selector("[data-live='0']", timeout=180_000)
    assert page.evaluate("window.__sameDocument") == "yes", "the page reloaded"


def test_one_click_validation_in_a_real_browser(browser_page, live_server, admin_user, celery_worker, sshd, tmp_path):
    page = browser_page
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "correct-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Fleet')")

    page.click("text=Validate a new node")
    page.fill("input[name=name]", "gpu-b7")
    page.fill("input[name=address]", "127.0.0.1")
    page.fill("input[name=port]", str(sshd.port))
    page.fill("input[name=username]", "root")
    page.fill("textarea[name=private_key]", sshd.private_key())
    page.fill("input[name=python_path]", _slow_python(tmp_path))
    page.fill("input[name=labels]", "rack-9")
    page.click("#add-node")

    page.click("#fetch-host-key")  # a worker reads the key; the step updates by itself when it arrives
    page.wait_for_selector("#fingerprint", timeout=60000)
    assert sshd.fingerprint() in page.inner_text("#fingerprint")
    page.click("#accept-host-key")
    page.click("#start-validation")
    _wait_live_then_done(page)
    assert page.inner_text("#run-status") == "FAILED"
    assert "torch_cpu_build" in page.content()
    assert "no baseline yet" in page.inner_text("#drift-panel")
    page.check("input[name=decision][value=accepted]")
    page.fill("textarea[name=note]", "browser test")
    page.click("#decide")
    page.wait_for_selector("h1:has-text('Accepted into the fleet')")

    node = Node.objects.get(name="gpu-b7")
    assert node.baseline is not None and node.acceptance_records.count() == 1
    page.goto(live_server.url + node.get_absolute_url())
    page.select_option("select[name=mode]", "quick")
    page.click("#validate")
    _wait_live_then_done(page)
    panel = page.inner_text("#drift-panel")
    assert "Compared with the node's baseline" in panel and "check(s) changed status" in panel
    assert ValidationRun.objects.filter(node=node).count() == 2
