"""One address rule (issue 29): ipaddress for IP literals, RFC 1123 host names in IDNA's ASCII form, a name whose
last label is a number refused as a mistyped IPv4 address; every entry point applies it (form, add_node, import,
the service, the admin's model check). With CUDAWEB_ALLOWED_NETWORKS empty the worker is kept off this host's own
and the link's addresses; the local transport node is not an address and keeps working. Labels are limited the
same way everywhere."""

import io
import socket

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from cudaweb.fleet.forms import NodeForm
from cudaweb.nodes import addresses, services, validators
from cudaweb.nodes.models import Node
from cudaweb.remote import connect, inventory
from cudaweb.remote.transports.base import Unreachable
from cudaweb.remote.transports.local import LocalTransport

pytestmark = pytest.mark.django_db
KEY_FORM = {"name": "gpu-x", "port": 22, "username": "ops", "python_path": "python3"}
NOT_ADDRESSES = ["999.1.1.1", "10.0.4", "1.2.3.4.5", "256.0.0.1", "gpu..rack", "-gpu.example", "x" * 254]


@pytest.mark.parametrize("address", NOT_ADDRESSES)
def test_what_is_no_address_is_refused_by_the_rule_and_the_form(address):
    with pytest.raises(addresses.AddressRefused):
        addresses.address_check(address)
    form = NodeForm(dict(KEY_FORM, address=address, private_key=""))
    assert not form.is_valid() and "address" in form.errors


def test_add_node_refuses_999_1_1_1(tmp_path):
    key = tmp_path / "id"
    key.write_text("unused: refused before the key is read")
    with pytest.raises(CommandError, match="--address: '999.1.1.1' is neither a host name nor an IP address"):
        call_command("add_node", "x", "--transport", "ssh", "--address", "999.1.1.1", "--user", "ops",
                     "--key-file", str(key), stdout=io.StringIO())
    assert not Node.objects.exists()


def test_an_import_line_and_the_admin_refuse_it_too():
    entry = {"line": 3, "name": "gpu-1", "address": "999.1.1.1", "port": 22, "user": "ops", "transport": "ssh"}
    with pytest.raises(inventory.InventoryError, match="^line 3 "):
        inventory.entry_check(entry)
    node = Node(name="gpu-1", address="999.1.1.1", port=22, username="ops")
    with pytest.raises(ValidationError) as refused:
        node.full_clean()
    assert "address" in refused.value.message_dict


def test_an_internationalised_name_is_kept_in_its_ascii_form():
    assert addresses.address_check("gpu-01.bücher.example") == "gpu-01.xn--bcher-kva.example"
    assert addresses.address_check("GPU-01.Rack4.example.") == "gpu-01.rack4.example"
    assert addresses.address_check("2001:db8::7") == "2001:db8::7"


@pytest.mark.parametrize("ip", ["127.0.0.1", "127.8.8.8", "::1", "169.254.169.254", "fe80::1", "0.0.0.0",
                                "::ffff:127.0.0.1", "224.0.0.1"])
def test_with_no_networks_listed_this_hosts_own_and_the_links_addresses_are_refused(settings, ip):
    settings.CUDAWEB_ALLOWED_NETWORKS = ""
    with pytest.raises(addresses.AddressRefused, match="refused while CUDAWEB_ALLOWED_NETWORKS is empty"):
        addresses.address_check(ip)
    assert addresses.address_check("198.18.0.5") == "198.18.0.5"


def test_with_no_networks_listed_a_name_for_loopback_is_refused_where_it_is_connected_to(settings, monkeypatch):
    settings.CUDAWEB_ALLOWED_NETWORKS = "0.0.0.0/0"  # registered while loopback was allowed
    node = services.node_create(name="gpu-lo", address="db.internal", port=22, username="ops", private_key="k")
    settings.CUDAWEB_ALLOWED_NETWORKS = ""
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("127.0.0.1", 22))])
    with pytest.raises(Unreachable, match="resolves to 127.0.0.1: a loopback"):
        connect.transport_for(node)
    with pytest.raises(Unreachable, match="resolves to 127.0.0.1"):
        connect.host_key_fetch(node=node)


def test_the_local_transport_node_is_no_address_and_keeps_working(settings):
    settings.CUDAWEB_ALLOWED_NETWORKS = ""
    node = services.node_register_local()
    assert isinstance(connect.transport_for(node), LocalTransport)


@pytest.mark.parametrize("labels, message", [
    (["x" * 131072], "is not a label"), (["rack-%d" % n for n in range(33)], "33 labels"),
    (["<b>x</b>"], "is not a label"), (["rack 7"], "is not a label")])
def test_labels_are_limited_at_every_entry_point(labels, message, tmp_path):
    with pytest.raises(validators.NodeFieldError, match=message):
        services.node_create(name="gpu-l", address="198.18.0.5", port=22, username="ops", labels=labels)
    form = NodeForm(dict(KEY_FORM, address="198.18.0.5", private_key="x", labels=";".join(labels)))
    assert not form.is_valid() and "labels" in form.errors
    with pytest.raises(CommandError, match="--labels"):
        call_command("add_node", "ws", "--transport", "local", "--labels", "|".join(labels), stdout=io.StringIO())
    assert not Node.objects.exists()


def test_one_scontrol_record_cannot_bring_a_hundred_thousand_labels():
    record = "NodeName=gpu-1 NodeAddr=198.18.0.5 Partitions=%s\n" % ",".join("p%d" % n for n in range(100001))
    entries = inventory.parse_scontrol(record)
    entries[0]["user"] = "ops"
    with pytest.raises(inventory.InventoryError, match="100001 labels: a node has at most 32"):
        inventory.entry_check(entries[0])
    big = "NodeName=gpu-1 NodeAddr=198.18.0.5 Partitions=%s\n" % ("y" * 131072)
    entry = inventory.parse_scontrol(big)[0]
    entry["user"] = "ops"
    with pytest.raises(inventory.InventoryError, match="is not a label"):
        inventory.entry_check(entry)


def test_the_admin_refuses_too_many_labels():
    node = Node(name="ws", transport=Node.Transport.LOCAL, labels=["l%d" % n for n in range(40)])
    with pytest.raises(ValidationError) as refused:
        node.full_clean()
    assert "labels" in refused.value.message_dict
