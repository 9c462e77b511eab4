"""Output from a host is bytes until proven a report: NUL and lone surrogates never reach a column PostgreSQL would
refuse them in, and binary output ends AGENT_ERROR with a short escaped sample kept."""

import json
from pathlib import Path

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation import hostoutput, services
from cudaweb.validation.models import ValidationRun

REPORT = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "h200-gpus2-standard.json"
Status = ValidationRun.Status


def test_nul_and_lone_surrogates_are_made_storable_and_text_is_left_alone():
    assert hostoutput.text_for_db("a\x00b\ud800c") == "a\\x00b\ufffdc"
    text = REPORT.read_text()
    assert hostoutput.text_for_db(text) == text and not hostoutput.looks_binary(text)
    cleaned = hostoutput.clean({"k\x00": ["x\x00", 3, {"y": "\udfff"}]})
    assert cleaned == {"k\\x00": ["x\\x00", 3, {"y": "\ufffd"}]}


def test_random_bytes_are_binary_and_their_sample_is_bounded_and_printable():
    noise = Path("/dev/urandom").open("rb").read(1 << 20).decode("utf-8", "replace")
    assert hostoutput.looks_binary(noise)
    sample = hostoutput.binary_sample(noise)
    assert len(sample) <= 6 * hostoutput.SAMPLE_CHARS and "\x00" not in sample
    assert all(c.isprintable() or c in "\n\t" for c in sample)
    coloured_log = "\x1b[31mERROR\x1b[0m NCCL WARN something\n" * 200
    assert not hostoutput.looks_binary(coloured_log)


@pytest.fixture
def node(tmp_path, settings):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    settings.CUDAWEB_REPORT_SPOOL_DIR = str(tmp_path / "spool")
    return Node.objects.create(name="n1", transport=Node.Transport.LOCAL)


def agent(node, tmp_path, script):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    Node.objects.filter(id=node.id).update(python_path=str(python))


@pytest.mark.django_db
def test_an_agent_that_prints_five_megabytes_of_random_bytes_ends_agent_error_with_a_sample(node, tmp_path):
    agent(node, tmp_path, "head -c 5000000 /dev/urandom\nhead -c 20000 /dev/urandom >&2\n")
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == Status.AGENT_ERROR
    run.refresh_from_db()
    assert "binary, not a report" in run.reason and "output truncated" in run.reason
    assert 0 < len(run.raw_output) < 2 * 6 * hostoutput.SAMPLE_CHARS and "\x00" not in run.raw_output
    assert Node.objects.get(id=node.id).status == Node.Status.FAILING


@pytest.mark.django_db
def test_a_report_and_progress_with_nul_characters_are_stored_with_them_escaped(node, tmp_path):
    report = json.loads(REPORT.read_text())
    report["checks"][0]["evidence"] = "before\x00after"
    report["checks"][0]["summary"] = "nul\x00here"
    (tmp_path / "report.json").write_text(json.dumps(report))  # JSON writes NUL as \u0000, as an agent may
    event = json.dumps({"event": "check_finished", "id": "x\x00", "status": "pass", "summary": "s\x00"})
    agent(node, tmp_path, "echo '%s' >&2\ncat %s\n" % (event, tmp_path / "report.json"))
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == Status.PASSED
    run.refresh_from_db()
    first = run.checks.get(position=0)
    assert first.evidence == "before\\x00after" and first.summary == "nul\\x00here"
    assert run.progress[0]["id"] == "x\\x00"
    assert run.report["checks"][0]["summary"] == "nul\\x00here"


@pytest.mark.django_db
def test_a_check_summary_with_a_5000_digit_number_ends_the_run_with_its_verdict(node, tmp_path, settings):
    """Storing a failed run reads numbers out of its failing checks' words (the webhook's root cause: playbook facts,
    the GPU a failure names); a number over Python's 4300-digit limit for int() is no number there, not a
    DASHBOARD_ERROR."""
    settings.CUDAWEB_WEBHOOK_URL = "http://127.0.0.1:9/hooks"  # kept as a delivery; nothing is sent from a test
    report = json.loads(REPORT.read_text())
    check = next(c for c in report["checks"] if c["id"] == "driver.gpu_health")
    check.update(status="fail", summary="GPU %s has fallen off the bus (Xid 79)" % ("9" * 5000))
    report["verdict"] = "fail"
    (tmp_path / "report.json").write_text(json.dumps(report))
    agent(node, tmp_path, "cat %s\n" % (tmp_path / "report.json"))
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == Status.FAILED
    run.refresh_from_db()
    assert run.checks.get(check_id="driver.gpu_health").summary.startswith("GPU 9999")
