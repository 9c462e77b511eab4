"""The fleet page, node page and comparison page: filters, bulk validation, timeline, charts, query counts."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from cudaweb.drift.demo import seed
from cudaweb.fleet.selectors import fleet_overview
from cudaweb.nodes.models import HostKey, Node
from cudaweb.validation.models import CheckResult, ValidationRun
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db
OVERVIEW_QUERIES = 8  # counts, failing, models, per day, attention and its count, failing runs, their checks


def _queries(client, url):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured), response.content.decode()


def test_seed_demo_builds_history_from_the_real_reports():
    nodes = seed(nodes=12, runs_per_node=6, seed=1)
    assert ValidationRun.objects.count() == 72 and Node.objects.count() == 12
    assert CheckResult.objects.filter(run__node=nodes[0]).count() == 6 * len(real_report()["checks"])
    node = Node.objects.get(id=nodes[0].id)
    assert node.gpu_model == "NVIDIA H200" and node.baseline_id and node.last_run_id and node.layer_status
    assert node.status == {"PASSED": "passing", "WARNED": "warning", "FAILED": "failing"}[node.last_run.status]
    bf16 = [r.metrics["matmul_bf16_tflops"] for r in ValidationRun.objects.filter(node=node)]
    assert all(650 < v < 900 for v in bf16) and len(set(bf16)) > 1  # real figures with run-to-run noise


def test_fleet_page_filters_counts_and_layer_cells(operator_client):
    good = Node.objects.create(name="good", transport="local", labels=["rack-1"])
    stored_run(good, real_report())
    bad = Node.objects.create(name="bad", transport="local", labels=["rack-2"])
    stored_run(bad, scaled(real_report(), statuses={"driver.xid": "fail"}))
    Node.objects.create(name="fresh", transport="local", labels=["rack-2"])
    url = reverse("fleet:node_list")
    page = operator_client.get(url).content.decode()
    counts = page[page.index('id="status-counts"'):page.index("</div>", page.index('id="status-counts"'))]
    tiles = re.findall(r'<span class="n">(\d+)</span><span class="what">([^<]+)</span>', counts)
    # "fresh" is this host (local): no host key to accept; the tile names its state as its table badge does
    assert tiles == [("3", "nodes"), ("1", "Not validated"), ("1", "Passing"), ("1", "Failing")]
    assert ('<span class="cell-box tone-fail" title="L1: fail" aria-hidden="true">✕</span>'
            '<span class="sr-only">L1 fail') in page
    assert re.search(r'<span class="root-cause-cell" title="[^"]*">L1 driver.xid</span>', page)  # the root cause
    assert 'id="layer-legend"' in page
    names = lambda html: re.findall(r'<td><a href="/nodes/[0-9a-f-]+/"><b>([\w-]+)</b></a>', html)  # noqa: E731
    assert names(operator_client.get(url + "?failing_layer=L1").content.decode()) == ["bad"]
    assert names(operator_client.get(url + "?label=rack-2").content.decode()) == ["bad", "fresh"]
    assert names(operator_client.get(url + "?status=passing").content.decode()) == ["good"]
    assert names(operator_client.get(url + "?q=fre").content.decode()) == ["fresh"]
    assert names(operator_client.get(url + "?gpu_model=NVIDIA+H200&sort=-name").content.decode()) == ["good", "bad"]


def test_fleet_page_paginates_and_its_queries_do_not_grow_with_nodes(operator_client):
    seed(nodes=5, runs_per_node=3, seed=2)
    small, _ = _queries(operator_client, reverse("fleet:node_list"))
    seed(nodes=70, runs_per_node=3, seed=3, prefix="more")
    large, page = _queries(operator_client, reverse("fleet:node_list"))
    assert large == small
    assert "page 1 of 2" in page


def test_fleet_overview_reads_in_a_fixed_number_of_queries_however_many_nodes_fail():
    """The overview's panels (issue 33: 1,000 nodes took 1.2 s): counts per day from the run index, the root
    cause of every failing node's last run in one query for the runs and one for their checks."""
    seed(nodes=4, runs_per_node=3, seed=2)
    stored_run(Node.objects.create(name="bad-0", transport="local"),
               scaled(real_report(), statuses={"driver.xid": "fail"}))
    with CaptureQueriesContext(connection) as small:
        fleet_overview()
    seed(nodes=30, runs_per_node=3, seed=3, prefix="more")
    for i, check in enumerate(("driver.xid", "cuda.matmul", "comm.nccl", "driver.xid")):
        stored_run(Node.objects.create(name="bad-%d" % (i + 1), transport="local"),
                   scaled(real_report(), statuses={check: "fail"}))
    with CaptureQueriesContext(connection) as large:
        overview = fleet_overview()
    assert overview["failing_total"] == 5 and sum(group["n"] for group in overview["by_cause"]) == 5
    assert len(large) == len(small) == OVERVIEW_QUERIES
    per_day = next(q["sql"] for q in large.captured_queries if "AT TIME ZONE" in q["sql"] or "django_datetime" in
                   q["sql"])
    assert "COUNT(*)" in per_day  # read from run_created_status_idx alone: no column outside it


