"""The loop on the pages: the node page shows its state, what happens next, its transitions and events and takes an
operator's word; the fleet page shows the breaker (an admin closes it), the nodes held and the newest events; an rma
bundle's download goes to the audit log."""

import pytest
from django.urls import reverse

from cudaweb.accounts.models import AuditEvent
from cudaweb.health import machine, services
from cudaweb.health.ingest import report_ingest
from cudaweb.health.machine import SEND_RMA, Stimulus
from cudaweb.health.models import LoopPolicy, NodeLoop, Transition
from tests.conftest import user_with_role
from tests.health.conftest import make_node
from tests.health.standin import watch_report

pytestmark = pytest.mark.django_db


def test_the_node_page_shows_the_loop_and_takes_an_operators_word(client, django_user_model, loop_settings,
                                                                   act_policy):
    LoopPolicy.objects.filter(id=act_policy.id).update(auto=False)
    node = make_node("gpu-page")
    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report("xid13"))
    viewer = user_with_role(django_user_model, "viewer-1", "viewer")
    client.force_login(viewer)
    page = client.get(node.get_absolute_url()).content.decode()
    assert 'id="loop-state"' in page and "quarantined" in page and "gpu_fallen_off_bus" in page
    assert "the ladder&#x27;s next rung" in page or "the ladder's next rung" in page
    assert "xid_application" in page and 'id="loop-decide"' not in page  # a viewer may not decide
    assert client.post("/nodes/%s/loop/" % node.id, {"verdict": "healthy", "reason": "x"}).status_code == 403
    operator = user_with_role(django_user_model, "operator-1", "operator")
    client.force_login(operator)
    assert 'id="loop-decide"' in client.get(node.get_absolute_url()).content.decode()
    client.post("/nodes/%s/loop/" % node.id, {"verdict": "healthy", "reason": ""})
    assert NodeLoop.objects.get(node=node).state == machine.QUARANTINED  # no reason, no decision
    client.post("/nodes/%s/loop/" % node.id, {"verdict": "healthy", "reason": "swapped the GPU"})
    assert NodeLoop.objects.get(node=node).state == machine.READY
    assert Transition.objects.filter(node=node, by="operator-1", to_state="ready").exists()


def test_the_fleet_page_shows_the_open_breaker_and_an_admin_closes_it(client, django_user_model, loop_settings,
                                                                      act_policy):
    loop_settings.CUDAWEB_BREAKER_MAX_NODES = 1
    a, b = make_node("gpu-f1"), make_node("gpu-f2")
    for node in (a, b):
        report_ingest(node, watch_report("xid79"))
        report_ingest(node, watch_report())
    client.force_login(user_with_role(django_user_model, "operator-2", "operator"))
    page = client.get("/").content.decode()
    assert 'id="breaker-open"' in page and "the limit is 1" in page and 'id="breaker-close"' not in page
    assert "gpu-f1" in page and "gpu-f2" in page
    assert client.post("/loop/breaker/close/").status_code == 403
    client.force_login(user_with_role(django_user_model, "admin-2", "admin"))
    assert 'id="breaker-close"' in client.get("/").content.decode()
    client.post("/loop/breaker/close/")
    page = client.get("/").content.decode()
    assert 'id="breaker-open"' in page  # the limit still holds: gpu-f2 opened it again


def test_downloading_an_rma_bundle_is_audited_naming_the_user_and_the_node(client, django_user_model):
    node = make_node("gpu-rma")
    operator = user_with_role(django_user_model, "operator-3", "operator")
    sent = services.apply(node, Stimulus(SEND_RMA), by=operator.username, actor=operator)
    bundle = services.bundle_attach(transition=sent, name="evidence-gpu-rma.zip", data=b"PK")
    client.force_login(operator)
    response = client.get(reverse("fleet:rma_bundle", args=[bundle.id]))
    assert response.status_code == 200 and response.content == b"PK"
    (event,) = AuditEvent.objects.filter(action="loop.bundle_downloaded")
    assert (event.actor, event.actor_name, event.object_type, event.object_id) == (
        operator, "operator-3", "nodes.node", str(node.id))
    assert event.detail == {"bundle": "evidence-gpu-rma.zip", "transition": sent.id, "sha256": bundle.sha256}


def test_loop_controls_offer_only_what_the_machine_would_do_and_say_what_it_does(client, django_user_model,
                                                                                 loop_settings, act_policy):
    """A ready node: no rung, no "mark healthy" (nothing to do), only RMA; a quarantined one: its rungs, the reset
    naming its GPU; the server refuses what the page does not offer."""
    from tests.health.standin import UUID

    LoopPolicy.objects.filter(id=act_policy.id).update(auto=False, interval_s=45)
    node = make_node("gpu-ctl")
    client.force_login(user_with_role(django_user_model, "operator-ctl", "operator"))
    page = client.get(node.get_absolute_url()).content.decode()
    assert "Next: watched every 45 s" in page and "every interval" not in page
    assert 'id="loop-remediate-' not in page and 'id="loop-healthy"' not in page
    assert 'id="loop-rma"' in page and "Send to RMA (drains the node in Slurm; attaches the evidence bundle)" in page
    client.post("/nodes/%s/loop/" % node.id, {"decision": "remediate:reset", "reason": "try it"})
    assert NodeLoop.objects.get(node=node).state == machine.READY
    assert not Transition.objects.filter(node=node).exists()

    report_ingest(node, watch_report("xid79"))
    report_ingest(node, watch_report())
    assert NodeLoop.objects.get(node=node).state == machine.QUARANTINED
    page = client.get(node.get_absolute_url()).content.decode()
    assert 'id="loop-remediate-reset"' in page and "Reset GPU %s (drains first)" % UUID in page
    assert 'id="loop-remediate-revalidate"' in page
    assert "Mark healthy (resumes the node in Slurm)" in page
    assert 'id="loop-remediate-reboot"' not in page and "CUDAWEB_REBOOT_COMMAND is not set" in page
    client.post("/nodes/%s/loop/" % node.id, {"decision": "remediate:reboot", "reason": "try it"})
    assert NodeLoop.objects.get(node=node).state == machine.QUARANTINED
    client.post("/nodes/%s/loop/" % node.id, {"decision": "remediate:revalidate", "reason": "look harder"})
    assert NodeLoop.objects.get(node=node).state == machine.REVALIDATING


def test_a_viewer_sees_no_controls_and_the_card_links_the_policy_for_admins(client, django_user_model):
    node = make_node("gpu-ctl-v")
    client.force_login(user_with_role(django_user_model, "viewer-ctl", "viewer"))
    page = client.get(node.get_absolute_url()).content.decode()
    assert 'id="loop-rma"' not in page and 'id="loop-policy"' in page and "the defaults" in page
    assert 'id="loop-policies-link"' not in page
