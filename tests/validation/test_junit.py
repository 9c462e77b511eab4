"""A run as JUnit XML (cudaweb/validation/junit.py, GET /api/v1/runs/<id>/junit.xml): valid against our own schema of
the common JUnit format (tests/data/junit/junit.xsd, checked with lxml; the schema itself refuses a wrong document),
read back by junitparser as a CI would, and safe against the host's text."""

import copy
from pathlib import Path

import junitparser
import pytest
from lxml import etree

from cudaweb.nodes.models import Node
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.validation.junit import EVIDENCE_CAP, MESSAGE_CAP, run_junit, xml_text
from cudaweb.validation.models import ValidationRun
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db
SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).resolve().parent.parent / "data" / "junit" / "junit.xsd")))


def _valid(document):
    """The parsed document, after the schema accepted it (its own error log otherwise)."""
    tree = etree.fromstring(document)
    assert SCHEMA.validate(tree), [str(error) for error in SCHEMA.error_log][:5]
    return tree


def _failing_report():
    report = real_report()
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(status="fail", summary="GPU 1 fell off the bus (Xid 79)", signatures=["gpu_fallen_off_bus"],
                         evidence="NVRM: Xid (PCI:0000:19:00): 79, GPU has fallen off the bus.")
        elif check["id"] == "cuda.context":
            check.update(status="error", summary="the worker died", evidence="Traceback ...")
        elif check["id"].startswith("train."):
            check.update(status="skip", summary="blocked by driver.gpu_health", blocked_by="driver.gpu_health")
    report["verdict"] = "fail"
    return report


@pytest.fixture
def node():
    return Node.objects.create(name="gpu-0042", transport=Node.Transport.LOCAL)


def test_a_failed_run_is_one_suite_per_layer_one_case_per_check(node):
    report = _failing_report()
    run = stored_run(node, report)
    tree = _valid(run_junit(run=run, root_cause=run_root_cause(run=run)))
    layers = list(dict.fromkeys(check["layer"] for check in sorted(
        report["checks"], key=lambda c: ("L0 L1 L2 L3 L4 L5 L6 L7 advisory".split().index(c["layer"])))))
    assert [suite.get("name") for suite in tree] == layers
    cases = {case.get("name"): case for case in tree.iter("testcase")}
    assert set(cases) == {check["id"] for check in report["checks"]}
    for check in report["checks"]:
        case = cases[check["id"]]
        assert float(case.get("time")) == pytest.approx(check["duration_s"], abs=0.0005)
        assert case.get("classname") == "gpu-0042.%s" % check["layer"]
    failure = cases["driver.gpu_health"].find("failure")
    assert failure.get("message") == "GPU 1 fell off the bus (Xid 79)" and "fallen off the bus" in failure.text
    assert cases["cuda.context"].find("error").get("message") == "the worker died"
    skipped = [name for name, case in cases.items() if case.find("skipped") is not None]
    assert skipped and all(name.startswith("train.") for name in skipped)
    assert all(len(case) == 0 for name, case in cases.items() if name not in skipped and name not in (
        "driver.gpu_health", "cuda.context"))
    for suite in tree:  # the root cause is every suite's first property
        first = suite.find("properties")[0]
        assert first.get("name") == "root_cause"
        assert first.get("value").startswith("driver.gpu_health (L1, fail): GPU 1 fell off the bus (Xid 79)")
        assert int(suite.get("tests")) == len(suite.findall("testcase"))


def test_a_ci_reads_the_counts_back(node, tmp_path):
    report = _failing_report()
    run = stored_run(node, report)
    path = tmp_path / "cudaweb.xml"
    path.write_bytes(run_junit(run=run, root_cause=run_root_cause(run=run)))
    suites = junitparser.JUnitXml.fromfile(str(path))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in totals:
            totals[key] += getattr(suite, key)
    statuses = [check["status"] for check in report["checks"]]
    assert totals == {"tests": len(statuses), "failures": statuses.count("fail") + statuses.count("warn"),
                      "errors": statuses.count("error"), "skipped": statuses.count("skip")}
    failed = [case.name for suite in suites for case in suite
              if any(isinstance(result, junitparser.Failure) for result in case.result)]
    assert failed == ["driver.gpu_health"]


