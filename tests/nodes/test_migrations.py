"""Moving Node, SSHCredential and HostKey from fleet to nodes keeps every row and every link to them.

The database is taken back to the last state before the move, seeded through the historical models there, and
migrated forward (and back and forward again): the same rows must come out through today's models.
"""

import uuid

import pytest
from django.contrib.contenttypes.models import ContentType  # its table is the same before and after
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE_MOVE = [("fleet", "0002_acceptancerecord_node_attention_node_baseline_and_more"),
               ("validation", "0002_validationrun_changes_validationrun_drift_and_more"),
               ("playbooks", "0001_initial")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _latest():
    executor = MigrationExecutor(connection)
    # every app whose tables the walk back drops (those whose migrations depend on the moved models' apps)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("nodes", "validation", "fleet",
                                                                           "playbooks", "drift", "network", "hooks",
                                                                           "health")]


def _seed(apps):
    User = apps.get_model("auth", "User")
    user = User.objects.create(username="ops-before-move")
    credential = apps.get_model("fleet", "SSHCredential").objects.create(
        name="rack key", private_key_encrypted="gAAAA-opaque", created_by=user)
    node = apps.get_model("fleet", "Node").objects.create(
        id=uuid.uuid4(), name="gpu-0001", address="198.18.0.7", port=2222, username="ops", credential=credential,
        labels=["rack-01"], status="passing", gpu_model="NVIDIA H200", gpu_count=2, metrics={"nccl_busbw_gbs": 325.0})
    apps.get_model("fleet", "HostKey").objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAAC3Nz",
                                                      fingerprint_sha256="SHA256:abc", accepted_by=user,
                                                      accepted_at=timezone.now())
    run = apps.get_model("validation", "ValidationRun").objects.create(
        id=uuid.uuid4(), node=node, status="PASSED", mode="standard", verdict="pass", report={"verdict": "pass"})
    apps.get_model("validation", "CheckResult").objects.create(run=run, position=0, check_id="comm.nccl",
                                                               layer="L5", title="NCCL", status="pass", summary="ok")
    apps.get_model("fleet", "Node").objects.filter(id=node.id).update(last_run=run, baseline=run)
    record = apps.get_model("fleet", "AcceptanceRecord").objects.create(
        id=uuid.uuid4(), node=node, run=run, decision="accepted", decided_by=user, decided_at=timezone.now(),
        evidence={"report": {"verdict": "pass"}}, digest="0" * 64)
    apps.get_model("playbooks", "PlaybookVote").objects.create(run=run, playbook_id="oom", user=user, helped=True)
    return node.id, run.id, record.id


def _assert_kept(apps, node_id, run_id, record_id):
    Node = apps.get_model("nodes", "Node")
    node = Node.objects.select_related("credential", "last_run", "baseline").get(id=node_id)
    assert (node.name, node.address, node.port, node.labels, node.status) == (
        "gpu-0001", "198.18.0.7", 2222, ["rack-01"], "passing")
    assert node.credential.name == "rack key" and node.credential.private_key_encrypted == "gAAAA-opaque"
    assert node.last_run_id == run_id and node.baseline_id == run_id
    host_key = apps.get_model("nodes", "HostKey").objects.get(node=node)
    assert host_key.fingerprint_sha256 == "SHA256:abc" and host_key.accepted_by.username == "ops-before-move"
    run = apps.get_model("validation", "ValidationRun").objects.get(id=run_id)
    assert run.node_id == node_id and run.checks.get().check_id == "comm.nccl"
    assert apps.get_model("fleet", "AcceptanceRecord").objects.get(id=record_id).node_id == node_id
    assert Node.objects.filter(runs__playbook_votes__playbook_id="oom").count() == 1
    # New rows still get ids after the renamed tables' old ones (the sequences came along).
    second = apps.get_model("nodes", "SSHCredential").objects.create(name="key %s" % uuid.uuid4())
    assert second.id > node.credential_id


@pytest.mark.django_db(transaction=True)
def test_moving_the_node_models_keeps_every_row_and_link():
    latest = _latest()
    try:
        node_id, run_id, record_id = _seed(_migrate(BEFORE_MOVE))
        _assert_kept(_migrate(latest), node_id, run_id, record_id)
        apps = _migrate(BEFORE_MOVE)  # and back: the rows return to the fleet tables
        assert apps.get_model("fleet", "Node").objects.get(id=node_id).name == "gpu-0001"
        _assert_kept(_migrate(latest), node_id, run_id, record_id)
    finally:
        _migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_content_types_follow_the_moved_models():
    latest = _latest()
    try:
        _migrate(BEFORE_MOVE)
        ContentType.objects.filter(app_label="nodes").delete()
        moved = ContentType.objects.get_or_create(app_label="fleet", model="node")[0].id
        _migrate(latest)
        assert ContentType.objects.get(id=moved).app_label == "nodes"
    finally:
        _migrate(latest)


NAMES_RULE = ("nodes", "0009_node_names_start_with_letter_or_digit")


@pytest.mark.django_db(transaction=True)
def test_a_stored_name_the_rule_now_refuses_is_renamed_and_said(capsys):
    """A name like "--force" was allowed before the rule: the migration renames that node renamed-<id> (nothing a
    scheduler knows), empties a refused Slurm or Kubernetes name (the node's own stands in), keeps the old values in
    the node's attention line and prints them; a good row is left as it was."""
    latest = _latest()
    before = [parent for parent in MigrationExecutor(connection).loader.graph.node_map[NAMES_RULE].parents
              if parent.key[0] == "nodes"]
    try:
        Node = _migrate([before[0].key]).get_model("nodes", "Node")
        forced = Node.objects.create(id=uuid.uuid4(), name="--force", transport="local")
        named = Node.objects.create(id=uuid.uuid4(), name="gpu-0002", slurm_name="-x", kubernetes_name="--force")
        kept = Node.objects.create(id=uuid.uuid4(), name="gpu-0003", slurm_name="h200-r07-03",
                                   kubernetes_name="gpu-0003.cluster.example", attention="scheduled run failed")
        Node = _migrate(latest).get_model("nodes", "Node")
        forced, named, kept = (Node.objects.get(id=node.id) for node in (forced, named, kept))
        assert forced.name == "renamed-%s" % forced.id.hex and "name was '--force'" in forced.attention
        assert (named.name, named.slurm_name, named.kubernetes_name) == ("gpu-0002", "", "")
        assert "slurm_name was '-x', kubernetes_name was '--force'" in named.attention
        assert (kept.name, kept.slurm_name, kept.kubernetes_name, kept.attention) == (
            "gpu-0003", "h200-r07-03", "gpu-0003.cluster.example", "scheduled run failed")
        printed = capsys.readouterr().out
        assert "node %s: renamed by a migration" % forced.id in printed and str(kept.id) not in printed
    finally:
        _migrate(latest)
