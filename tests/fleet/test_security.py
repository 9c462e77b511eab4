"""Issue 13's security fixes: key files from one directory, first contact from a worker only, addresses checked
against the allowed networks, nothing secret or huge echoed back, one acceptance per decision, form errors
instead of 500s."""

import os
import socket
import threading

import kombu.exceptions
import pytest
from django.urls import reverse

from cudaweb.nodes import services as node_services
from cudaweb.nodes.addresses import AddressRefused, address_check
from cudaweb.nodes.keyfiles import KeyFileRefused, read_key_file
from cudaweb.nodes.models import Node
from cudaweb.remote import connect
from cudaweb.remote.tasks import fetch_host_key
from cudaweb.remote.transports.base import Unreachable
from tests.services import free_port

pytestmark = pytest.mark.django_db
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n"


def _add(client, **fields):
    form = {"name": "gpu-x", "address": "198.18.0.9", "port": 22, "username": "ops", "python_path": "python3"}
    form.update(fields)
    return client.post(reverse("fleet:node_add"), form)


def test_key_files_only_from_the_key_directory_and_one_message_for_any_unreadable_file(settings, tmp_path,
                                                                                      operator_client):
    settings.CUDAWEB_KEY_DIR = ""
    assert "key files are off" in _add(operator_client, key_path="/etc/passwd").content.decode()
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "rack").write_text(KEY)
    os.symlink("/etc/passwd", keys / "sneaky")
    settings.CUDAWEB_KEY_DIR = str(keys)
    for path in ("/etc/passwd", "../keys/../../etc/passwd", "sneaky"):
        assert "read only from the key directory" in _add(operator_client, key_path=path).content.decode(), path
    assert read_key_file("rack") == KEY and read_key_file(str(keys / "rack")) == KEY
    (keys / "adir").mkdir()
    messages = set()
    for name in ("missing", "adir"):  # absent, or not a file: the same words
        with pytest.raises(KeyFileRefused) as caught:
            read_key_file(name)
        messages.add(str(caught.value).replace(name, "NAME"))
    assert len(messages) == 1
    response = _add(operator_client, key_path="rack")  # not read by the page: the worker reads it
    assert response.status_code == 302 and Node.objects.get(name="gpu-x").credential.key_path == "rack"


def test_the_host_key_is_read_by_a_worker_not_by_the_page(operator_client, monkeypatch, settings):
    node = node_services.node_create(name="gpu-k", address="198.18.0.7", port=22, username="ops", private_key=KEY)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("the page connected"))
    queued = []
    monkeypatch.setattr(fetch_host_key, "apply_async", lambda args, **kw: queued.append(args))
    response = operator_client.post(reverse("fleet:host_key_fetch", args=[node.id]), follow=True)
    assert "A worker is reading the host key" in response.content.decode()
    assert queued == [[str(node.id), response.wsgi_request.user.pk]] and Node.objects.get(id=node.id).contact_requested

    def broker_down(args, **kw):
        raise kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    monkeypatch.setattr(fetch_host_key, "apply_async", broker_down)
    response = operator_client.post(reverse("fleet:host_key_fetch", args=[node.id]), follow=True)
    assert "does not answer" in response.content.decode() and Node.objects.get(id=node.id).contact_requested is None


