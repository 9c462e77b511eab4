"""The node page tells the truth: its GPUs as the latest report read them, who holds a quarantined node (the badge
and the loop card say one thing), shadow mode's "would" kept apart from the node's state, events coloured by their
class, and no edit link where the node cannot be edited."""

import re

import pytest
from django.test import TestCase
from django.urls import reverse

from cudaweb.fleet.services import acceptance_decide
from cudaweb.health import machine
from cudaweb.health import services as health_services
from cudaweb.health.models import HealthEvent, NodeLoop
from cudaweb.nodes.models import Node
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


def _page(client, node):
    return client.get(reverse("fleet:node_detail", args=[node.id])).content.decode()


def _badge_text(page):
    head = page[page.index('<div class="page-head">'):page.index("</div>", page.index('<div class="page-head">'))]
    return re.findall(r'<span class="badge [^"]*"[^>]*>([^<]+)</span>', head)


def test_the_gpus_are_read_from_the_latest_run_with_a_report_not_said_missing(operator_client):
    """A host whose agent could not count its GPUs (no driver) sends reports without a GPU count: seven runs with
    reports are not "no run has produced a report yet"."""
    node = Node.objects.create(name="no-driver", transport=Node.Transport.LOCAL)
    report = real_report()
    del report["inventory"]["gpu_count"], report["inventory"]["gpu_model"]
    runs = [stored_run(node, report) for _ in range(7)]
    facts = operator_client.get(reverse("fleet:node_detail", args=[node.id])).content.decode()
    gpus = re.search(r'<dd id="node-gpus">(.*?)</dd>', facts, re.S).group(1)
    assert "no run has produced a report yet" not in facts
    assert "holds no GPU count" in gpus and runs[-1].get_absolute_url() in gpus


def test_the_gpus_of_a_report_that_counted_them_are_shown(operator_client):
    node = Node.objects.create(name="h200", transport=Node.Transport.LOCAL)
    stored_run(node, real_report())
    gpus = re.search(r'<dd id="node-gpus">(.*?)</dd>', _page(operator_client, node), re.S).group(1)
    assert gpus.startswith("2 x NVIDIA H200")


def test_a_node_an_operator_quarantined_says_so_and_the_loop_card_counts_it(operator_client, admin_user):
    node = Node.objects.create(name="held", transport=Node.Transport.LOCAL)
    run = stored_run(node, real_report())
    with TestCase.captureOnCommitCallbacks(execute=True):
        acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user, note="bad fan")
    node.refresh_from_db()
    assert node.status == Node.Status.QUARANTINED and NodeLoop.objects.get(node=node).state == machine.QUARANTINED
    assert "Quarantined by an operator" in _badge_text(_page(operator_client, node))
    fleet = operator_client.get(reverse("fleet:node_list")).content.decode()
    counts = re.search(r'<p id="loop-counts">(.*?)</p>', fleet, re.S).group(1)
    assert re.search(r">quarantined</span>\s+1\b", counts), counts
    assert "an operator's quarantine is counted as quarantined" in counts


def test_a_node_the_loop_drained_says_the_loop_holds_it(operator_client, admin_user):
    node = Node.objects.create(name="drained", transport=Node.Transport.LOCAL)
    stored_run(node, real_report())
    health_services.apply(node, machine.Stimulus(machine.SEND_RMA), by=admin_user.username, actor=admin_user)
    node.refresh_from_db()
    assert node.status == Node.Status.QUARANTINED
    assert "Quarantined by the loop" in _badge_text(_page(operator_client, node))


def test_shadow_mode_says_would_and_shows_no_state_badge_for_it(operator_client):
    node = Node.objects.create(name="shadowed", transport=Node.Transport.LOCAL)
    stored_run(node, real_report())
    NodeLoop.objects.update_or_create(node=node, defaults={"state": machine.READY, "shadow_state": machine.QUARANTINED,
                                                           "shadow_root_cause": "xid_79"})
    page = _page(operator_client, node)
    loop_state = re.search(r'<p id="loop-state">(.*?)</p>', page, re.S).group(1)
    shadow = re.search(r'<small id="loop-shadow">(.*?)</small>', loop_state, re.S).group(1)
    assert "would move the node to quarantined" in shadow and "has not acted" in shadow
    assert "<b>quarantined</b>" not in loop_state and "Quarantined" not in " ".join(_badge_text(page))


def test_an_observation_is_not_shown_in_a_hardware_faults_red(operator_client):
    from django.utils import timezone

    node = Node.objects.create(name="observed", transport=Node.Transport.LOCAL)
    now = timezone.now()
    for klass, signature in (("observation", "clock_throttle"), ("hardware", "xid_79")):
        HealthEvent.objects.create(node=node, check_id="driver.xid", signature=signature, severity="fail",
                                   klass=klass, first_seen=now, last_seen=now)
    events = re.search(r'<table class="grid" id="loop-events">(.*?)</table>', _page(operator_client, node), re.S)
    badges = dict((word, tone) for tone, word in re.findall(r'<span class="badge tone-(\w+)"[^>]*>(\w+)</span>',
                                                            events.group(1)))
    assert badges == {"hardware": "fail", "observation": "skip"}


def test_the_local_node_has_no_edit_link_and_an_ssh_node_has_one(operator_client):
    local = Node.objects.create(name="this-host", transport=Node.Transport.LOCAL)
    ssh = Node.objects.create(name="remote", transport=Node.Transport.SSH, address="198.18.0.7", username="ops")
    assert 'id="edit-node"' not in _page(operator_client, local)
    assert reverse("fleet:node_edit", args=[ssh.id]) in _page(operator_client, ssh)
