"""A report the dashboard cannot keep as it is (a string where a number goes, a field longer than its column,
an infinite number) ends AGENT_ERROR naming the field, never DASHBOARD_ERROR: run through run_execute with a stand-in
interpreter that prints the report, as an agent would."""

import json

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation import services
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.reports import ReportError, parse_report
from tests.drift.helpers import real_report

pytestmark = pytest.mark.django_db


def run_with_output(tmp_path, settings, text):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    (tmp_path / "out.json").write_text(text)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\ncat %s\n" % (tmp_path / "out.json"))
    python.chmod(0o755)
    node = Node.objects.create(name="n1", transport=Node.Transport.LOCAL, python_path=str(python))
    run = ValidationRun.objects.create(node=node)
    services.run_execute(run_id=run.id)
    run.refresh_from_db()
    return run


def edited(**inventory):
    report = real_report()
    report["inventory"].update(inventory)
    return report


def test_a_gpu_count_that_is_a_string_ends_agent_error_naming_the_field(tmp_path, settings):
    run = run_with_output(tmp_path, settings, json.dumps(edited(gpu_count="eight")))
    assert run.status == ValidationRun.Status.AGENT_ERROR
    assert "at inventory/gpu_count: 'eight' is not of type 'integer'" in run.reason
    assert not run.checks.exists() and run.raw_output.startswith("{")


@pytest.mark.parametrize("report, field", [
    (edited(gpu_count=2 ** 40), "inventory/gpu_count"),
    (edited(gpu_model="H" * 201), "inventory/gpu_model"),
    (dict(real_report(), agent_version="1" * 40 + ".0.0"), "agent_version"),
])
def test_a_field_longer_or_larger_than_its_column_is_named(tmp_path, settings, report, field):
    run = run_with_output(tmp_path, settings, json.dumps(report))
    assert run.status == ValidationRun.Status.AGENT_ERROR and "at %s:" % field in run.reason


def test_a_check_id_longer_than_its_column_is_named():
    report = real_report()
    report["checks"][3]["id"] = "a" * 40 + "." + "b" * 40
    with pytest.raises(ReportError, match="at checks/3/id: "):
        parse_report(json.dumps(report))


def test_a_nul_character_is_kept_escaped_and_infinite_numbers_are_named():
    report = real_report()
    report["checks"][1]["summary"] = "bad\x00byte"
    assert parse_report(json.dumps(report))["checks"][1]["summary"] == "bad\\x00byte"  # no database takes a NUL
    text = json.dumps(real_report()).replace('"duration_s": ', '"duration_s": 1e999, "x": ', 1)
    with pytest.raises(ReportError, match="figure check host.system, duration_s is inf, not a finite number"):
        parse_report(text)
    with pytest.raises(ReportError, match="NaN is not a JSON number"):
        parse_report(json.dumps(real_report()).replace('"duration_s": ', '"duration_s": NaN, "x": ', 1))
    with pytest.raises(ReportError, match="not JSON"):
        parse_report("[" * 100000)


def test_a_real_report_still_parses():
    assert parse_report(json.dumps(real_report()))["verdict"] == real_report()["verdict"]
