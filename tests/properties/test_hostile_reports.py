"""Property: every page, fragment, export and API read of a run built from a random, hostile report answers
without a server error. Each example goes both ways a report can reach the tables: through the worker's parser
(a report it refuses ends AGENT_ERROR naming the field) and stored as it is (rows an older agent or schema left),
with strings where numbers go, evidence no playbook matches, markup, huge fields."""

import copy
import json
import os
import uuid

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings, strategies as st

from cudaweb.api.services import token_issue
from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.reports import ReportError, parse_report
from cudaweb.validation.services import run_finish, run_store_report
from tests.drift.helpers import real_report

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("CUDAWEB_PROPERTY_EXAMPLES", "25"))
REAL = real_report()
HOSTILE_TEXT = ["<script>alert(1)</script>", "<!channel> <http://evil|x>", "{{ 7*7 }}{% now 'Y' %}", "%s%n%(x)s",
                "\u202e\u200b\ufeff", "'; DROP TABLE nodes; --", "../../etc/passwd", "\r\n\t", "", " ",
                "CUDA error: an illegal memory access was encountered", "NVRM: Xid (PCI:0000:18:00): 79"]
text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=200),
                 st.builds(lambda s, n: s * n, st.sampled_from(["x", "é", "<b>", "\n"]), st.integers(1, 30000)))
not_a_number = st.one_of(text, st.none(), st.booleans(), st.lists(st.integers(), max_size=3),
                         st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
anything = st.one_of(not_a_number, st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False, allow_infinity=False))
STATUSES = ["pass", "warn", "fail", "skip", "error"]
LAYERS = ["L0", "L1", "L2", "L3", "L4", "L5", "L6", "advisory"]


@st.composite
def check_edits(draw):
    """What to change in one check of the real report."""
    edit = {}
    for key, value in (("status", st.sampled_from(STATUSES)), ("summary", text), ("evidence", text),
                       ("title", text), ("layer", st.sampled_from(LAYERS + ["L9", ""])),
                       ("signatures", st.lists(st.one_of(text, st.sampled_from(["xid_critical", "oom"])), max_size=4)),
                       ("metrics", st.dictionaries(st.sampled_from(["matmul_bf16_tflops", "h2d_pinned_gbs",
                                                                    "nccl_busbw_gbs", "x"]), anything, max_size=3)),
                       ("blocked_by", st.one_of(st.none(), text, st.sampled_from(["driver.nvidia_smi"])))):
        if draw(st.booleans()):
            edit[key] = draw(value)
    return edit


@st.composite
def hostile_reports(draw):
    report = copy.deepcopy(REAL)
    edits = draw(st.dictionaries(st.integers(0, len(report["checks"]) - 1), check_edits(), max_size=6))
    for index, edit in edits.items():
        report["checks"][index].update(edit)
    for key in draw(st.lists(st.sampled_from(["gpu_count", "gpu_model", "driver_version", "torch", "nccl"]),
                             max_size=3)):
        report["inventory"][key] = draw(anything)
    statuses = {c.get("status") for c in report["checks"]}
    report["verdict"] = draw(st.sampled_from(["fail" if "fail" in statuses else "warn" if "warn" in statuses
                                              else "pass", "pass", "fail", "bogus"]))
    return report


def _holdable(value):
    """What a database can hold at all: no NUL character (PostgreSQL refuses it in text and JSON)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {_holdable(k): _holdable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_holdable(v) for v in value]
    return value


def _stored_as_is(node, report):
    """Rows as a lax older version might have kept them: every column given what it can hold, the JSON untouched."""
    report = _holdable(report)
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="standard")
    CheckResult.objects.bulk_create([
        CheckResult(run=run, position=i, check_id=str(c.get("id"))[:64], layer=str(c.get("layer"))[:10],
                    title=str(c.get("title"))[:200], status=str(c.get("status"))[:8], summary=str(c.get("summary")),
                    duration_s=0.0, metrics=c.get("metrics"), evidence=str(c.get("evidence")),
                    signatures=c.get("signatures"), blocked_by=str(c.get("blocked_by") or "")[:64])
        for i, c in enumerate(report["checks"])])
    verdict = report["verdict"] if report["verdict"] in ("pass", "warn", "fail") else "fail"
    ValidationRun.objects.filter(id=run.id).update(report=report, verdict=verdict,
                                                   agent_version=str(report.get("agent_version"))[:32])
    run_finish(run=run, status={"pass": "PASSED", "warn": "WARNED", "fail": "FAILED"}[verdict],
               reason="agent verdict: %s" % verdict)
    run.refresh_from_db()
    return run


def _through_the_parser(node, report):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="standard")
    try:
        parsed = parse_report(json.dumps(report))
    except ReportError as exc:
        # the schema's, the JSON's or the figures' own refusal (issue 35: every figure finite and within its unit)
        assert str(exc).startswith(("the report does not match schema cudaprobe/1 at ", "the agent's output is not",
                                    "the report's figure ", "check "))
        run_finish(run=run, status=ValidationRun.Status.AGENT_ERROR, reason=str(exc), raw_output=json.dumps(report))
    else:
        run_store_report(run=run, report=parsed)
    run.refresh_from_db()
    assert run.status != ValidationRun.Status.DASHBOARD_ERROR
    return run


def _reads(client, api, run, other, record):
    node = run.node
    urls = [reverse("fleet:node_list"), reverse("fleet:node_list") + "?q=%s&sort=-validated" % node.name[:20],
            node.get_absolute_url(), reverse("fleet:node_onboard", args=[node.id]),
            reverse("fleet:node_onboard", args=[node.id]) + "?fragment=1", run.get_absolute_url(),
            reverse("runs:run_fragment", args=[run.id]), reverse("runs:batch") + "?ids=%s,%s" % (run.id, other.id),
            reverse("runs:batch_fragment") + "?ids=%s" % run.id, reverse("runs:compare", args=[other.id, run.id]),
            reverse("runs:compare", args=[run.id, other.id]), reverse("fleet:acceptance_detail", args=[record.id]),
            reverse("fleet:acceptance_json", args=[record.id]), "/audit/", "/audit/export.csv", "/audit/export.json"]
    urls += [reverse("runs:check_evidence", args=[run.id, c.check_id]) for c in run.checks.all()[:3]
             if "/" not in c.check_id and c.check_id]
    for url in urls:
        response = client.get(url)
        assert response.status_code < 500, url
        if response.streaming:
            b"".join(response.streaming_content)
    for url in ("/api/v1/runs/%s/" % run.id, "/api/v1/nodes/", "/api/v1/nodes/%s/" % node.name, "/metrics"):
        response = api.get(url)
        assert response.status_code < 500, url


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(report=hostile_reports())
def test_no_page_fragment_export_or_api_read_fails_for_a_hostile_report(admin_user, report):
    client = Client()
    client.force_login(admin_user)
    token = token_issue(user=admin_user, name="p-%s" % uuid.uuid4().hex[:8])[1]
    api = Client(HTTP_AUTHORIZATION="Bearer %s" % token)
    node = Node.objects.create(name="n-%s" % uuid.uuid4().hex[:12], transport=Node.Transport.LOCAL)
    parsed = _through_the_parser(node, report)
    kept = _stored_as_is(node, report)
    record = acceptance_decide(node=node, run=kept, decision="quarantined", user=admin_user, note=report["checks"][0]
                               .get("summary") if isinstance(report["checks"][0].get("summary"), str) else "")
    for run in (parsed, kept):
        _reads(client, api, run, parsed if run is kept else kept, record)