def test_bulk_validation_by_label_shows_each_nodes_progress(operator_client):
    nodes = [Node.objects.create(name="n%d" % i, transport="local", labels=["pool-a"]) for i in range(3)]
    Node.objects.create(name="elsewhere", transport="local", labels=["pool-b"])
    response = operator_client.post(reverse("fleet:nodes_validate"), {"label": "pool-a", "mode": "quick"})
    runs = ValidationRun.objects.filter(trigger=ValidationRun.Trigger.BULK)
    assert sorted(r.node.name for r in runs) == ["n0", "n1", "n2"]
    page = operator_client.get(response.url).content.decode()
    assert "Validating 3 nodes" in page and page.count(">PENDING<") == 3 and "data-poll-url" in page
    ssh = Node.objects.create(name="untrusted", address="198.18.0.9", username="ops", transport="ssh")
    operator_client.post(reverse("fleet:nodes_validate"), {"nodes": [str(ssh.id), str(nodes[0].id)], "mode": "quick"})
    assert not ValidationRun.objects.filter(node=ssh).exists()  # no accepted host key: skipped, and said so
    HostKey.objects.create(node=ssh, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="x")
    assert not ssh.host_key_accepted


def test_node_page_timeline_chart_and_constant_queries(operator_client):
    node = Node.objects.create(name="h200-a", transport="local")
    first = stored_run(node, real_report())
    for _ in range(3):
        stored_run(node, real_report())
    few, _ = _queries(operator_client, node.get_absolute_url())
    for _ in range(30):
        stored_run(node, scaled(real_report(), {"h2d_pinned_gbs": 0.97}))
    last = stored_run(node, scaled(real_report(), inventory={"nccl": "2.29.1"}))
    many, page = _queries(operator_client, node.get_absolute_url())
    assert many == few
    charts = json.loads(re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', page, re.S)
                        .group(1))
    assert len(charts["h2d_pinned_gbs"]["points"]) == 35 and charts["h2d_pinned_gbs"]["band"]["count"] == 1
    assert "nccl 2.28.9 → 2.29.1" in page and "page 1 of 2" in page
    assert "/static/vendor/chartjs/chart.umd.min.js" in page and "cdn" not in page.lower()
    compare_url = reverse("runs:compare", args=[first.id, last.id])
    assert operator_client.get(reverse("runs:compare_pick") + "?cmp=%s&cmp=%s" % (last.id, first.id)
                               ).url == compare_url


def test_compare_page_shows_status_software_and_metric_changes(operator_client):
    node = Node.objects.create(name="h200-a", transport="local")
    a = stored_run(node, real_report())
    b = stored_run(node, scaled(real_report(), {"nccl_busbw_gbs": 0.5}, {"driver_version": "580.172.01"},
                                {"comm.nccl": "warn"}))
    count, page = _queries(operator_client, reverse("runs:compare", args=[a.id, b.id]))
    assert "<td>comm.nccl</td>" in page and "580.159.04" in page and "580.172.01" in page
    assert "-50.0 %" in page and 'class="drift-row"><td>NCCL busbw (largest)' in page
    assert count <= 7  # one more than before roles: the user's role groups
