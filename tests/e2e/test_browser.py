"""A real headless Chromium (Debian's, driven by Playwright; nothing downloaded) walks the dashboard as an operator
does: the fleet, a new node over SSH (host key, a first run that ends without a verdict because the node's Python is
broken, the fix, validate again, the decision), the run, the node (validated again, judged against the baseline the
decision pinned), the network between two nodes (its heatmap refreshing itself), a triaged log and the audit log.
Every page passes axe-core (axe-playwright-python, which carries axe.min.js) with no serious or critical violation,
in the light and the dark scheme, and the main pages are saved as screenshots into docs/screenshots/ (README)."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from django.urls import reverse

from cudaweb.drift.demo import seed
from cudaweb.fleet import access
from cudaweb.nodes.models import Node
from cudaweb.validation.models import CheckResult, ValidationRun
from tests.drift.helpers import REAL, stored_run
from tests.fleet.test_access import URLS, path_kwargs  # noqa: F401 (path_kwargs: a real object per path argument)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parent.parent.parent / "docs" / "screenshots"
BLOCKING = ("serious", "critical")
VIEWPORT = {"width": 1360, "height": 860}
FAULTS_DIR = REAL / "faults"
FAULTS = (("demo-gpu-0003", "memory-hog-gpu0.json"), ("demo-gpu-0009", "p2p-level-in-conf-file.json"),
          ("demo-gpu-0015", "one-nccl-channel.json"), ("demo-gpu-0020", "busy-gpu1.json"))


@pytest.fixture
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: make test installs it (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM reads are still synchronous.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield chromium
        chromium.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def _page(browser, scheme="light"):
    page = browser.new_page(viewport=VIEWPORT, color_scheme=scheme)
    page.set_default_timeout(30_000)
    return page


def _login(page, url):
    page.goto(url + "/login/")
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "correct-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Fleet')")


class Accessibility:
    """axe-core on every page the walk opens; the serious and critical violations, by page, fail the test."""

    def __init__(self):
        from axe_playwright_python.sync_playwright import Axe

        self.axe = Axe()
        self.pages = []
        self.blocking = []

    def check(self, page, name):
        # folded parts (evidence, passes, playbook steps) are checked too
        page.evaluate("document.querySelectorAll('details').forEach(function (d) { d.open = true; })")
        violations = self.axe.run(page).response["violations"]
        self.pages.append(name)
        for violation in violations:
            if violation["impact"] in BLOCKING:
                targets = [node["target"] for node in violation["nodes"]][:3]
                self.blocking.append("%s: %s %s (%s) %s" % (name, violation["impact"], violation["id"],
                                                            violation["help"], targets))
        page.evaluate("document.querySelectorAll('details').forEach(function (d) { d.open = false; })")


def _shot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / ("%s.png" % name)), full_page=True)


BROKEN_THEN_SLOW = """#!/bin/sh
# The node's Python: broken until the operator fixes it (the file {fixed} appears), then the real interpreter
# with its progress lines (stderr) released 0.25 s apart, so the page is seen while the run is live.
if [ ! -e {fixed} ]; then
  echo "{python}: error while loading shared libraries: libpython3.11.so.1.0: cannot open shared object file" >&2
  exit 127
fi
exec {python} {slow} "$@"
"""
SLOW = """import subprocess, sys, time
child = subprocess.Popen([{python!r}] + sys.argv[1:], stderr=subprocess.PIPE)
for line in child.stderr:
    sys.stderr.buffer.write(line)
    sys.stderr.flush()
    time.sleep(0.25)
