"""Host keys from a file (cudaweb/remote/known_hosts.py and `import_nodes --known-hosts`): a known_hosts file, hashed
names and the `[addr]:port` form included, read by paramiko; ssh-keyscan output accepted only for the fingerprints
the operator gives, others refused by name; @cert-authority refused with why; each key pinned as the page pins it,
accepted by the operator, audited as host_key.accepted; one refusal imports nothing."""

import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import HostKey, Node
from cudaweb.remote import known_hosts
from tests.conftest import user_with_role

pytestmark = pytest.mark.django_db
SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "import"


def _keygen(tmp_path, name, kind="ed25519"):
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    kind, base64 = (tmp_path / (name + ".pub")).read_text().split()[:2]
    fingerprint = subprocess.run(["ssh-keygen", "-lf", str(path) + ".pub"], check=True, capture_output=True,
                                 text=True).stdout.split()[1]
    return kind, base64, fingerprint


@pytest.fixture
def keys(tmp_path):
    """Host keys for the sample CSV's two SSH nodes (gpu-0041 on port 22, gpu-0042 on port 2222)."""
    return {"gpu-0041": _keygen(tmp_path, "k41"), "gpu-0042": _keygen(tmp_path, "k42")}


def _known_hosts(tmp_path, keys, hashed=False):
    path = tmp_path / "known_hosts"
    path.write_text("# ssh-keyscan 10.4.0.41 and gpu-0042.cluster.example.org:2222\n"
                    "10.4.0.41 %s %s\n[gpu-0042.cluster.example.org]:2222 %s %s\n" % (
                        *keys["gpu-0041"][:2], *keys["gpu-0042"][:2]))
    if hashed:  # OpenSSH's own hashing (HashKnownHosts yes): the names are no longer in the file
        subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
        assert all(line.startswith(("#", "|1|")) for line in path.read_text().splitlines())
    return path


def run(*args):
    out = StringIO()
    call_command("import_nodes", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def _pinned():
    return {k.node.name: (k.key_type, k.key_base64, k.fingerprint_sha256, k.accepted)
            for k in HostKey.objects.select_related("node")}


@pytest.mark.parametrize("hashed", [False, True], ids=["plain", "hashed"])
def test_import_pins_each_nodes_key_from_a_known_hosts_file_by_address_and_port(tmp_path, keys, hashed,
                                                                                django_user_model):
    alice = user_with_role(django_user_model, "alice", "admin")
    out = run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys, hashed), "--as", "alice",
              "--python", "/opt/torch/bin/python")
    assert set(Node.objects.filter(transport="ssh").values_list("python_path", flat=True)) == {"/opt/torch/bin/python"}
    assert _pinned() == {name: (kind, base64, fingerprint, True) for name, (kind, base64, fingerprint) in keys.items()}
    assert "host key  gpu-0042 ssh-ed25519 %s (accepted)" % keys["gpu-0042"][2] in out
    assert set(Node.objects.filter(transport="ssh").values_list("status", flat=True)) == {Node.Status.READY}
    accepted = AuditEvent.objects.filter(action="host_key.accepted").order_by("object_repr")
    assert [(e.object_repr, e.actor_name, e.detail["fingerprint"], e.detail["via"]) for e in accepted] == [
        (name, "alice", keys[name][2], "manage.py import_nodes --known-hosts") for name in sorted(keys)]
    assert HostKey.objects.get(node__name="gpu-0041").accepted_by == alice
    # run again: the same keys, nothing new
    assert "(accepted already)" in run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys))
    assert AuditEvent.objects.filter(action="host_key.accepted").count() == 2


def test_keyscan_keys_are_accepted_only_for_the_fingerprints_given_and_others_refused_by_name(tmp_path, keys):
    fingerprints = tmp_path / "fingerprints"
    fingerprints.write_text("# from the image build\n%s\n" % keys["gpu-0041"][2])
    with pytest.raises(CommandError) as refused:
        run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys), "--fingerprints", fingerprints)
    assert refused.value.returncode == 2
    assert "gpu-0042: refused, none of its keys in the file has a fingerprint you gave (ssh-ed25519 %s)" % (
        keys["gpu-0042"][2]) in str(refused.value)
    assert "gpu-0041" not in str(refused.value).split("refused")[1]
    assert Node.objects.count() == 0 and HostKey.objects.count() == 0  # one refusal: nothing imported
    assert not AuditEvent.objects.filter(action="host_key.accepted").exists()
    run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys), "--fingerprints", fingerprints,
        "--fingerprint", keys["gpu-0042"][2])
    assert set(_pinned()) == {"gpu-0041", "gpu-0042"}


