"""Burn-in mode and flaky-or-hard on the pages: the lengths offered (node, bulk, wizard, schedules), the run page's
series and second attempts, the flaky node flagged (page, API, /metrics), the acceptance record's basis and its RMA
evidence bundle. Reports are the real H200 ones (tests/fakes/replay-python makes the burn-in one)."""

import hashlib
import io
import json
import re
import subprocess
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from prometheus_client.parser import text_string_to_metric_families

from cudaweb.accounts.models import AuditEvent
from cudaweb.api.services import token_issue
from cudaweb.embedded import free_port
from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node
from cudaweb.validation import retries, schedules
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_store_report
from tests.api.conftest import bearer
from tests.conftest import user_with_role
from tests.drift.helpers import real_report

pytestmark = pytest.mark.django_db
FAKES = Path(__file__).resolve().parent.parent / "fakes"


@pytest.fixture
def node():
    return Node.objects.create(name="h200-new", transport=Node.Transport.LOCAL)


def burnin_report(seconds=1800):
    done = subprocess.run([str(FAKES / "replay-python"), "agent.pyz", "--mode", "burnin", "--burnin-seconds",
                           str(seconds), "--json"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def store(node, report, mode="standard", burnin_seconds=None, second=None, created=None):
    """A run stored as the worker stores it; with `second`, after a second attempt of its figures."""
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode=mode,
                                       burnin_seconds=burnin_seconds)
    retry, outcomes = {}, {}
    if second is not None:
        again, blocked = retries.retry_plan(report)
        report, outcomes = retries.merge(report, second, again, blocked)
        retry = {"checks": again, "summary": "second attempt of %d check(s)" % len(again), "report": second,
                 "outcomes": {cid: kind for cid, (kind, _) in outcomes.items()}}
    with TestCase.captureOnCommitCallbacks(execute=True):
        run_store_report(run=run, report=report, retry=retry, outcomes=outcomes)
    if created is not None:
        ValidationRun.objects.filter(id=run.id).update(created=created)
    run.refresh_from_db()
    return run


def flaky_run(node, **kw):
    return store(node, real_report("faults/busy-gpu1.json"), second=real_report("h200-gpus2-standard.json"), **kw)


def test_the_node_page_offers_burnin_lengths_and_passes_the_one_chosen(operator_client, node):
    page = operator_client.get(node.get_absolute_url()).content.decode()
    assert '<option value="burnin">full + burn-in</option>' in page
    for label in ("5 min", "30 min", "2 h", "custom"):
        assert ">%s</option>" % label in page
    url = reverse("fleet:node_validate", args=[node.id])
    operator_client.post(url, {"mode": "burnin", "burnin": "1800"})
    run = ValidationRun.objects.get()
    assert (run.mode, run.burnin_seconds) == ("burnin", 1800)
    ValidationRun.objects.update(status=ValidationRun.Status.PASSED)
    operator_client.post(url, {"mode": "burnin", "burnin": "custom", "burnin_custom_s": "600"})
    assert ValidationRun.objects.filter(burnin_seconds=600, status="PENDING").count() == 1
    ValidationRun.objects.update(status=ValidationRun.Status.PASSED)
    for wrong in ({"burnin": "custom"}, {"burnin": "custom", "burnin_custom_s": "30"}, {"burnin": "99"}):
        response = operator_client.post(url, dict(wrong, mode="burnin"), follow=True)
        assert "Unknown mode or burn-in length" in response.content.decode(), wrong
    assert ValidationRun.objects.count() == 2  # nothing queued for a wrong length
    operator_client.post(url, {"mode": "standard", "burnin": "7200"})
    assert ValidationRun.objects.get(status="PENDING").burnin_seconds is None  # only burn-in mode has a length


def test_bulk_validation_passes_the_burnin_length(operator_client):
    nodes = [Node.objects.create(name="rack-%d" % i, transport="local", labels=["rack"]) for i in range(2)]
    operator_client.post(reverse("fleet:nodes_validate"), {"label": "rack", "mode": "burnin", "burnin": "7200"})
    assert sorted(ValidationRun.objects.values_list("node__name", "mode", "burnin_seconds")) == [
        (n.name, "burnin", 7200) for n in nodes]


def test_the_wizard_offers_full_plus_burnin_before_the_decision(operator_client, node):
    page = operator_client.get(reverse("fleet:node_onboard", args=[node.id])).content.decode()
    assert '<option value="burnin">full + burn-in</option>' in page and 'id="start-validation"' in page
    operator_client.post(reverse("fleet:onboard_validate", args=[node.id]), {"mode": "burnin", "burnin": "300"})
    run = ValidationRun.objects.get()
    assert (run.mode, run.burnin_seconds, run.trigger) == ("burnin", 300, "wizard")
    other = Node.objects.create(name="h200-other", transport=Node.Transport.LOCAL)
    operator_client.post(reverse("fleet:onboard_validate", args=[other.id]))  # no choice made: full, as before
    assert ValidationRun.objects.get(node=other).mode == "full"


def test_at_the_decision_the_wizard_offers_a_burnin_first(operator_client, node):
    full = store(node, real_report("h200-gpus2-full.json"), mode="full")
    ValidationRun.objects.filter(id=full.id).update(trigger="wizard")
    page = operator_client.get(reverse("fleet:node_onboard", args=[node.id])).content.decode()
    assert 'id="decision-form"' in page and 'id="burnin-first"' in page
    operator_client.post(reverse("fleet:onboard_validate", args=[node.id]), {"mode": "burnin", "burnin": "1800"})
    page = operator_client.get(reverse("fleet:node_onboard", args=[node.id])).content.decode()
    assert 'id="decision-form"' not in page and "full + burn-in 30 min" in page  # running; the decision waits
    ValidationRun.objects.filter(status="PENDING").delete()  # as if the worker took it and ran it:
    burnin_run = store(node, burnin_report(), mode="burnin", burnin_seconds=1800)
    ValidationRun.objects.filter(id=burnin_run.id).update(trigger="wizard")
    page = operator_client.get(reverse("fleet:node_onboard", args=[node.id])).content.decode()
    assert 'name="run" value="%s"' % burnin_run.id in page and 'id="burnin-first"' not in page


def test_a_schedule_can_run_burnin_with_its_length(operator_client, node):
    Node.objects.filter(id=node.id).update(labels=["nightly"])
    response = operator_client.post(reverse("runs:schedules"), {"label": "nightly", "every_hours": "24",
                                                               "mode": "burnin", "burnin": "1800"})
    assert response.status_code == 302
    task = PeriodicTask.objects.get(task=schedules.TASK)
    assert json.loads(task.kwargs) == {"label": "nightly", "mode": "burnin", "burnin_seconds": 1800}
    assert "full + burn-in 30 min" in task.name
    (run,) = schedules.revalidate(**json.loads(task.kwargs))
    assert (run.mode, run.burnin_seconds, run.trigger) == ("burnin", 1800, "scheduled")


def test_the_run_page_plots_the_burnin_series_without_script_or_style(operator_client, node):
    run = store(node, burnin_report(), mode="burnin", burnin_seconds=1800)
    page = operator_client.get(run.get_absolute_url()).content.decode()
    section = page[page.index('id="stress-series"'):page.index("</section>", page.index('id="stress-series"'))]
    # SM and memory clocks, power, GPU and memory temperature, throughput: the real healthy H200's 300 s
    assert section.count("<polyline") == 6
    assert "151 samples over 300.0 s, 1 GPU" in section
    assert "Throttle reasons seen: SW power cap." in section  # a healthy H200 at its power limit: the only one
    assert "SM clock (MHz): GPU 0 median 1425" in section and "Power (W): GPU 0 median 692" in section
    assert "limit 700" in section
    assert 'class="stress-limit"' in section
    assert "style=" not in section and "<script" not in section
    points = re.search(r'<polyline class="stress-line gpu-0" fill="none" points="([^"]+)"', section).group(1)
    assert all(0 <= float(x) <= 600 and 0 <= float(y) <= 110 for x, y in (p.split(",") for p in points.split()))


def test_the_fleet_page_shows_the_stress_layer_of_a_burnin(operator_client, node):
    store(node, real_report("burnin/faults/busy-during-burnin.json"), mode="burnin", burnin_seconds=300)
    node.refresh_from_db()
    assert node.layer_status["L7"] == "warn" and node.layer_status["L4"] == "pass"  # a recording of L0-L4 + L7
    page = operator_client.get(reverse("fleet:node_list")).content.decode()
    assert '<th class="layer">L7</th>' in page and 'title="L7: warn"' in page and '<option value="L7"' in page


def test_the_run_page_shows_both_attempts_of_a_flaky_check(operator_client, node):
    run = flaky_run(node)
    page = operator_client.get(run.get_absolute_url()).content.decode()
    section = page[page.index('id="retries"'):page.index("</section>", page.index('id="retries"'))]
    assert section.count("flaky (warned, then passed)") == 6
    assert "GPU 1 was busy during the matmul measurement" in section  # the first attempt's own words
    assert run.status == ValidationRun.Status.WARNED  # the state readings still warn; no figure does


def test_a_node_flaky_in_three_runs_within_seven_days_is_flagged(operator_client, client, node, settings,
                                                                 django_user_model):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:%d/0" % free_port()  # /metrics without a broker
    flaky_run(node, created=timezone.now() - timedelta(days=8))  # outside the window
    for _ in range(2):
        flaky_run(node)
    store(node, real_report("faults/busy-gpu1.json"), second=real_report("faults/busy-gpu1.json"))  # hard: no count
    page = operator_client.get(node.get_absolute_url()).content.decode()
    assert 'id="node-flaky"' in page and "flaky node" not in page and "in 2 runs of the last 7 days" in page
    flaky_run(node)
    page = operator_client.get(node.get_absolute_url()).content.decode()
    assert '<span class="badge tone-warn">flaky node</span>' in page and "in 3 runs of the last 7 days" in page
    token = token_issue(user=user_with_role(django_user_model, "api-viewer", "viewer"), name="test")[1]
    listed = json.loads(client.get("/api/v1/nodes/", **bearer(token)).content)["nodes"]
    assert listed[0]["flaky"] == {"runs": 3, "days": 7, "limit": 3, "flagged": True}
    detail = json.loads(client.get("/api/v1/nodes/h200-new/", **bearer(token)).content)
    assert detail["flaky"]["flagged"] is True
    run = json.loads(client.get("/api/v1/runs/%s/" % detail["runs"][0]["id"], **bearer(token)).content)
    assert run["retry"]["outcomes"]["cuda.matmul"] == "flaky" and "report" not in run["retry"]
    scraped = {(s.name, s.labels.get("node")): s.value for family in text_string_to_metric_families(
        client.get("/metrics", **bearer(token)).content.decode()) for s in family.samples}
    assert scraped[("cudaweb_node_flaky", "h200-new")] == 1.0
    assert scraped[("cudaweb_node_flaky_runs", "h200-new")] == 3.0


def test_the_record_rests_on_burnin_and_exports_an_rma_bundle(operator_client, client, node, admin_user,
                                                              django_user_model):
    flaky_run(node)
    run = store(node, burnin_report(), mode="burnin", burnin_seconds=1800)
    record = acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user, note="clocks sag")
    assert record.evidence["run"]["rests_on"] == "full + burn-in 30 min"
    assert record.evidence["run"]["burnin_seconds"] == 1800
    page = operator_client.get(record.get_absolute_url()).content.decode()
    assert "Rests on a <b>full + burn-in 30 min</b> run" in page and 'id="export-bundle"' in page
    response = operator_client.get(reverse("fleet:acceptance_bundle", args=[record.id]))
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="evidence-h200-new-%s.zip"' % record.id
    bundle = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(bundle.namelist()) == ["MANIFEST.json", "burnin-series.csv", "history.json", "record.json"]
    manifest = json.loads(bundle.read("MANIFEST.json"))
    assert manifest["rests_on"] == "full + burn-in 30 min" and manifest["decision"] == "quarantined"
    for name, digest in manifest["files"].items():
        assert hashlib.sha256(bundle.read(name)).hexdigest() == digest, name
    assert json.loads(bundle.read("record.json"))["digest_sha256"] == record.digest
    series = bundle.read("burnin-series.csv").decode().splitlines()
    assert series[0] == "t,gpu,sm_clock_mhz,mem_clock_mhz,power_w,power_limit_w,temp_c,mem_temp_c,throttle,util,tflops"
    assert len(series) == 152 and series[-1] == "300.0,0,1965,3201,527.8,700.0,51,53,4,0,668.7"  # the load's end
    history = json.loads(bundle.read("history.json"))
    assert [r["mode"] for r in history["runs"]] == ["burnin", "standard"] and history["flaky"]["runs"] == 1
    assert {f["check"] for f in history["runs"][1]["findings"] if f["retry"] == "flaky"} >= {"cuda.matmul"}
    event = AuditEvent.objects.get(action="acceptance.bundle_exported")
    assert event.actor == admin_user and event.detail["record"] == str(record.id)
    client.force_login(user_with_role(django_user_model, "just-a-viewer", "viewer"))
    assert client.get(reverse("fleet:acceptance_bundle", args=[record.id])).status_code == 403