sys.exit(child.wait())
"""


def _node_python(tmp_path):
    """A Python path for the new node that fails until `fixed` exists."""
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW.format(python=sys.executable))
    fixed = tmp_path / "fixed"
    path = tmp_path / "node-python"
    path.write_text(BROKEN_THEN_SLOW.format(python=sys.executable, slow=slow, fixed=fixed))
    path.chmod(0o755)
    return str(path), fixed


def _wait_live_then_done(page, box):
    """Mark the document, wait for progress lines and then the end, all without the page reloading."""
    page.evaluate("window.__sameDocument = 'yes'")
    page.wait_for_selector("%s #run-progress li:has-text('host.system')" % box, timeout=120_000)
    page.wait_for_selector("%s [data-live='0']" % box, timeout=240_000)
    assert page.evaluate("window.__sameDocument") == "yes", "the page reloaded"


def test_an_operator_walks_the_dashboard_in_a_real_browser(browser, live_server, admin_user, celery_worker, sshd,
                                                           tmp_path):
    seed(nodes=24, runs_per_node=8, seed=7)  # a fleet with history (the agent's real H200 reports) to look at
    for name, fault in FAULTS:  # and a few nodes whose last run is a real recorded fault
        stored_run(Node.objects.get(name=name), json.loads((FAULTS_DIR / fault).read_text()),
                   trigger=ValidationRun.Trigger.SCHEDULED)
    for name, low in (("lab-a", 29711), ("lab-b", 29731), ("lab-c", 29751)):  # nodes on this host, for the network
        Node.objects.create(name=name, transport=Node.Transport.LOCAL, python_path=sys.executable,
                            address="127.0.0.1", labels=["lab"], pair_port_min=low, pair_port_max=low + 9)
    a11y = Accessibility()
    page = _page(browser)
    page.goto(live_server.url + "/login/")
    a11y.check(page, "login")
    _login(page, live_server.url)

    # The fleet: overview, legend, the layer cells
    assert page.inner_text("#status-counts").startswith("27")
    assert "Failing nodes by root cause" in page.inner_text("#fleet-overview")
    assert "every check passed" in page.inner_text("#layer-legend")
    a11y.check(page, "fleet")

    # A new node over SSH: address and key, then its host key
    page.click("text=Validate a new node")
    a11y.check(page, "node_add")
    python_path, fixed = _node_python(tmp_path)
    page.fill("input[name=name]", "gpu-b7")
    page.fill("input[name=address]", "127.0.0.1")
    page.fill("input[name=port]", str(sshd.port))
    page.fill("input[name=username]", "root")
    page.fill("textarea[name=private_key]", sshd.private_key())
    page.fill("input[name=python_path]", python_path)
    page.fill("input[name=labels]", "rack-9")
    page.click("#add-node")
    page.click("#fetch-host-key")  # a worker reads the key; the step updates by itself when it arrives
    page.wait_for_selector("#fingerprint", timeout=60_000)
    assert sshd.fingerprint() in page.inner_text("#fingerprint")
    a11y.check(page, "onboard_host_key")
    page.click("#accept-host-key")

    # The first run ends without a verdict (the node's Python is broken): the step says why and offers a re-run
    page.click("#start-validation")
    page.wait_for_selector("#no-verdict", timeout=120_000)
    assert "exit status 127" in page.inner_text("#no-verdict") and page.is_visible("#what-to-do")
    assert page.query_selector("#decision-form") is None
    a11y.check(page, "onboard_no_verdict")
    fixed.write_text("the operator installed the missing library\n")
    page.click("#validate-again")
    _wait_live_then_done(page, "#onboard-step")
    assert page.inner_text("#run-status") == "FAILED"  # this host has no NVIDIA driver: a verdict, so a decision
    assert "Root cause: driver.nvidia_smi" in page.inner_text("#root-cause")
    # the driver's absence also fails the device-node check: its playbook ("the driver works on the host, but...")
    # is folded as a possible consequence, not stated beside the root cause
    folded = page.inner_text("details.playbook-card")
    assert folded.startswith("May follow from the root cause")
    assert "not compared" in page.inner_text("#drift-panel")  # no baseline, no peers: no green "no drift"
    assert page.is_visible("#failed-run-warning")  # a FAILED run: accepting it needs a reason (issue 29)
    a11y.check(page, "onboard_decide")
    _shot(page, "onboarding")
    page.check("input[name=decision][value=accepted]")
    page.fill("textarea[name=note]", "accepted for CPU work; driver to be installed")
    page.click("#decide")
    page.wait_for_selector("h1:has-text('Accepted into the fleet')")
    a11y.check(page, "acceptance")
    node = Node.objects.get(name="gpu-b7")
    runs = list(node.runs.order_by("created"))
    assert [r.status for r in runs] == ["AGENT_ERROR", "FAILED"]
    assert node.baseline_id == runs[1].id and node.acceptance_records.get().run_id == runs[1].id

    # The run: the root cause card first, then the playbooks, the rest folded; gloo did run: "skip", not counted
    page.goto(live_server.url + runs[1].get_absolute_url())
    assert page.inner_text("#root-cause").startswith("Root cause: driver.nvidia_smi")
    assert page.is_visible("#first-fix")
    page.click("#skips summary")
    gloo = page.inner_text("#skips tr:has-text('comm.gloo')")
    assert "skip" in gloo and "not counted: driver.nvidia_smi failed" in gloo
    page.click("#skips summary")
    a11y.check(page, "run")
    _shot(page, "run")
    # a GPU node's recorded fault (NCCL_P2P_LEVEL in an NCCL conf file): its figures against the H200's
    page.goto(live_server.url + Node.objects.get(name="demo-gpu-0009").last_run.get_absolute_url())
    assert page.inner_text("#root-cause").startswith("Root cause: comm.nccl")
    assert " of " in page.inner_text("#figures") and "TFLOP/s" in page.inner_text("#figures")
    a11y.check(page, "run of a GPU node")
    _shot(page, "run-gpu")

    # The node: validated again from its page, judged against the baseline the decision pinned
    page.goto(live_server.url + node.get_absolute_url())
    page.select_option("select[name=mode]", "quick")
    page.click("#validate")
    _wait_live_then_done(page, "#run-live")
    panel = page.inner_text("#drift-panel")
    assert "Compared with the node's baseline" in panel and "changed status" in panel
    assert ValidationRun.objects.filter(node=node).count() == 3
    page.goto(live_server.url + node.get_absolute_url())
    assert "Root cause" in page.inner_text("#node-facts")
    a11y.check(page, "node")
    # a node with history (and a GPU) for the picture: its charts against the baseline and the peers' band
    page.goto(live_server.url + Node.objects.get(name="demo-gpu-0009").get_absolute_url())
    page.wait_for_selector("#metric-chart")
    a11y.check(page, "node with history")
    _shot(page, "node")

    # The network between the two lab nodes: the heatmap refreshes itself until the test is done
    page.goto(live_server.url + "/network/")
    a11y.check(page, "network_list")
    page.fill("input[name=label]", "lab")
    page.click("button:has-text('Test the network')")
    page.wait_for_selector("#matrix")
    page.evaluate("window.__sameDocument = 'yes'")
    page.wait_for_selector("#network-live [data-live='0']", timeout=240_000)
    assert page.evaluate("window.__sameDocument") == "yes", "the page reloaded"
    matrix = page.inner_text("#matrix")
    assert "µs" in matrix, matrix
    assert "not run: no GPU that torch can use" in page.inner_text("#pairs-card")
    a11y.check(page, "network")
    _shot(page, "network")

    # A log triaged: the confident answer apart, its fix open
    page.goto(live_server.url + "/playbooks/triage/")
    page.fill("textarea[name=text]", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                                     "has a total capacity of 139.81 GiB of which 1.02 GiB is free.\n"
                                     "[rank0]: Watchdog caught collective operation timeout")
    page.click("#triage-form button[type=submit]")
    assert "CUDA out of memory" in page.inner_text("#answers-confident")
    assert page.is_visible("#answers-confident ol.fixes")
    a11y.check(page, "triage")
    _shot(page, "triage")

    # The audit log: what the walk did is in it
    page.click("#nav-audit")
    events = page.inner_text("#audit-events")
    assert "node.accepted" in events and "host_key.accepted" in events and "network_test" in events
    a11y.check(page, "audit")
    _shot(page, "audit")

    # The fleet again, with the new node in it
    page.goto(live_server.url + "/")
    assert "driver.nvidia_smi" in page.inner_text("#by-cause") and "gpu-b7" in page.inner_text("#attention")
    a11y.check(page, "fleet (after)")
    _shot(page, "fleet")

    # The same main pages in the dark scheme (the OS's choice): the same tokens, checked too
    dark = _page(browser, scheme="dark")
    _login(dark, live_server.url)
    a11y.check(dark, "fleet (dark)")
    _shot(dark, "fleet-dark")
    for name, url in (("run (dark)", runs[1].get_absolute_url()), ("node (dark)", node.get_absolute_url()),
                      ("triage (dark)", "/playbooks/triage/"), ("audit (dark)", "/audit/")):
        dark.goto(live_server.url + url)
        a11y.check(dark, name)
    assert a11y.blocking == [], "\n".join(a11y.blocking)
    assert len(a11y.pages) == 21


# Pages the URL conf has that need more than their path's objects to show what they are for
QUERIES = {"runs:batch": lambda kwargs: "?ids=%s,%s" % (kwargs["run_a"], kwargs["run_b"]),
           "runs:compare_pick": lambda kwargs: "?cmp=%s&cmp=%s" % (kwargs["run_a"], kwargs["run_b"])}
# Not a page: Django's own 404 for an unknown address, the local node's edit address (no edit there), an empty filter
PLURAL_PLACEHOLDER = re.compile(r"[A-Za-z]\(s\)")  # "node(s)"; "creation (s)" is a unit, seconds
EXTRA = (("not found", "/no/such/page/"), ("fleet, no match", "/?q=nothing-is-named-like-this"))


def _without(text, quoted):
    for words in quoted:
        text = text.replace(words, "")
    return text


def _pages_of_the_url_conf(path_kwargs, ssh_node):
    """(name, URL) of every page an admin may GET in the URL conf (tests/fleet/test_access.py walks the same), with
    sample objects: a new URL is walked without a change here."""
    for name, pattern in sorted(URLS.items()):
        if "GET" not in access.RULES.get(name, {}):
            continue  # POST only
        kwargs = {key: path_kwargs[key] for key in pattern.converters}
        if name == "fleet:node_edit":
            kwargs["node_id"] = ssh_node.id  # the local node has no edit page (its address is a 404)
        yield name, reverse(name, kwargs=kwargs) + QUERIES.get(name, lambda _: "")(path_kwargs)


def test_every_page_passes_axe_in_the_light_and_the_dark_scheme(browser, live_server, admin_user, path_kwargs):
    """Every page of the URL conf (and the not-found page, an empty filter), light then dark (the OS's choice,
    emulated): no serious or critical axe violation, and no "(s)" where a plural belongs."""
    seed(nodes=4, runs_per_node=3, seed=7)
    ssh_node = Node.objects.create(name="gpu-edit", transport=Node.Transport.SSH, address="198.18.0.77",
                                   username="ops")
    local = Node.objects.get(name="matrix-node")
    pages = list(_pages_of_the_url_conf(path_kwargs, ssh_node)) + list(EXTRA) + [
        ("local node edit (not found)", reverse("fleet:node_edit", args=[local.id]))]
    a11y, skipped, plural = Accessibility(), [], []
    # the agent's own words (a check's summary, "2 GPU(s): NVIDIA H200") are quoted as the report has them
    quoted = sorted({text for summary, evidence in CheckResult.objects.values_list("summary", "evidence")
                     for text in [summary] + (evidence or "").splitlines() if "(s)" in text}, key=len, reverse=True)
    page = _page(browser)
    page.goto(live_server.url + "/login/")
    a11y.check(page, "login")
    _login(page, live_server.url)
    shots = os.environ.get("CUDAWEB_WALK_SCREENSHOTS")
    for name, url in pages:
        answer = page.request.get(live_server.url + url)
        kind = answer.headers.get("content-type", "")
        if not kind.startswith("text/html"):
            skipped.append("%s (%s)" % (name, kind.split(";")[0]))  # a download: a zip, CSV, JSON, evidence text
            continue
        assert answer.status in (200, 404), (name, url, answer.status)
        if "<html" not in answer.text()[:300].lower():
            skipped.append("%s (a live fragment of a page)" % name)  # polled into its page, which is walked
            continue
        page.goto(live_server.url + url)
        if PLURAL_PLACEHOLDER.search(_without(page.inner_text("body"), quoted)):
            plural.append(name)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            a11y.check(page, "%s (%s)" % (name, scheme))
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(shots) / ("%s-%s.png" % (name.replace(":", "-").replace(" ", "_"),
                                                                      scheme))), full_page=True)
        page.emulate_media(color_scheme="light")
    print("walked %d pages, %d axe runs; not pages: %s" % (len(pages) - len(skipped), len(a11y.pages),
                                                          ", ".join(skipped)))
    assert a11y.blocking == [], "\n".join(a11y.blocking)
    assert plural == [], "pages with \"(s)\": %s" % plural
    walked = {name.rsplit(" (", 1)[0] for name in a11y.pages}
    assert {"fleet:node_edit", "runs:batch", "not found", "fleet:node_detail"} <= walked
    assert not {"fleet:events", "fleet:loop_policies"} & set(URLS) or {"fleet:events", "fleet:loop_policies"} <= walked

