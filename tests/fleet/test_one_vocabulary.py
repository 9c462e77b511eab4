"""One node state, one name (issue 29): the fleet tile, the table's badge, the filter and the API say the same
words for it (cudaweb.nodes.states); an SSH node without an accepted key was "Host key to accept" on the tile,
"Not validated" in the table and "new" in the API."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from cudaweb.nodes import states
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_create
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(admin_user):
    node_create(name="ssh-nokey", address="198.18.0.5", port=22, username="ops", private_key="k")
    Node.objects.create(name="here", transport=Node.Transport.LOCAL)
    judged = Node.objects.create(name="judged", transport=Node.Transport.LOCAL)
    stored_run(judged, real_report())
    return {n.name: n for n in Node.objects.all()}


def test_tile_table_filter_and_api_use_one_name(operator_client, fleet, admin_user):
    from cudaweb.api.services import token_issue
    page = operator_client.get(reverse("fleet:node_list")).content.decode()
    tiles = page[page.index('id="status-counts"'):page.index("</div>", page.index('id="status-counts"'))]
    tile_words = {what for _, what in re.findall(r'<span class="n">(\d+)</span><span class="what">([^<]+)</span>',
                                                 tiles)} - {"node", "nodes"}
    token = token_issue(user=admin_user, name="t")[1]
    api = {n["name"]: n for n in operator_client.get("/api/v1/nodes/", HTTP_AUTHORIZATION="Bearer %s" % token)
           .json()["nodes"]}
    for name, node in fleet.items():
        state = states.node_state(node)
        assert state.label in tile_words, (name, state.label, tile_words)
        assert api[name]["state"] == state.key and api[name]["state_label"] == state.label
        row = page[page.index("<b>%s</b></a>" % name):]
        assert row.index(state.label) < row.index("</tr>")  # the table's badge on that node's row
        listed = operator_client.get(reverse("fleet:node_list"), {"status": state.key}).content.decode()
        listed = listed[listed.index('<table class="grid fleet">'):]
        assert "<b>%s</b></a>" % name in listed  # the tile's link filters by the same key
    assert states.node_state(fleet["ssh-nokey"]).key == "key_to_accept"
    assert states.node_state(fleet["here"]).key == "not_validated"


def test_a_state_another_module_defines_is_listed_by_the_filter():
    state = states.define("remediating", "Remediating", "warn", "a remediation loop is working on it")
    try:
        from cudaweb.fleet.forms import FleetFilterForm
        assert ("remediating", "Remediating") in FleetFilterForm().fields["status"].choices
        assert states.state_filter("remediating") is not None and states.STATES["remediating"] is state
    finally:
        del states.STATES["remediating"]


def test_the_no_layer_bar_links_to_a_filter_that_is_honoured(operator_client):
    """The overview's "no layer" bar (failing nodes no layer explains) linked to ?failing_layer=no layer, ignored."""
    Node.objects.create(name="by-layer", transport=Node.Transport.LOCAL, status=Node.Status.FAILING,
                        layer_status={"L1": "fail", "L0": "pass"})
    Node.objects.create(name="no-layer", transport=Node.Transport.LOCAL, status=Node.Status.FAILING,
                        layer_status={"L0": "pass"})
    Node.objects.create(name="fine", transport=Node.Transport.LOCAL, status=Node.Status.PASSING)
    page = operator_client.get(reverse("fleet:node_list")).content.decode()
    link = re.search(r'href="(\?failing_layer=[^"]+)">no layer</a>', page)
    assert link, "no 'no layer' bar"
    listed = operator_client.get(reverse("fleet:node_list") + link.group(1).replace("&amp;", "&")).content.decode()
    listed = listed[listed.index('<table class="grid fleet">'):]  # the table, not the attention card above it
    assert "<b>no-layer</b>" in listed and "<b>by-layer</b>" not in listed and "<b>fine</b>" not in listed


def test_the_fleet_page_refreshes_itself_like_the_run_and_batch_pages(operator_client):
    """Its overview and its rows are fragments of the same URL that live.js polls (every 15 s, paused while the tab
    is hidden, and a rows refresh skipped while a box is ticked)."""
    Node.objects.create(name="gpu-1", transport=Node.Transport.LOCAL, status=Node.Status.PASSING)
    page = operator_client.get(reverse("fleet:node_list"), {"label": ""}).content.decode()
    assert 'data-poll-url="?label=&amp;fragment=overview" data-poll-every="15000"' in page
    assert 'data-poll-url="?label=&amp;fragment=rows" data-poll-every="15000" data-poll-hold="input:checked"' in page
    Node.objects.create(name="gpu-2", transport=Node.Transport.LOCAL, status=Node.Status.FAILING)
    rows = operator_client.get(reverse("fleet:node_list"), {"fragment": "rows"}).content.decode()
    assert "<b>gpu-2</b>" in rows and "<html" not in rows and 'data-live="1"' in rows
    overview = operator_client.get(reverse("fleet:node_list"), {"fragment": "overview"}).content.decode()
    assert 'id="status-counts"' in overview and "Failing" in overview and "<html" not in overview
    script = (Path(__file__).resolve().parents[2] / "static" / "cudaweb" / "live.js").read_text()
    assert "pollEvery" in script and "pollHold" in script and "document.hidden" in script
