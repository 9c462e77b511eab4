"""The face: the fleet overview, the status words a page shows (never "Ready" for a node no run judged, never a
green "no drift" with nothing compared, the agent's "skip" in its own tone for a check demoted above a failed
layer), figures with units and expectations, and the components every page is built from."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from cudaweb.fleet.selectors import fleet_overview
from cudaweb.nodes.models import HostKey, Node
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parent.parent.parent
CPU_HOST = REPO / "tests" / "fixtures" / "real"


def _failing(name, failing_check, model="NVIDIA H200"):
    node = Node.objects.create(name=name, transport="local")
    stored_run(node, scaled(real_report(), statuses={failing_check: "fail"}, inventory={"gpu_model": model}))
    return node


def test_overview_groups_failing_nodes_by_layer_and_root_cause(operator_client):
    _failing("a", "driver.xid")
    _failing("b", "driver.xid")
    _failing("c", "cuda.matmul")
    good = Node.objects.create(name="good", transport="local")
    stored_run(good, real_report())
    Node.objects.create(name="fresh", transport="local")
    overview = fleet_overview()
    assert overview["total"] == 5 and overview["failing_total"] == 3
    assert overview["by_layer"] == [{"layer": "L1", "key": "L1", "n": 2}, {"layer": "L4", "key": "L4", "n": 1}]
    assert [(g["check"], g["n"]) for g in overview["by_cause"]] == [("driver.xid", 2), ("cuda.matmul", 1)]
    assert [(m["gpu_model"], m["n"], m["failing"]) for m in overview["by_model"]] == [
        ("NVIDIA H200", 4, 3), ("", 1, 0)]
    assert overview["per_day"][-1]["fail"] == 3 and overview["per_day"][-1]["pass"] == 1
    assert overview["validated_days"] == 4
    assert [n.name for n in overview["attention"]] == ["a", "b", "c"]
    assert overview["attention"][0].root["check"] == "driver.xid"
    page = operator_client.get(reverse("fleet:node_list")).content.decode()
    for section in ("attention", "by-layer", "by-cause", "by-model", "per-day"):
        assert 'id="%s"' % section in page
    cause = page[page.index('id="by-cause"'):page.index('id="by-model"')]
    assert "<code>driver.xid</code>" in cause and '<span class="num">2</span>' in cause


def test_a_node_no_run_has_judged_is_not_shown_ready(operator_client, admin_user):
    node = Node.objects.create(name="keyed", address="10.0.0.9", username="ops")
    HostKey.objects.create(node=node, key_type="ssh-ed25519", key_base64="AAAA", fingerprint_sha256="SHA256:x")
    from cudaweb.nodes.services import host_key_accept
    host_key_accept(node=node, user=admin_user)
    assert Node.objects.get(id=node.id).status == "ready"
    for url in (reverse("fleet:node_list"), node.get_absolute_url()):
        page = operator_client.get(url).content.decode()
        assert "Not validated" in page and ">Ready<" not in page


def test_a_run_without_baseline_or_peers_is_not_shown_as_no_drift(operator_client):
    node = Node.objects.create(name="lonely", transport="local")
    run = stored_run(node, scaled(real_report(), inventory={"gpu_model": "NVIDIA B200"}))
    panel = operator_client.get(run.get_absolute_url()).content.decode().split('id="drift-panel"', 1)[1]
    panel = panel.split("</section>", 1)[0]
    assert "no drift" not in panel and "not compared" in panel and "tone-pass" not in panel


def test_a_check_that_ran_above_a_failed_layer_is_shown_skip_in_its_own_tone_not_counted(operator_client):
    node = Node.objects.create(name="cpu-host", transport="local")
    report = real_report()
    for check in report["checks"]:
        if check["id"] == "comm.gloo":
            check.update(status="skip", blocked_by="driver.nvidia_smi", summary=check["summary"] +
                         " (ran, but cannot count as a pass above failed driver.nvidia_smi)")
        if check["id"] == "driver.nvidia_smi":
            check.update(status="fail", summary="nvidia-smi is not on PATH", signatures=["nvidia_smi_missing"])
    report["verdict"] = "fail"
    run = stored_run(node, report)
    page = operator_client.get(run.get_absolute_url()).content.decode()
    skips = page[page.index('id="skips"'):page.index('id="passes"')]
    row = skips[skips.index(">comm.gloo<"):].split("</tr>", 1)[0]
    # the agent's word, as the API, JUnit and the compare page say it; the tone and "not counted" tell it apart
    assert '<span class="badge tone-ran"' in row and ">skip<" in row and "not counted: driver.nvidia_smi failed" in row
    assert "(ran, but" not in row  # the badge says it once


def test_figures_carry_units_and_the_expectation_of_their_gpu_model(operator_client):
    node = Node.objects.create(name="h200", transport="local")
    run = stored_run(node, real_report())
    figures = operator_client.get(run.get_absolute_url()).content.decode().split('id="figures"', 1)[1]
    figures = figures.split("</section>", 1)[0]
    bf16 = figures[figures.index("bf16 matmul"):].split("</tr>", 1)[0]
    # 780.99 measured (a report of before issue 22's held timing); the agent's table: 68.9 % of the H200's 989.5
    # TFLOP/s dense peak, held at its power limit
    assert re.search(r'<span class="value">781</span> <span class="expect">of 682</span> '
                     r'<span class="unit">TFLOP/s', bf16)
    for row in figures.split("<tr>")[2:]:
        assert '<span class="unit">' in row, row  # every figure has its unit


TEMPLATES = REPO / "templates"


def test_every_page_uses_the_components_and_the_stylesheet_has_both_schemes():
    css = (REPO / "static" / "cudaweb" / "style.css").read_text()
    assert "@media (prefers-color-scheme: dark)" in css
    light = set(re.findall(r"(--[a-z0-9-]+):", css.split("@media (prefers-color-scheme: dark)")[0]))
    dark = set(re.findall(r"(--[a-z0-9-]+):", css.split("@media (prefers-color-scheme: dark)")[1].split("\n}\n")[0]))
    assert dark and dark <= light  # the dark scheme redefines the light scheme's names, nothing new
    pages = [p for p in TEMPLATES.rglob("*.html") if "components" not in p.parts]
    # no status badge written by hand: the old per-page classes are gone
    offending = [str(p) for p in pages if re.search(r'class="(status|check) [sc]-', p.read_text())]
    assert offending == []


def test_the_network_heatmap_has_units_shades_refreshes_and_names_a_missing_nccl_figure(operator_client):
    from cudaweb.network.models import NetworkTest, PairResult

    a, b, c = (Node.objects.create(name=n, transport="local") for n in ("net-a", "net-b", "net-c"))
    test = NetworkTest.objects.create(status="RUNNING", plan="matrix")
    test.nodes.set([a, b, c])
    PairResult.objects.create(test=test, round=1, node_a=a, node_b=b, status="pass", gloo_latency_us=100.0,
                              gloo_busbw_gbs=2.0, nccl_busbw_gbs=45.5)
    PairResult.objects.create(test=test, round=1, node_a=a, node_b=c, status="pass", gloo_latency_us=450.0,
                              gloo_busbw_gbs=1.0)
    url = reverse("network:detail", args=[test.id])
    page = operator_client.get(url).content.decode()
    assert 'data-poll-url="%s?fragment=1"' % url in page  # refreshes itself while the test runs
    matrix = page[page.index('id="matrix"'):page.index("</table>", page.index('id="matrix"'))]
    assert 'class="heat-1"' in matrix and 'class="heat-5"' in matrix  # 1x and 4.5x the best latency
    assert '<span class="unit">µs</span>' in matrix and '<span class="unit">GB/s</span>' in matrix
    assert 'class="empty"' in matrix  # b-c not tested yet
    pairs = page[page.index('id="pairs-card"'):]
    assert "not run: no GPU that torch can use (gloo only)" in pairs
    fragment = operator_client.get(url + "?fragment=1").content.decode()
    assert fragment.lstrip().startswith("{#") is False and 'data-live="1"' in fragment and "<html" not in fragment
    test.status = "DONE"
    test.save()
    assert 'data-live="0"' in operator_client.get(url + "?fragment=1").content.decode()
    assert "data-poll-url" not in operator_client.get(url).content.decode()


def test_triage_shows_confident_answers_apart_from_guesses_with_the_fix_open(operator_client):
    body = operator_client.post(reverse("playbooks:triage"), {
        "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."}).content.decode()
    confident = body[body.index('id="answers-confident"'):].split("</section>", 1)[0]
    assert "CUDA out of memory" in confident and '<ol class="fixes">' in confident
    assert "expandable_segments" in confident.split("<details>", 1)[0]  # the fixes are open, not folded
    both = operator_client.post(reverse("playbooks:triage"), {"text": OOM_THEN_WATCHDOG}).content.decode()
    confident = both[both.index('id="answers-confident"'):].split("</section>", 1)[0]
    guesses = both[both.index('id="answers-guess"'):].split("</section>", 1)[0]
    assert "· confident" in confident and "· confident" not in guesses and "a guess" in guesses
    assert "a guess" not in confident and '<ol class="fixes">' not in guesses  # a guess keeps its fixes folded


OOM_THEN_WATCHDOG = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 139.81 GiB of which 1.02 GiB is free.\n"
                     "[rank0]: Watchdog caught collective operation timeout")


def test_figures_of_a_hostile_inventory_are_shown_without_an_expectation():
    """The property test (tests/properties) found it: a report whose gpu_model is not a string."""
    from cudaweb.drift.figures import run_figures
    from cudaweb.validation.models import ValidationRun

    run = ValidationRun(status="FAILED", inventory={"gpu_model": True},  # as read back, not stored
                        metrics={"matmul_bf16_tflops": 700.0, "h2d_pinned_gbs": float("nan")})
    assert [(f["name"], f["expected"]) for f in run_figures(run=run)] == [("matmul_bf16_tflops", None)]
    run.inventory = ["not", "a", "dict"]
    assert run_figures(run=run)[0]["value"] == 700.0
