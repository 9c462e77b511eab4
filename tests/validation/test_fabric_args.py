"""A run tells its agent the previous run's fabric counters and the IB rate the node should reach."""

import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from cudaweb.nodes.models import FabricExpectation, Node
from cudaweb.validation import services
from cudaweb.validation.fabric import fabric_agent_args
from cudaweb.validation.models import CheckResult, ValidationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="gpu-7", transport=Node.Transport.LOCAL, python_path="python3",
                               labels=["rack-07", "h200"])


def _previous(node):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.WARNED,
                                       finished=timezone.now() - timedelta(hours=2))
    rows = (("fabric.nvlink", "pass", {"nvlink_replay.gpu0": 3, "nvlink_crc_flit.gpu0": 0, "nvlink_active_links": 36}),
            ("fabric.infiniband", "warn", {"ib_symbol_error.mlx5_0_1": 12, "ib_ports": 8}),
            ("fabric.pcie_aer", "skip", {}),
            ("driver.xid", "pass", {"xid_count": 0}))
    for position, (check_id, status, metrics) in enumerate(rows):
        CheckResult.objects.create(run=run, position=position, check_id=check_id, layer="L1", title=check_id,
                                   status=status, summary="", duration_s=0.1, metrics=metrics)
    return run


def test_the_previous_runs_counters_are_passed_without_zeros_totals_or_checks_that_did_not_run(node):
    args = fabric_agent_args(node=node, previous=_previous(node))
    passed = json.loads(args[args.index("--fabric-previous") + 1])
    assert passed == {"fabric.nvlink": {"nvlink_replay.gpu0": 3}, "fabric.infiniband": {"ib_symbol_error.mlx5_0_1": 12}}
    assert "--ib-rate" not in args


def test_the_nodes_own_rate_beats_its_labels_and_among_labels_the_highest_counts(node):
    FabricExpectation.objects.create(label="rack-07", ib_rate_gbps=200)
    FabricExpectation.objects.create(label="h200", ib_rate_gbps=400)
    FabricExpectation.objects.create(label="elsewhere", ib_rate_gbps=800)
    assert fabric_agent_args(node=node, previous=None) == ["--ib-rate", "400"]
    FabricExpectation.objects.create(node=node, ib_rate_gbps=100)
    assert fabric_agent_args(node=node, previous=None) == ["--ib-rate", "100"]


def test_an_expectation_names_a_node_or_a_label_never_both_or_neither(node):
    for fields in ({"node": node, "label": "h200"}, {}):
        with pytest.raises(IntegrityError), transaction.atomic():
            FabricExpectation.objects.create(ib_rate_gbps=400, **fields)


def test_a_run_passes_them_on_the_agents_command_line(node, tmp_path, settings):
    settings.CUDAWEB_AGENT_CACHE_DIR = str(tmp_path / "cache")
    argv_log = tmp_path / "argv"
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > %s\nexit 3\n" % argv_log)
    python.chmod(0o755)
    Node.objects.filter(id=node.id).update(python_path=str(python))
    _previous(node)
    FabricExpectation.objects.create(node=node, ib_rate_gbps=400)
    run = ValidationRun.objects.create(node=node)
    assert services.run_execute(run_id=run.id) == ValidationRun.Status.AGENT_ERROR
    args = argv_log.read_text().splitlines()
    assert json.loads(args[args.index("--fabric-previous") + 1])["fabric.nvlink"] == {"nvlink_replay.gpu0": 3}
    assert args[args.index("--ib-rate") + 1] == "400"