def test_a_passed_run_has_no_failure_and_an_empty_root_cause(node):
    run = stored_run(node, real_report())
    tree = _valid(run_junit(run=run, root_cause=run_root_cause(run=run)))
    assert not list(tree.iter("failure")) and not list(tree.iter("error"))
    assert {suite.find("properties")[0].get("value") for suite in tree} == {""}


def test_a_run_without_checks_is_one_error_so_no_pipeline_reads_it_as_passed(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.UNREACHABLE,
                                       reason="ssh: connection refused")
    tree = _valid(run_junit(run=run, root_cause=run_root_cause(run=run)))
    error = tree.find("testsuite/testcase/error")
    assert error is not None and "connection refused" in error.get("message")
    assert tree.find("testsuite").get("errors") == "1"


def test_host_text_is_escaped_stripped_and_capped(node):
    report = copy.deepcopy(_failing_report())
    # NUL and lone surrogates cannot be stored (PostgreSQL refuses them): test_text_xml_cannot_hold_is_dropped
    hostile = "]]></failure><x a='1'>&amp;\x1b\x08\x7f\ufffe ok"
    for check in report["checks"]:
        if check["id"] == "driver.gpu_health":
            check.update(summary=hostile + "s" * (MESSAGE_CAP * 3), evidence=hostile + "e" * (EVIDENCE_CAP * 20))
    run = stored_run(node, report)
    document = run_junit(run=run, root_cause=run_root_cause(run=run))
    tree = _valid(document)
    failure = next(case for case in tree.iter("testcase") if case.get("name") == "driver.gpu_health").find("failure")
    assert failure.get("message").startswith("]]></failure><x a='1'>&amp;\x7f ok")  # escaped, read back as text
    assert len(failure.get("message")) <= MESSAGE_CAP and len(failure.text) <= EVIDENCE_CAP
    assert len(document) < 200_000


def test_text_xml_cannot_hold_is_dropped():
    assert xml_text("a\x00b\ud800c\U0001f600\x0bd\ufffe") == "abc\U0001f600d"


def _drop(attribute, path):
    def mutate(tree):
        del tree.find(path).attrib[attribute]
    return mutate


def _add_child(path, tag, position=None):
    def mutate(tree):
        parent = tree.find(path)
        child = etree.Element(tag)
        parent.insert(len(parent) if position is None else position, child)
    return mutate


def _set(path, attribute, value):
    def mutate(tree):
        tree.find(path).set(attribute, value)
    return mutate


def _properties_after_cases(tree):
    suite = tree.find("testsuite")
    properties = suite.find("properties")
    suite.remove(properties)
    suite.insert(len(suite) - 2, properties)


@pytest.mark.parametrize("mutate", [
    _drop("tests", "testsuite"), _drop("timestamp", "testsuite"), _drop("hostname", "testsuite"),
    _drop("classname", "testsuite/testcase"), _drop("time", "testsuite/testcase"),
    _drop("type", ".//failure"), _drop("value", "testsuite/properties/property"),
    _add_child("testsuite/testcase", "flaky"), _add_child("testsuite", "teardown"),
    _add_child(".//failure/..", "error", 0),  # two outcomes in one testcase
    _set("testsuite", "failures", "many"), _set("testsuite/testcase", "time", "-1"),
    _set("testsuite", "timestamp", "2025-01-01T00:00:00Z"), _set("testsuite/testcase", "retries", "2"),
    _properties_after_cases,
], ids=["suite-tests", "suite-timestamp", "suite-hostname", "case-classname", "case-time", "failure-type",
        "property-value", "unknown-element-in-case", "unknown-element-in-suite", "two-outcomes", "count-not-a-number",
        "negative-time", "timestamp-with-zone", "unknown-attribute", "properties-out-of-order"])
def test_the_schema_refuses_a_wrong_document(node, mutate):
    """Our schema is strict: the same document that passes fails once one thing in it is wrong."""
    run = stored_run(node, _failing_report())
    tree = _valid(run_junit(run=run, root_cause=run_root_cause(run=run)))
    mutate(tree)
    assert not SCHEMA.validate(tree)