def _listener(reply):
    """A TCP port that accepts and says `reply` (not SSH), then closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(reply)
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return server


def test_an_open_port_and_a_closed_one_give_the_same_answer(settings):
    settings.CUDAWEB_SSH_CONNECT_TIMEOUT = 3
    server = _listener(b"HTTP/1.0 200 OK\r\n\r\n")
    try:
        answers = []
        for port in (server.getsockname()[1], free_port()):
            node = node_services.node_create(name="probe-%d" % port, address="127.0.0.1", port=port,
                                             username="ops", private_key=KEY)
            fetch_host_key(str(node.id))
            node.refresh_from_db()
            answers.append(node.contact_error.replace(str(port), "PORT"))
        assert answers[0] == answers[1]
        assert answers[0].startswith("no SSH host key could be read from 127.0.0.1:PORT: nothing there answered as "
                                     "an SSH server. Check the address and port, that sshd runs")
    finally:
        server.close()


def test_addresses_are_checked_and_only_allowed_networks_reached(settings, operator_client):
    assert address_check("gpu-01.rack4.example") == "gpu-01.rack4.example"
    for bad in ("a b", "gpu;rm -rf /", "-oProxyCommand=x", "x" * 300):
        with pytest.raises(AddressRefused):
            address_check(bad)
    # registered before the networks were restricted: refused where it is connected to
    node = node_services.node_create(name="gpu-out", address="127.0.0.1", port=22, username="ops", private_key=KEY)
    settings.CUDAWEB_ALLOWED_NETWORKS = "198.18.0.0/15, 10.0.0.0/8"
    assert address_check("198.19.4.2") and address_check("10.1.2.3")
    assert "outside the networks" in _add(operator_client, private_key=KEY, address="192.168.1.5").content.decode()
    with pytest.raises(AddressRefused, match="resolves to 127.0.0.1"):
        connect.reachable_address("localhost", 22)
    with pytest.raises(Unreachable, match="outside the networks"):
        connect.transport_for(node)
    with pytest.raises(Unreachable, match="outside the networks"):
        connect.host_key_fetch(node=node)


def test_a_pasted_key_and_a_huge_paste_are_not_sent_back(operator_client, settings):
    Node.objects.create(name="taken", transport=Node.Transport.LOCAL)
    page = _add(operator_client, name="taken", private_key=KEY).content.decode()
    assert "a node with this name exists" in page and "not a real key" not in page
    huge = "x" * (100 * 1024) + " CUDA out of memory"
    page = operator_client.post(reverse("playbooks:triage"), {"text": huge}).content.decode()
    assert "CUDA out of memory" in page and huge[:70000] not in page  # answered, not echoed
    small = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert small in operator_client.post(reverse("playbooks:triage"), {"text": small}).content.decode()
    settings.CUDAWEB_TRIAGE_CAP = 1000
    page = operator_client.post(reverse("playbooks:triage"), {"text": "y" * 5000}).content.decode()
    assert "over the 1000-byte limit" in page and "y" * 5000 not in page


def test_the_same_schedule_twice_is_a_form_error_not_a_500(operator_client):
    form = {"every_hours": 6, "mode": "quick", "label": "rack-1"}
    assert operator_client.post(reverse("runs:schedules"), form).status_code == 302
    again = operator_client.post(reverse("runs:schedules"), form)
    assert again.status_code == 200 and "this schedule exists already" in again.content.decode()


def test_an_accepted_host_key_is_the_one_shown(admin_user):
    node = node_services.node_create(name="gpu-h", address="198.18.0.5", port=22, username="ops", private_key=KEY)
    node_services.host_key_record(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint="SHA256:new")
    with pytest.raises(node_services.HostKeyChanged):  # the page showed SHA256:old; a worker stored another since
        node_services.host_key_accept(node=node, user=admin_user, fingerprint="SHA256:old")
    assert not Node.objects.get(id=node.id).host_key.accepted
    node_services.host_key_accept(node=node, user=admin_user, fingerprint="SHA256:new")
    assert Node.objects.get(id=node.id).host_key.accepted


def test_one_decision_form_records_one_decision_and_cannot_be_reused_for_another(admin_user):
    import uuid

    from cudaweb.fleet.services import acceptance_decide
    from tests.drift.helpers import real_report, stored_run

    a = Node.objects.create(name="node-a", transport=Node.Transport.LOCAL)
    b = Node.objects.create(name="node-b", transport=Node.Transport.LOCAL)
    run_a, run_b = stored_run(a, real_report()), stored_run(b, real_report())
    token = uuid.uuid4()
    first = acceptance_decide(node=a, run=run_a, decision="accepted", user=admin_user, token=token)
    assert acceptance_decide(node=a, run=run_a, decision="accepted", user=admin_user, token=token) == first
    for node, run, decision in ((a, run_a, "quarantined"), (b, run_b, "accepted")):
        with pytest.raises(ValueError, match="this form already recorded accepted into the fleet for node-a"):
            acceptance_decide(node=node, run=run, decision=decision, user=admin_user, token=token)
    assert a.acceptance_records.count() == 1 and not b.acceptance_records.exists()


def test_the_connection_goes_to_the_address_that_was_checked(settings, monkeypatch):
    settings.CUDAWEB_ALLOWED_NETWORKS = "198.18.0.0/15"
    answers = [[(2, 1, 6, "", ("198.18.0.7", 22))], [(2, 1, 6, "", ("127.0.0.1", 22))]]  # a rebinding name
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: answers.pop(0))
    node = node_services.node_create(name="gpu-dns", address="gpu.rack.example", port=22, username="ops",
                                     private_key=KEY)
    transport = connect.transport_for(node)
    assert transport.address == "198.18.0.7"  # the checked IP; the name is not resolved again to connect
