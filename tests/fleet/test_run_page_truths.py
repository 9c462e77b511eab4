"""What the run, node, batch and record pages say is true (issue 29): the baseline run says it is the baseline; a
second run is not "the first"; runs of two modes are compared like with like, or the page says the modes differ;
"took" and the waterfall say what each counts; a FAILED run is accepted only with a reason, shown on the record;
a local node's record names this host; an interrupted run and its retry link each
other; a finished run in a batch is not "waiting"; a node whose runs read no GPU does not say "not known until a
run reads them"; an interpreter that cannot start is named once."""

import pytest
from django.urls import reverse

from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node
from cudaweb.remote.transports.base import ExecResult
from cudaweb.validation import services as validation_services
from cudaweb.validation.models import ValidationRun
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="ws", transport=Node.Transport.LOCAL)


def page(client, run):
    return client.get(reverse("runs:run_detail", args=[run.id])).content.decode()


def test_the_baseline_run_says_it_is_the_baseline(operator_client, node, admin_user):
    run = stored_run(node, real_report())
    acceptance_decide(node=node, run=run, decision="accepted", user=admin_user, note="ok")
    node.refresh_from_db()
    assert node.baseline_id == run.id
    text = page(operator_client, run)
    assert "This run is the node's baseline" in text and "no baseline yet" not in text


def test_a_second_run_after_one_without_a_report_is_not_called_the_first(operator_client, node):
    ValidationRun.objects.create(node=node, status=ValidationRun.Status.UNREACHABLE, mode="standard")
    run = stored_run(node, real_report())
    text = page(operator_client, run)
    assert "First run of this node" not in text and "No earlier run of this node has a report" in text


def test_a_quick_then_a_full_run_compare_the_checks_both_ran_and_say_the_modes_differ(operator_client, node):
    stored_run(node, real_report("h200-gpus2-quick.json"), mode="quick")
    full = stored_run(node, real_report("h200-gpus2-full.json"), mode="full")
    text = page(operator_client, full)
    assert "The modes differ (quick then full): only the checks both ran are compared" in text
    quick_ids = {c["id"] for c in real_report("h200-gpus2-quick.json")["checks"]}
    assert all(change["check"] in quick_ids for change in full.changes["checks"])
    again = stored_run(node, real_report("h200-gpus2-full.json"), mode="full")  # like with like when there is one
    assert again.changes["previous"] == str(full.id) and "modes" not in again.changes


def test_took_and_the_waterfall_say_what_each_counts(operator_client, node):
    run = stored_run(node, real_report("h200-gpus1-standard.json"))  # each check's start recorded: it has a waterfall
    from datetime import timedelta
    ValidationRun.objects.filter(id=run.id).update(started=run.created, finished=run.created + timedelta(seconds=42))
    text = page(operator_client, run)
    assert "in all (worker, connection and agent)" in text
    assert 'id="waterfall"' in text
    assert "Where the agent's" in text and "of the run's 42.00 s from a worker's claim to its report stored" in text


def test_a_failed_run_is_accepted_only_with_a_reason_shown_on_the_record(
        operator_client, node, admin_user):
    failed = stored_run(node, scaled(real_report(), statuses={"host.system": "fail"}))
    assert failed.status == ValidationRun.Status.FAILED
    with pytest.raises(ValueError, match="needs a reason"):
        acceptance_decide(node=node, run=failed, decision="accepted", user=admin_user)
    record = acceptance_decide(node=node, run=failed, decision="accepted", user=admin_user,
                               note="RMA open; used for CPU work meanwhile")
    text = operator_client.get(record.get_absolute_url()).content.decode()
    assert "Accepted although its run FAILED. Reason given: RMA open; used for CPU work meanwhile" in text
    assert "this dashboard's own host (local transport, no SSH)" in text and "@127.0.0.1:22" not in text


def test_an_interrupted_run_and_its_retry_link_each_other(operator_client, node):
    lost = ValidationRun.objects.create(node=node, status=ValidationRun.Status.INTERRUPTED, mode="quick")
    again = ValidationRun.objects.create(node=node, status=ValidationRun.Status.PENDING, mode="quick", retry_of=lost)
    assert reverse("runs:run_detail", args=[again.id]) in page(operator_client, lost)
    assert "tried again as" in page(operator_client, lost)
    text = page(operator_client, again)
    assert "The second attempt of" in text and reverse("runs:run_detail", args=[lost.id]) in text


def test_a_finished_run_in_a_batch_is_not_waiting(operator_client, node):
    run = stored_run(node, real_report())
    text = operator_client.get(reverse("runs:batch"), {"ids": str(run.id)}).content.decode()
    assert "waiting" not in text and "ended" in text


def test_a_node_whose_runs_read_no_gpu_says_so(operator_client, node):
    report = real_report()
    report["inventory"]["gpu_count"] = 0
    stored_run(node, report)
    text = operator_client.get(reverse("fleet:node_detail", args=[node.id])).content.decode()
    assert "not known until a run reads them" not in text and "none: the last run with a report found no GPU" in text


def test_an_interpreter_that_cannot_start_is_named_once():
    result = ExecResult(127, "", "timeout: failed to run command '/opt/torch/bin/python': No such file or directory\n")
    reason, kept = validation_services._unparsable(result, "the agent printed nothing on stdout",
                                                   python="/opt/torch/bin/python")
    assert reason == ("the node's Python /opt/torch/bin/python was not found (exit status 127): set the node's "
                      "Python to an interpreter that has torch")
    assert reason.count("/opt/torch/bin/python") == 1
    reason, _ = validation_services._unparsable(ExecResult(127, "", "bash: timeout: command not found\n"), "x",
                                                python="python3")
    assert reason == "the agent could not be started: bash: timeout: command not found (exit status 127)"
