"""A check's evidence on the run page: escaped, its start and end shown with what was left out, the whole a download."""

from django.urls import reverse

from cudaweb.nodes.models import Node
from tests.drift.helpers import real_report, scaled, stored_run


def test_a_huge_evidence_blob_is_clipped_escaped_and_downloadable(operator_client):
    node = Node.objects.create(name="noisy", transport="local")
    run = stored_run(node, scaled(real_report(), statuses={"driver.xid": "fail"}))
    evidence = ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
                + "<script>alert(1)</script>\n" * 40000 + "the last line\n")
    run.checks.filter(check_id="driver.xid").update(evidence=evidence)
    page = operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<mark>NVRM: Xid (PCI:0000:3b:00): 79" in page  # the line the playbook matched, marked
    assert "characters not shown here" in page and "the last line" in page
    assert len(page) < 200_000
    url = reverse("runs:check_evidence", args=[run.id, "driver.xid"])
    assert url in page
    download = operator_client.get(url)
    assert download["Content-Type"].startswith("text/plain") and "attachment" in download["Content-Disposition"]
    assert download.content.decode() == evidence


def test_short_evidence_is_shown_whole_without_a_download_link(operator_client):
    node = Node.objects.create(name="quiet", transport="local")
    run = stored_run(node, scaled(real_report(), statuses={"driver.xid": "fail"}))
    page = operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode()
    assert "characters not shown here" not in page
    assert reverse("runs:check_evidence", args=[run.id, "driver.xid"]) not in page
