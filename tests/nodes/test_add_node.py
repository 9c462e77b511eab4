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
