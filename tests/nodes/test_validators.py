"""One rule for a node's name, user, port and address, and every way in applies it: the add-node form, the service
that creates a node (under `add_node` and `import_nodes`), and the import's line check."""

import pytest
from django.core.exceptions import ValidationError

from cudaweb.fleet.forms import NodeForm
from cudaweb.nodes import services, validators
from cudaweb.nodes.models import Node
from cudaweb.remote.inventory import InventoryError, entry_check

pytestmark = pytest.mark.django_db
GOOD = {"name": "gpu-0042", "address": "10.0.4.42", "port": 22, "username": "ops"}
BAD = [("address", "bad host!"), ("address", "ops@10.0.4.42"), ("address", "$(reboot)"), ("address", "[gpu-1]"),
       ("address", " 10.0.4.42"), ("name", "gpu 42"), ("name", "gpu/42"), ("name", ""), ("name", "x" * 101),
       ("name", "--force"), ("name", "-x"), ("name", "_x"), ("name", ".."),
       ("username", "ops;reboot"), ("username", "ops\n"), ("username", "Ops"), ("username", ""),
       ("port", 0), ("port", 65536), ("port", "22"), ("port", True)]


@pytest.mark.parametrize("field, value", BAD)
def test_the_rule_refuses_it_naming_the_field(field, value):
    with pytest.raises(validators.NodeFieldError) as refused:
        validators.ssh_node_check(**dict(GOOD, **{field: value}))
    assert refused.value.field == field


@pytest.mark.parametrize("field, value", BAD)
def test_the_service_and_the_import_refuse_it_too(field, value):
    with pytest.raises(validators.NodeFieldError):
        services.node_create(**dict(GOOD, **{field: value}))
    entry = {"line": 2, "name": GOOD["name"], "address": GOOD["address"], "port": 22, "user": "ops",
             "transport": "ssh"}
    entry.update({{"username": "user"}.get(field, field): value})
    with pytest.raises(InventoryError, match="^line 2 "):
        entry_check(entry)
    assert not Node.objects.exists()


@pytest.mark.parametrize("field, value", [(f, v) for f, v in BAD if f != "port" and v.strip() == v])
def test_the_form_refuses_it(field, value):
    data = dict(GOOD, python_path="python3", private_key="")
    data[field] = value
    form = NodeForm(data)
    assert not form.is_valid() and field in form.errors


def test_what_it_keeps():
    assert validators.ssh_node_check(**dict(GOOD, address="[127.0.0.1]"))["address"] == "127.0.0.1"
    assert validators.ssh_node_check(**dict(GOOD, address="[::1]"))["address"] == "::1"
    assert validators.ssh_node_check(**dict(GOOD, address="gpu-01.rack4.example"))["address"] == \
        "gpu-01.rack4.example"
    assert validators.username_check("svc_gpu.ops-1") == "svc_gpu.ops-1"


def test_names_as_clusters_write_them_pass():
    for name in ("gpu-0042", "h200-r07-01", "0042", "dgx_a100.rack4", "Login-01", "x" * 100):
        assert validators.name_check(name) == name
    Node(name="gpu-01.rack4.example", transport=Node.Transport.LOCAL, slurm_name="h200-r07-01",
         kubernetes_name="gpu-01.rack4.example").full_clean()


@pytest.mark.parametrize("field", ["name", "slurm_name", "kubernetes_name"])
@pytest.mark.parametrize("value", ["--force", "-x"])
def test_the_model_refuses_an_option_like_name_in_every_name_field(field, value):
    """The model's own rule (full_clean, and so the admin), for the names scontrol and kubectl-like calls are given."""
    node = Node(**dict({"name": "gpu-1", "transport": Node.Transport.LOCAL}, **{field: value}))
    with pytest.raises(ValidationError) as refused:
        node.full_clean()
    assert refused.value.message_dict == {field: ["not a node name: a letter or a digit first, then letters, "
                                                  "digits, . _ -"]}


@pytest.mark.parametrize("value", ["--force", "-x"])
def test_the_form_says_why_it_refuses_an_option_like_name(value):
    form = NodeForm(dict(GOOD, name=value, python_path="python3", key_path="rack"))
    assert not form.is_valid()
    assert form.errors["name"] == ["%r is not a node name: a letter or a digit first, then letters, digits, . _ - "
                                   "(at most 100)" % value]
