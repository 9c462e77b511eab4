"""The Prometheus alert rules and the Grafana dashboard that ship in deploy/: the rules pass promtool's check and
their unit tests (deploy/prometheus/alerts_test.yml), the dashboard is Grafana JSON on a Prometheus datasource
variable, and every series either names is one a scrape of /metrics has, so that renaming a series fails here."""

import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from cudaweb.drift.demo import seed
from cudaweb.health.models import Breaker, HealthEvent, NodeLoop
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from tests.api.conftest import bearer
from tests.drift.helpers import real_report, scaled, stored_run

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPO / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "cudaweb.json"
PROMTOOL = REPO / "var" / "prometheus" / "usr" / "bin" / "promtool"  # make promtool
# PromQL words that look like metric names where they stand alone.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
            "inf", "nan"}


def _promtool():
    found = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    if not found:
        pytest.skip("promtool is missing: `make promtool` (part of `make test`) unpacks it from Debian's prometheus "
                    "package")
    return found


def _promtool_run(*args):
    done = subprocess.run([_promtool(), *args], capture_output=True, timeout=120)
    return done.returncode, (done.stdout + done.stderr).decode()


def metric_names(expr):
    """The metric names a PromQL expression reads: what is left once strings, label matchers, ranges, grouping
    clauses, function calls and keywords are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        if match.group() in KEYWORDS or expr[match.end():].lstrip().startswith("("):
            continue
        names.add(match.group())
    return names


def _rules():
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def _dashboard():
    return json.loads(DASHBOARD.read_text())


def _panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row keeps its panels


def _dashboard_names(dashboard):
    names = set()
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            names |= metric_names(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            label_values = re.fullmatch(r"label_values\((\w+)\s*,\s*\w+\)", query)
            names |= {label_values.group(1)} if label_values else metric_names(query)
    return names


def test_metric_names_reads_names_not_labels_functions_or_keywords():
    assert metric_names('sum by (class) (rate(x_total{class="hardware", a=~"b|c"}[15m])) > 0') == {"x_total"}
    assert metric_names('(a{s="f"} == 1) * on (node) group_left (check, playbook) b or on (node) c == 1') == \
        {"a", "b", "c"}
    assert metric_names("time() - d > 8 * 86400 and absent(e) unless f offset 5m") == {"d", "e", "f"}


def test_the_alert_rules_pass_promtool_check():
    code, output = _promtool_run("check", "rules", str(ALERTS))
    assert code == 0 and "SUCCESS" in output, output[-3000:]


def test_the_alert_rules_pass_their_promtool_unit_tests():
    """alerts_test.yml: each alert fires on its series (labels and annotations naming the node, as expected), waits
    its `for:`, and a healthy fleet fires none."""
    code, output = _promtool_run("test", "rules", str(ALERTS_TEST))
    assert code == 0, output[-3000:]


def test_every_alert_has_a_severity_a_wait_and_text_naming_what_it_is_about():
    tested = {test["alertname"] for group in yaml.safe_load(ALERTS_TEST.read_text())["tests"]
              for test in group["alert_rule_test"] if test["exp_alerts"]}
    for rule in _rules():
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule.get("for"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        per_node = {name for name in metric_names(rule["expr"]) if name.startswith(("cudaweb_node_", "cudaweb_gpu_"))
                    and name != "cudaweb_gpu_uuid_conflicts"}  # the series labelled by node
        if per_node and not re.search(r"\b(?:sum|count|max|min|avg)\b", rule["expr"]):
            assert "$labels.node" in rule["annotations"]["summary"], rule["alert"]  # a node's alert names it
        assert rule["alert"] in tested, "%s fires in no case of alerts_test.yml" % rule["alert"]


def test_the_dashboard_is_grafana_json_on_a_prometheus_datasource_variable():
    dashboard = _dashboard()
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = list(_panels(dashboard))
    assert len({panel["id"] for panel in panels}) == len(panels) and dashboard["uid"]
    titles = " ".join(panel["title"].lower() for panel in panels)
    for subject in ("failing", "drift", "hardware", "breaker", "loop states", "matmul", "temperature"):
        assert subject in titles
    for panel in panels:
        if panel["type"] == "row":
            continue
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and panel["targets"], panel["title"]
        for target in [panel, *panel["targets"]]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


@pytest.fixture
def seeded_scrape(client, settings, redis_server):
    """Sample names of one scrape of a seeded database: a demo fleet, a failing node, a drifted one, the loop with
    open hardware events, an open breaker, a node in rma, and Redis up (so the queue depth is there)."""
    settings.CELERY_BROKER_URL = redis_server
    settings.CUDAWEB_METRICS_TOKEN = "m" * 40
    nodes = seed(nodes=4, runs_per_node=2)
    failing = Node.objects.create(name="gpu-failing", transport=Node.Transport.LOCAL)
    stored_run(failing, scaled(real_report(), statuses={"driver.gpu_health": "fail"}))
    drifting = Node.objects.create(name="gpu-drifting", transport=Node.Transport.LOCAL)
    stored_run(drifting, real_report("h200-gpus1-standard.json"))
    Node.objects.filter(id=drifting.id).update(baseline=ValidationRun.objects.filter(node=drifting).get())
    stored_run(drifting, scaled(real_report("h200-gpus1-standard.json"), {"matmul_bf16_tflops": 0.5}))
    now = timezone.now()
    HealthEvent.objects.create(node=nodes[0], check_id="driver.xid", signature="gpu_fallen_off_bus",
                               severity=HealthEvent.Severity.FAIL, klass=HealthEvent.Klass.HARDWARE,
                               first_seen=now - timedelta(minutes=5), last_seen=now)
    NodeLoop.objects.create(node=nodes[1], state="rma", since=now)
    Breaker.objects.update_or_create(id=1, defaults={"is_open": True, "reason": "test", "opened_at": now})
    response = client.get("/metrics", **bearer("m" * 40))
    assert response.status_code == 200
    return {sample.name for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


@pytest.mark.django_db
def test_every_series_the_rules_and_the_dashboard_name_is_on_metrics(seeded_scrape):
    """A series renamed on /metrics (or misspelt in deploy/) fails here, not on a board that goes blank."""
    in_rules = set().union(*(metric_names(rule["expr"]) for rule in _rules()))
    in_dashboard = _dashboard_names(_dashboard())
    assert {"cudaweb_node_status", "cudaweb_node_root_cause_info", "cudaweb_loop_breaker_open",
            "cudaweb_health_events_open", "cudaweb_loop_nodes", "cudaweb_node_drifted"} <= in_rules
    assert {"cudaweb_gpu_matmul_bf16_tflops", "cudaweb_node_drift", "cudaweb_health_event_sightings_total"} <= \
        in_dashboard
    assert sorted(in_rules - seeded_scrape) == []
    assert sorted(in_dashboard - seeded_scrape) == []
