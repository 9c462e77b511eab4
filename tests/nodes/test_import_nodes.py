"""manage.py import_nodes: CSV, Ansible INI and `scontrol show nodes` (tests/fixtures/import/README.md), idempotent,
all or nothing."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from cudaweb.nodes.models import Node, SSHCredential

pytestmark = pytest.mark.django_db
SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "import"


def run(*args):
    out = StringIO()
    call_command("import_nodes", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def nodes():
    return {n.name: (n.address, n.port, n.username, n.labels, n.transport, n.slurm_name)
            for n in Node.objects.order_by("name")}


def test_csv():
    out = run(SAMPLES / "nodes.csv")
    assert nodes() == {
        "dashboard-host": ("127.0.0.1", 22, "", ["local"], "local", ""),
        "gpu-0041": ("10.4.0.41", 22, "ops", ["rack-04", "h200"], "ssh", ""),
        "gpu-0042": ("gpu-0042.cluster.example.org", 2222, "ops", ["rack-04", "h200"], "ssh", ""),
    }
    assert out.splitlines()[-1] == "3 nodes read as csv: 3 created, 0 updated, 0 unchanged"


def test_ansible_groups_become_labels_and_vars_apply():
    run(SAMPLES / "inventory.ini", "--format", "ansible")
    assert nodes() == {
        "h200-r07-01": ("10.4.7.1", 22, "ops", ["rack07", "h200"], "ssh", ""),
        "h200-r07-02": ("10.4.7.2", 2222, "ops", ["rack07", "h200", "burnin"], "ssh", ""),
        "h200-r08-01": ("10.4.8.1", 22, "admin", ["rack08", "h200"], "ssh", ""),
    }


def test_scontrol_nodes_with_partitions_as_labels():
    run(SAMPLES / "scontrol_show_nodes.txt", "--user", "ops", "--labels", "slurm")
    assert nodes() == {
        "h200-r07-01": ("10.4.7.1", 22, "ops", ["gpu", "batch", "slurm"], "ssh", "h200-r07-01"),
        "h200-r07-02": ("10.4.7.2", 22, "ops", ["gpu", "slurm"], "ssh", "h200-r07-02"),
        "login-01": ("login-01.cluster.example.org", 22, "ops", ["debug", "slurm"], "ssh", "login-01"),
    }


def test_scontrol_one_line_format(tmp_path):
    text = (SAMPLES / "scontrol_show_nodes.txt").read_text()
    one_line = "\n".join(" ".join(line.strip() for line in record.splitlines()) for record in text.split("\n\n"))
    path = tmp_path / "nodes-o.txt"
    path.write_text(one_line)
    run(path, "--user", "ops")
    assert sorted(nodes()) == ["h200-r07-01", "h200-r07-02", "login-01"]


def test_import_again_updates_and_never_duplicates(tmp_path):
    run(SAMPLES / "nodes.csv")
    assert run(SAMPLES / "nodes.csv").splitlines()[-1].endswith("0 created, 0 updated, 3 unchanged")
    changed = tmp_path / "nodes.csv"
    changed.write_text((SAMPLES / "nodes.csv").read_text().replace("10.4.0.41", "10.4.0.141"))
    out = run(changed)
    assert out.splitlines()[-1].endswith("0 created, 1 updated, 2 unchanged") and "updated   gpu-0041" in out
    assert Node.objects.count() == 3 and Node.objects.get(name="gpu-0041").address == "10.4.0.141"


def test_dry_run_changes_nothing():
    out = run(SAMPLES / "inventory.ini", "--dry-run")
    assert "dry run, nothing changed: 3 nodes read as ansible: 3 created" in out and not Node.objects.exists()


def test_a_stored_credential_is_used_by_every_node():
    credential = SSHCredential.objects.create(name="rack key", key_path="/etc/cudaweb/keys/rack")
    run(SAMPLES / "inventory.ini", "--credential", "rack key")
    assert set(Node.objects.values_list("credential", flat=True)) == {credential.id}
    assert SSHCredential.objects.count() == 1  # no per-node copy
    with pytest.raises(CommandError, match="no stored credential named 'nope'"):
        run(SAMPLES / "inventory.ini", "--credential", "nope")


def test_errors_name_their_lines_and_nothing_is_half_imported(tmp_path):
    bad = tmp_path / "nodes.csv"
    bad.write_text("name,address,port,user,labels,transport\n"
                   "gpu-0001,10.0.0.1,22,ops,,ssh\n"
                   "gpu 0002,10.0.0.2,22,ops,,ssh\n"
                   "gpu-0003,10.0.0.3,70000,ops,,ssh\n"
                   "gpu-0004,not an address!,22,ops,,ssh\n"
                   "gpu-0005,10.0.0.5,22,,,ssh\n"
                   "gpu-0001,10.0.0.6,22,ops,,ssh\n")
    with pytest.raises(CommandError) as error:
        run(bad)
    message = str(error.value)
    assert "nothing imported" in message
    for expected in ("line 3 (gpu 0002): 'gpu 0002' is not a node name", "line 4 (gpu-0003): port 70000 is not 1-65535",
                     "line 5 (gpu-0004): 'not an address!' is neither a host name", "line 6 (gpu-0005): no user",
                     "line 7 (gpu-0001): named on line 2 already"):
        assert expected in message
    assert not Node.objects.exists()


def test_a_failure_while_writing_keeps_nothing(monkeypatch):
    from cudaweb.remote.management.commands import import_nodes

    calls = []

    def fail_on_second(**fields):
        calls.append(fields["name"])
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return original(**fields)

    original = import_nodes.ssh_node_create
    monkeypatch.setattr(import_nodes, "ssh_node_create", fail_on_second)
    with pytest.raises(RuntimeError):
        run(SAMPLES / "inventory.ini")
    assert not Node.objects.exists()


def test_an_ansible_line_that_is_not_key_value(tmp_path):
    bad = tmp_path / "hosts"
    bad.write_text("[gpu]\nh1 ansible_host=10.0.0.1 ansible_user=ops\nh2 10.0.0.2\n")
    with pytest.raises(CommandError, match="line 3: '10.0.0.2' is not key=value"):
        run(bad)


def test_a_csv_field_over_128_kib_is_a_line_error_not_a_traceback(tmp_path):
    big = tmp_path / "nodes.csv"
    big.write_text("name,address,port,user,labels,transport\ngpu-1,10.0.0.1,22,ops,%s,ssh\n" % ("x" * 140000))
    with pytest.raises(CommandError, match="line 2: field larger than field limit") as error:
        run(big)
    assert error.value.returncode == 2 and not Node.objects.exists()


def test_a_deep_or_looping_children_chain_is_walked(tmp_path):
    depth = 5000
    lines = ["[g0]", "h1 ansible_host=10.0.0.1 ansible_user=ops"]
    for i in range(depth):
        lines += ["[g%d:children]" % (i + 1), "g%d" % i]
    lines += ["[g0:children]", "g%d" % depth]  # and a loop back to the start
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match="line 2 \\(h1\\): 5001 labels: a node has at most 32"):  # walked to the end
        run(inventory, "--format", "ansible")
    lines[2 * 31 + 2:] = ["[g0:children]", "g31"]  # 32 groups, the loop kept: walked once each, every one a label
    inventory.write_text("\n".join(lines) + "\n")
    run(inventory, "--format", "ansible")
    labels = Node.objects.get(name="h1").labels
    assert len(labels) == 32 and labels[:3] == ["g0", "g1", "g2"]


def test_the_node_rule_applies_to_every_line(tmp_path):
    bad = tmp_path / "nodes.csv"
    bad.write_text('name,address,port,user,labels,transport\n'
                   'gpu-1,ops@10.0.4.42,22,ops,,ssh\n'
                   'gpu-2,$(reboot),22,ops,,ssh\n'
                   'gpu-3,10.0.0.3,22,ops;x,,ssh\n'
                   'gpu-4,10.0.0.4,22,"ops\n",,ssh\n')
    with pytest.raises(CommandError) as error:
        run(bad)
    message = str(error.value)
    for expected in ("line 2 (gpu-1): 'ops@10.0.4.42' is neither", "line 3 (gpu-2): '$(reboot)' is neither",
                     "line 4 (gpu-3): 'ops;x' is not a user name"):
        assert expected in message, message
    assert not Node.objects.exists()


def test_a_newline_in_a_user_name_is_refused(tmp_path):
    from cudaweb.remote.inventory import InventoryError, entry_check

    entry = {"line": 2, "name": "gpu-4", "address": "10.0.0.4", "port": 22, "user": "ops\n", "transport": "ssh"}
    with pytest.raises(InventoryError, match="is not a user name"):
        entry_check(entry)


def test_an_ip_in_brackets_is_stored_without_them(tmp_path):
    csv = tmp_path / "nodes.csv"
    csv.write_text("name,address,port,user,labels,transport\ngpu-1,[127.0.0.1],22,ops,,ssh\n"
                   "gpu-2,[::1],22,ops,,ssh\n")
    run(csv)
    assert {n.name: n.address for n in Node.objects.all()} == {"gpu-1": "127.0.0.1", "gpu-2": "::1"}


@pytest.mark.parametrize("file_name, text, refused", [
    ("nodes.csv", "name,address,user\ngpu-0001,10.0.0.1,ops\n--force,10.0.0.2,ops\n-x,10.0.0.3,ops\n",
     ["line 3 (--force): '--force' is not a node name", "line 4 (-x): '-x' is not a node name"]),
    ("hosts", "[gpu]\ngpu-0001 ansible_host=10.0.0.1 ansible_user=ops\n--force ansible_host=10.0.0.2 "
     "ansible_user=ops\n-x ansible_host=10.0.0.3 ansible_user=ops\n",
     ["line 3 (--force): '--force' is not a node name", "line 4 (-x): '-x' is not a node name"]),
    ("nodes.txt", "NodeName=gpu-0001 NodeAddr=10.0.0.1\n\nNodeName=--force NodeAddr=10.0.0.2\n",
     ["line 3 (--force): '--force' is not a node name"]),
])
def test_an_option_like_name_is_refused_by_name_and_nothing_is_imported(tmp_path, file_name, text, refused):
    """Each option-like name is named with its line and why; the import stays all or nothing (the good line is not
    kept either: fix the file and import again)."""
    path = tmp_path / file_name
    path.write_text(text)
    with pytest.raises(CommandError) as error:
        run(path, "--user", "ops")
    message = str(error.value)
    assert "nothing imported" in message and "a letter or a digit first" in message
    for line in refused:
        assert line in message
    assert "gpu-0001" not in message and not Node.objects.exists()


@pytest.mark.parametrize("file_name, text", [
    ("nodes.csv", "name,address,port,user\ngpu-p1,10.0.0.1,\u00b2,ops\n"),
    ("hosts.ini", "[gpus]\ngpu-p1 ansible_host=10.0.0.1 ansible_port=\u00b2 ansible_user=ops\n"),
])
def test_a_port_of_digits_no_int_reads_is_an_input_error_not_a_crash(tmp_path, file_name, text):
    """"\u00b2".isdigit() is true and int("\u00b2") raises: the port is read from ASCII digits only."""
    path = tmp_path / file_name
    path.write_text(text)
    with pytest.raises(CommandError, match="is not a number"):
        run(path)
    assert not Node.objects.exists()
