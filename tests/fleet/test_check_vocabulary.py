"""One word per check status on every surface: a check the agent ran and passed above a failed layer is "skip" (the
agent's word, with "not counted" beside it) on the run page, the acceptance record, the compare page, the API and
JUnit alike; the compare page lists a check only one run has as "only in run A/B", not as a changed status."""

import copy
import re
from xml.etree import ElementTree

import pytest
from django.urls import reverse

from cudaweb.api.services import token_issue
from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db
DEMOTED = "comm.gloo"


def _demoted_report():
    report = real_report()
    for check in report["checks"]:
        if check["id"] == DEMOTED:
            check.update(status="skip", blocked_by="driver.nvidia_smi", summary=check["summary"] +
                         " (ran, but cannot count as a pass above failed driver.nvidia_smi)")
        if check["id"] == "driver.nvidia_smi":
            check.update(status="fail", summary="nvidia-smi is not on PATH", signatures=["nvidia_smi_missing"])
    report["verdict"] = "fail"
    return report


def _badge_words(html):
    return re.findall(r'<span class="badge tone-[a-z]+"[^>]*>([^<]+)</span>', html)


def _row(page, check_id):
    start = page.index(">%s<" % check_id)
    return page[start:page.index("</tr>", start)]


def test_a_check_not_counted_above_a_failed_layer_has_the_agents_word_on_every_surface(operator_client, client,
                                                                                      admin_user):
    node = Node.objects.create(name="cpu-host", transport="local")
    earlier = stored_run(node, real_report())
    run = stored_run(node, _demoted_report())
    run_page = operator_client.get(run.get_absolute_url()).content.decode()
    run_row = _row(run_page[run_page.index('id="skips"'):], DEMOTED)
    assert _badge_words(run_row) == ["skip"] and "not counted: driver.nvidia_smi failed" in run_row

    record = acceptance_decide(node=node, run=run, decision="quarantined", user=admin_user, note="")
    record_page = operator_client.get(record.get_absolute_url()).content.decode()
    assert _badge_words(_row(record_page, "<code>%s</code>" % DEMOTED)[:-1]) == ["skip"]

    compare = operator_client.get(reverse("runs:compare", args=[earlier.id, run.id])).content.decode()
    assert _badge_words(_row(compare, DEMOTED)) == ["pass", "skip"]

    token = token_issue(user=admin_user, name="t")[1]
    api = client.get("/api/v1/runs/%s/" % run.id, **bearer(token)).json()
    assert [c["status"] for c in api["report"]["checks"] if c["id"] == DEMOTED] == ["skip"]
    junit = ElementTree.fromstring(client.get("/api/v1/runs/%s/junit.xml" % run.id, **bearer(token)).content)
    case = next(c for c in junit.iter("testcase") if c.get("name") == DEMOTED)
    assert case.find("skipped") is not None

    for page in (run_page, record_page, compare):
        assert "ran" not in _badge_words(page)


def test_the_compare_page_lists_a_check_only_one_run_has_as_only_in_that_run(operator_client):
    node = Node.objects.create(name="h200", transport="local")
    full = real_report()
    fewer = copy.deepcopy(full)
    dropped = fewer["checks"].pop()["id"]
    a, b = stored_run(node, full), stored_run(node, fewer)
    page = operator_client.get(reverse("runs:compare", args=[a.id, b.id])).content.decode()
    changed = page[page.index('id="checks-changed"'):page.index("</table>", page.index('id="checks-changed"'))]
    assert ">%s<" % dropped not in changed
    only = page[page.index('id="checks-only-a"'):page.index("</table>", page.index('id="checks-only-a"'))]
    assert ">%s<" % dropped in only and "only in run A" in page
    reverse_page = operator_client.get(reverse("runs:compare", args=[b.id, a.id])).content.decode()
    only_b = reverse_page[reverse_page.index('id="checks-only-b"'):]
    assert ">%s<" % dropped in only_b[:only_b.index("</table>")] and "only in run B" in reverse_page
