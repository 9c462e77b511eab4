"""The pages' words and layout say what is true: plurals, not "(s)"; a batch that ended titled by its result;
rounds counted one way; the host key's hint once there is a key; an empty filter told apart from an empty fleet;
labels in sentence case beside their errors; no empty "Needs attention" card."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from cudaweb.network import collective
from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db
STYLE = (Path(__file__).resolve().parents[2] / "static" / "cudaweb" / "style.css").read_text()


def _get(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_an_empty_filter_offers_to_clear_it_and_an_empty_fleet_to_add_a_node(operator_client):
    empty_fleet = re.search(r'<td [^>]*id="fleet-empty">(.*?)</td>', _get(operator_client, "/")).group(1)
    assert "No node yet" in empty_fleet and reverse("fleet:node_add") in empty_fleet
    Node.objects.create(name="gpu-1", transport=Node.Transport.LOCAL)
    filtered = re.search(r'<td [^>]*id="fleet-empty">(.*?)</td>', _get(operator_client, "/?q=nothing-like-it")).group(1)
    assert "No nodes match these filters" in filtered and "clear the filters" in filtered
    assert "Add one" not in filtered
    # the link is told from the text by more than its colour (axe's link-in-text-block, 2.62:1 in the dark scheme)
    assert re.search(r"table\.grid td\.empty-note a \{[^}]*text-decoration: underline", STYLE)


def test_nothing_needing_attention_renders_no_empty_attention_card(operator_client):
    stored_run(Node.objects.create(name="fine", transport=Node.Transport.LOCAL), real_report())
    assert 'id="attention"' not in _get(operator_client, "/")
    stored_run(Node.objects.create(name="broken", transport=Node.Transport.LOCAL),
               scaled(real_report(), statuses={"driver.xid": "fail"}))
    assert 'id="attention"' in _get(operator_client, "/")


def test_the_edit_form_labels_are_capitalised_and_an_error_follows_its_label(operator_client):
    node = Node.objects.create(name="gpu-2", transport=Node.Transport.SSH, address="198.18.0.2", username="ops")
    url = reverse("fleet:node_edit", args=[node.id])
    page = _get(operator_client, url)
    labels = re.findall(r"<label for=\"id_\w+\">([^<]+)</label>", page)
    assert labels and all(label[0].isupper() for label in labels), labels
    page = operator_client.post(url, {"address": "not an address;", "port": 22, "username": "ops",
                                      "python_path": "python3"}).content.decode()
    address = re.search(r'<p><label for="id_address">.*?</p>', page, re.S).group(0)
    assert address.index("<label") < address.index('class="errorlist') and "<input" in address


def test_the_audit_filters_keep_each_label_with_its_date(operator_client):
    page = _get(operator_client, reverse("audit:list"))
    assert re.search(r'<span class="field"><label for="id_until">to</label> <input[^>]*id="id_until"', page)
    assert re.search(r"form\.filters \.field \{[^}]*white-space: nowrap", STYLE)


def test_a_burnin_select_in_a_row_of_fields_keeps_its_own_width():
    assert re.search(r"form p\.filters select, form\.filters select \{ width: auto; \}", STYLE)


def test_a_check_id_is_never_broken_mid_word_and_a_root_cause_label_never_cut():
    code = re.search(r"^code \{([^}]*)\}", STYLE, re.M).group(1)
    assert "overflow-wrap: anywhere" not in code
    label = re.search(r"^\.bars \.label \{([^}]*)\}", STYLE, re.M).group(1)
    assert "ellipsis" not in label and "nowrap" not in label
    assert re.search(r"^\.bars\.stacked \.label \{ grid-column: 1 / -1; \}", STYLE, re.M)


def test_a_root_cause_bar_has_its_check_id_whole_above_it(operator_client):
    stored_run(Node.objects.create(name="broken", transport=Node.Transport.LOCAL),
               scaled(real_report(), statuses={"driver.xid": "fail"}))
    page = _get(operator_client, "/")
    assert '<ul class="bars stacked" aria-label="Failing nodes by root cause">' in page
    assert "<code>driver.xid</code>" in page


def test_text_in_a_flush_card_keeps_off_its_border():
    assert re.search(r"\.card > \.card-body\.flush > p[^{]*\{ margin: var\(--space-2\) var\(--space-3\)", STYLE)


def test_a_finished_batch_is_titled_by_its_result(operator_client):
    nodes = [Node.objects.create(name="b%d" % i, transport=Node.Transport.LOCAL) for i in range(2)]
    runs = [stored_run(nodes[0], real_report()), stored_run(nodes[1], scaled(real_report(),
                                                                             statuses={"driver.xid": "fail"}))]
    page = _get(operator_client, reverse("runs:batch") + "?ids=" + ",".join(str(r.id) for r in runs))
    title = re.search(r'<h1 id="batch-title">(.*?)</h1>', page).group(1)
    assert title == "2 nodes validated: 1 failed, 1 passed"
    assert "Validating" not in page and "(s)" not in page
    live = ValidationRun.objects.create(node=nodes[0], status=ValidationRun.Status.RUNNING)
    page = _get(operator_client, reverse("runs:batch") + "?ids=%s" % live.id)
    assert re.search(r'<h1 id="batch-title">Validating 1 node</h1>', page)


def test_rounds_are_counted_from_one_as_the_summary_counts_them(operator_client, monkeypatch):
    nodes = [Node.objects.create(name="ar%d" % i, transport=Node.Transport.LOCAL) for i in range(2)]
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.ALLREDUCE, status=NetworkTest.Status.RUNNING)
    test.nodes.set(nodes)

    def one_round(test, number, units):
        return [CollectiveResult.objects.create(test=test, round=number, members=[n.name for n in members],
                                                role=role, status="pass", backend="gloo", busbw_gbs=1.0,
                                                expected_gbs=1.1, duration_s=1.0) for members, role in units]

    monkeypatch.setattr(collective, "_round", one_round)
    monkeypatch.setattr(collective.bisection, "below_expectation", lambda unit: False)
    summary = collective.network_test_allreduce(test=test)
    assert re.search(r"\(1 round, \d+ s\)$", summary), summary
    page = _get(operator_client, reverse("network:detail", args=[test.id]))
    rows = re.search(r'<table class="grid" id="rounds">.*?</table>', page, re.S).group(0)
    assert re.findall(r'<tr class="c-row-pass"><td>(\d+)</td>', rows) == ["1"]
    assert "Round 1 runs one all-reduce" in page and "Round 0" not in page and "(s)" not in page


def test_adding_a_node_names_the_next_step_not_a_fingerprint_not_read_yet(operator_client, monkeypatch, settings,
                                                                          tmp_path):
    from cudaweb.remote import connect

    (tmp_path / "rack").write_text("a key file the worker reads\n")
    settings.CUDAWEB_KEY_DIR = str(tmp_path)

    def created(**fields):
        return Node.objects.create(name=fields["name"], transport=Node.Transport.SSH, address=fields["address"],
                                   username=fields["username"])

    monkeypatch.setattr(connect, "ssh_node_create", created)
    response = operator_client.post(reverse("fleet:node_add"), {
        "name": "gpu-new", "address": "198.18.0.44", "port": 22, "username": "ops", "key_path": "rack",
        "python_path": "python3"}, follow=True)
    page = response.content.decode()
    assert "Check its host key fingerprint" not in page
    assert "Node gpu-new added. Next: read its host key." in page
    assert 'id="fingerprint"' not in page
