"""The evidence bundle of an acceptance record: its link says what the zip holds for that record's run."""

import io
import zipfile

import pytest
from django.urls import reverse

from cudaweb.fleet import evidence
from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return Node.objects.create(name="h200-new", transport=Node.Transport.LOCAL)


def _link_and_names(operator_client, record):
    page = operator_client.get(record.get_absolute_url()).content.decode()
    link = page[page.index('id="export-bundle"'):page.index("</a>", page.index('id="export-bundle"'))]
    bundle = operator_client.get(reverse("fleet:acceptance_bundle", args=[record.id])).content
    return link, sorted(zipfile.ZipFile(io.BytesIO(bundle)).namelist())


def test_the_link_of_a_full_run_promises_no_series_and_the_zip_holds_none(operator_client, node, admin_user):
    run = stored_run(node, real_report("h200-gpus2-full.json"), mode="full")
    record = acceptance_decide(node=node, run=run, decision="accepted", user=admin_user, note="")
    link, names = _link_and_names(operator_client, record)
    assert names == ["MANIFEST.json", "history.json", "record.json"]
    assert "as CSV" not in link and "no burn-in series: a full run has none" in link


def test_the_link_of_a_burnin_run_names_its_series_and_the_zip_holds_it(operator_client, node, admin_user):
    run = stored_run(node, real_report("burnin/h200-burnin-300s.json"), mode="burnin")
    record = acceptance_decide(node=node, run=run, decision="accepted", user=admin_user, note="")
    link, names = _link_and_names(operator_client, record)
    assert names == ["MANIFEST.json", "burnin-series.csv", "history.json", "record.json"]
    assert "this run&#x27;s burn-in series as CSV" in link and "no burn-in series" not in link
    assert evidence.bundle_holds(record) == "this record, the node's last 30 days, this run's burn-in series as CSV"
