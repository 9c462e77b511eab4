"""manage.py add_node: this host or an SSH host with its key, refused with a clear error when something is off."""

import io
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from cudaweb.nodes.models import Node

pytestmark = pytest.mark.django_db


def add(*args):
    out = io.StringIO()
    call_command("add_node", *args, stdout=out)
    return out.getvalue()


def test_a_local_node_with_labels():
    add("ws-1", "--transport", "local", "--labels", "lab, gpu")
    node = Node.objects.get(name="ws-1")
    assert node.is_local and node.labels == ["lab", "gpu"] and node.python_path == sys.executable
    assert node.status == Node.Status.READY


def test_a_local_node_that_is_one_gpu_of_its_host():
    add("gpu1", "--transport", "local", "--visible-devices", "1")
    assert Node.objects.get(name="gpu1").agent_env() == {"CUDA_VISIBLE_DEVICES": "1", "CUDAWEB_NODE_DEVICES": "1"}
    with pytest.raises(CommandError, match="GPU indexes or UUIDs"):
        add("gpu2", "--transport", "local", "--visible-devices", "0;rm -rf /")


def test_an_ssh_node_keeps_its_key_encrypted(tmp_path):
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    add("gpu-7", "--transport", "ssh", "--address", "198.18.0.7", "--port", "2222", "--user", "ops",
        "--key-file", str(key), "--python", "/opt/torch/bin/python")
    node = Node.objects.get(name="gpu-7")
    assert (node.address, node.port, node.username, node.python_path) == ("198.18.0.7", 2222, "ops",
                                                                          "/opt/torch/bin/python")
    assert node.credential.private_key_text() == key.read_text()
    assert key.read_text() not in node.credential.private_key_encrypted
    assert node.status == Node.Status.NEW  # its host key is read and accepted before any run


@pytest.mark.parametrize("args, message", [
    (("x", "--transport", "ssh", "--address", "h"), "needs --user, --key-file"),
    (("x", "--transport", "ssh", "--address", "h", "--user", "u", "--key-file", "/nonexistent"),
     "cannot read the key file"),
])
def test_bad_input_is_a_clear_error(args, message):
    with pytest.raises(CommandError, match=message):
        add(*args)
    assert not Node.objects.exists()


def test_a_file_that_is_not_a_key_is_refused(tmp_path):
    junk = tmp_path / "junk"
    junk.write_text("not a key")
    with pytest.raises(CommandError, match="not a readable"):
        add("x", "--transport", "ssh", "--address", "h", "--user", "u", "--key-file", str(junk))


def test_a_taken_name_is_refused():
    add("ws-1", "--transport", "local")
    with pytest.raises(CommandError, match="exists"):
        add("ws-1", "--transport", "local")


@pytest.mark.parametrize("args, message", [
    (["gpu-9", "--address", "bad host!"], "--address: 'bad host!' is neither a host name nor an IP address"),
    (["gpu-9", "--address", "ops@10.0.4.42"], "--address: 'ops@10.0.4.42' is neither"),
    (["gpu-9", "--address", "$(reboot)"], "--address: '$(reboot)' is neither"),
    (["gpu 9", "--address", "10.0.4.42"], "NAME: 'gpu 9' is not a node name"),
    (["gpu-9", "--address", "10.0.4.42", "--user", "ops;reboot"], "--user: 'ops;reboot' is not a user name"),
    (["gpu-9", "--address", "10.0.4.42", "--user", "ops\n"], "--user: 'ops\\n' is not a user name"),
    (["gpu-9", "--address", "10.0.4.42", "--port", "70000"], "--port: port 70000 is not 1-65535"),
    (["gpu-9", "--address", "[not-an-ip]"], "--address: '[not-an-ip]': brackets hold an IP address only"),
])
def test_the_node_rule_refuses_what_the_page_refuses_and_exits_2(tmp_path, args, message):
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    base = {"--user": "ops"}
    flags = dict(zip(args[1::2], args[2::2]))
    argv = [args[0], "--transport", "ssh", "--key-file", str(key)]
    for flag, value in dict(base, **flags).items():
        argv += [flag, value]
    with pytest.raises(CommandError, match=None) as raised:
        add(*argv)
    assert message in str(raised.value) and raised.value.returncode == 2
    assert not Node.objects.exists()


def test_an_ip_in_brackets_is_stored_without_them(tmp_path):
    key = tmp_path / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    add("gpu-6", "--transport", "ssh", "--address", "[127.0.0.1]", "--user", "ops", "--key-file", str(key))
    assert Node.objects.get(name="gpu-6").address == "127.0.0.1"


def test_an_unknown_file_or_a_bad_node_exits_2_from_the_shell(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "add_node", "bad name", "--transport", "local"],
                          capture_output=True, text=True, timeout=60,
                          env=dict(__import__("os").environ, DJANGO_SETTINGS_MODULE="tests.settings"))
    assert done.returncode == 2 and "is not a node name" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["--force", "-x"])
def test_an_option_like_name_is_refused_even_after_the_end_of_options(name):
    """`--` gets an option-like name past argparse; the node rule still refuses it, naming it."""
    with pytest.raises(CommandError) as refused:
        add("--transport", "local", "--", name)
    assert str(refused.value).startswith("NAME: %r is not a node name: a letter or a digit first" % name)
    assert refused.value.returncode == 2 and not Node.objects.exists()