def test_a_host_with_several_keys_gets_its_vouched_for_key_the_strongest_first(tmp_path, keys):
    rsa, ecdsa = _keygen(tmp_path, "rsa", "rsa"), _keygen(tmp_path, "ecdsa", "ecdsa")
    text = "10.4.0.41 %s %s\n10.4.0.41 %s %s\n10.4.0.41 %s %s\n" % (*rsa[:2], *ecdsa[:2], *keys["gpu-0041"][:2])
    host_keys = known_hosts.known_hosts_read(text)
    node = Node(name="gpu-0041", address="10.4.0.41", port=22)
    assert known_hosts.node_key_choose(host_keys, node).get_name() == "ssh-ed25519"
    assert known_hosts.node_key_choose(host_keys, node, {rsa[2], ecdsa[2]}).get_name() == ecdsa[0]
    assert known_hosts.node_key_choose(host_keys, node, {rsa[2]}).get_base64() == rsa[1]
    elsewhere = Node(name="gpu-0041", address="10.4.0.41", port=2222)  # another port is another host to SSH
    with pytest.raises(known_hosts.KnownHostsError, match=r"no key for \[10.4.0.41\]:2222"):
        known_hosts.node_key_choose(host_keys, elsewhere)


def test_a_cert_authority_line_is_refused_saying_why(tmp_path, keys):
    path = tmp_path / "known_hosts"
    path.write_text("10.4.0.41 %s %s\n@cert-authority *.cluster.example.org %s %s\n" % (
        *keys["gpu-0041"][:2], *keys["gpu-0042"][:2]))
    with pytest.raises(CommandError) as refused:
        run(SAMPLES / "nodes.csv", "--known-hosts", path)
    assert "line 2: a @cert-authority line" in str(refused.value)
    assert "does not verify host certificates against a CA" in str(refused.value)
    assert Node.objects.count() == 0


def test_a_line_paramiko_cannot_read_is_named_not_skipped():
    with pytest.raises(known_hosts.KnownHostsError, match="line 2: not a host key line"):
        known_hosts.known_hosts_read("# comment\n10.4.0.41 ssh-ed25519 not!base64\n")
    with pytest.raises(known_hosts.KnownHostsError, match="line 1"):
        known_hosts.fingerprints_read("MD5:aa:bb\n")


def test_a_node_with_another_accepted_key_is_refused_and_nothing_imported(tmp_path, keys):
    run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys))
    other = _keygen(tmp_path, "other")
    path = tmp_path / "changed"
    path.write_text("10.4.0.41 %s %s\n[gpu-0042.cluster.example.org]:2222 %s %s\n" % (
        *other[:2], *keys["gpu-0042"][:2]))
    with pytest.raises(CommandError, match="gpu-0041 has another accepted host key"):
        run(SAMPLES / "nodes.csv", "--known-hosts", path, "--labels", "moved")
    assert _pinned()["gpu-0041"][2] == keys["gpu-0041"][2]
    assert "moved" not in Node.objects.get(name="gpu-0042").labels  # rolled back with the refusal


def test_fingerprints_without_a_known_hosts_file_and_a_non_admin_are_usage_errors(tmp_path, keys,
                                                                                  django_user_model):
    with pytest.raises(CommandError, match="give it"):
        run(SAMPLES / "nodes.csv", "--fingerprint", keys["gpu-0041"][2])
    user_with_role(django_user_model, "olga", "operator")
    with pytest.raises(CommandError, match="olga does not have the admin role"):
        run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys), "--as", "olga")
    assert Node.objects.count() == 0


def test_dry_run_names_the_keys_it_would_accept_and_keeps_nothing(tmp_path, keys):
    out = run(SAMPLES / "nodes.csv", "--known-hosts", _known_hosts(tmp_path, keys), "--dry-run")
    assert "host key  gpu-0041 ssh-ed25519 %s (would be accepted)" % keys["gpu-0041"][2] in out
    assert Node.objects.count() == 0 and HostKey.objects.count() == 0


def test_a_key_file_is_stored_once_as_the_named_credential_every_node_logs_in_with(tmp_path, keys,
                                                                                   django_user_model):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True)
    user_with_role(django_user_model, "alice", "admin")
    for _ in range(2):  # the same key under the same name: reused, not stored twice
        run(SAMPLES / "nodes.csv", "--credential", "rack key", "--key-file", tmp_path / "id", "--as", "alice")
    ssh_nodes = Node.objects.filter(transport="ssh").select_related("credential")
    assert {n.credential.name for n in ssh_nodes} == {"rack key"}
    assert ssh_nodes[0].credential.private_key_text() == (tmp_path / "id").read_text()
    assert [e.actor_name for e in AuditEvent.objects.filter(action="credential.created")] == ["alice"]
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id2")], check=True)
    with pytest.raises(CommandError, match="exists with another key"):
        run(SAMPLES / "nodes.csv", "--credential", "rack key", "--key-file", tmp_path / "id2")
    with pytest.raises(CommandError, match="this is a public key"):
        run(SAMPLES / "nodes.csv", "--credential", "other", "--key-file", tmp_path / "id2.pub")
