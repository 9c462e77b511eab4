"""A node's DCGM setting (Node.dcgm_level): the worker runs the real agent with --with-dcgm, gives the run DCGM's
budget on top, and the stored report carries DCGM's tests as checks (the stand-in dcgmi prints a DCGM 4.x output
we wrote from its documented shape, tests/fixtures/dcgm)."""

import json
import shlex
import sys

import pytest
from django.conf import settings as django_settings

from agents.cudaprobe.dcgmi import BUDGET_S
from cudaweb.nodes.models import Node
from cudaweb.validation import services
from cudaweb.validation.models import CheckResult, ValidationRun
from tests.agent.harness import REPO, TESTS, Scenario

pytestmark = pytest.mark.django_db
FIXTURE = TESTS / "fixtures" / "dcgm" / "dcgm-4.x-h200x2-r2.json"


def _python_on_a_dcgm_host(tmp_path):
    """An interpreter path for the node: this Python, on a host whose nvidia-smi and dcgmi are the stand-ins."""
    scenario = Scenario(tmp_path / "host")
    env = dict(scenario.env, FAKE_DCGMI_FIXTURE=str(FIXTURE),
               FAKE_DCGMI_CALLS=str(tmp_path / "dcgmi-calls"), CUDAPROBE_BYTECODE_CACHE="off",
               PATH="%s:%s:/usr/bin:/bin" % (TESTS / "fakes" / "dcgm-bin", TESTS / "fakes" / "bin"),
               PYTHONPATH=str(REPO))
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n%s\necho \"$@\" > %s\nexec %s \"$@\"\n" % (
        "\n".join("export %s=%s" % (key, shlex.quote(value)) for key, value in env.items()),
        shlex.quote(str(tmp_path / "argv")), shlex.quote(sys.executable)))
    python.chmod(0o755)
    return python


def test_a_node_with_dcgm_set_runs_it_and_stores_its_tests(tmp_path, settings):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    node = Node.objects.create(name="dcgm-node", transport=Node.Transport.LOCAL, dcgm_level="r2",
                               python_path=str(_python_on_a_dcgm_host(tmp_path)))
    run = ValidationRun.objects.create(node=node, mode="quick")
    services.run_execute(run_id=run.id)
    run.refresh_from_db()
    argv = (tmp_path / "argv").read_text().split()
    assert argv[argv.index("--with-dcgm") + 1] == "r2"
    assert (tmp_path / "dcgmi-calls").read_text().splitlines() == ["diag -r 2 -j"]
    checks = {c.check_id: c for c in CheckResult.objects.filter(run=run, check_id__startswith="dcgm.")}
    software = json.loads(FIXTURE.read_text())["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    assert software["name"] == "software" and software["test_summary"]["status"] == "Fail"
    error_id = software["test_summary"]["warnings"][0]["error_id"]
    assert checks["dcgm.software"].status == "fail" and "DCGM error %d" % error_id in checks["dcgm.software"].evidence
    assert checks["dcgm.memory"].status == "pass" and checks["dcgm.diag"].status == "pass"
    assert run.report["verdict"] == "fail"


def test_the_run_gets_dcgms_budget_on_top_and_no_flag_without_the_setting():
    node = Node.objects.create(name="plain", transport=Node.Transport.LOCAL)
    run = ValidationRun.objects.create(node=node, mode="quick")
    plain = services.task_budget_s(run)
    _, args = services._run_prepare(run_id=run.id)
    assert "--with-dcgm" not in args
    Node.objects.filter(id=node.id).update(dcgm_level="r3")
    run.refresh_from_db()
    assert services.task_budget_s(run) - plain == BUDGET_S[3] * (2 if django_settings.CUDAWEB_RETRY_FIGURES else 1)
    _, args = services._run_prepare(run_id=run.id)
    assert args[args.index("--with-dcgm") + 1] == "r3"
