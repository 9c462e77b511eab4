"""One rule for a node's name, user, port and address, and every way in applies it: the add-node form, the service
that creates a node (under `add_node` and `import_nodes`), and the import's line check."""

import pytest

from cudaweb.fleet.forms import NodeForm
from cudaweb.nodes import services, validators
from cudaweb.nodes.models import Node
from cudaweb.remote.inventory import InventoryError, entry_check

pytestmark = pytest.mark.django_db
GOOD = {"name": "gpu-0042", "address": "10.0.4.42", "port": 22, "username": "ops"}
BAD = [("address", "bad host!"), ("address", "ops@10.0.4.42"), ("address", "$(reboot)"), ("address", "[gpu-1]"),
       ("address", " 10.0.4.42"), ("name", "gpu 42"), ("name", "gpu/42"), ("name", ""), ("name", "x" * 101),
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
