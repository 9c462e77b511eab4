"""/metrics for Prometheus: one collector that reads the database on each scrape, in six queries whatever the size
of the fleet, plus one Redis round trip for the queue depth.

Per node the series carry `node`, `gpu_model` and `labels` (the node's labels sorted and joined with commas: one
series per node, however many labels it has; match one with labels=~"(.*,)?rack-07(,.*)?")."""

import hmac

from django.conf import settings
from django.db.models import Count
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from cudaweb.accounts.roles import has_role
from cudaweb.api.gpu_metrics import GpuCollector
from cudaweb.api.services import token_user
from cudaweb.drift.catalog import METRICS
from cudaweb.health.metrics import LoopCollector
from cudaweb.nodes.models import Node
from cudaweb.nodes.states import STATES, state_key
from cudaweb.playbooks.root_cause import runs_root_causes
from cudaweb.validation import queue
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.selectors import is_flaky_node, nodes_flaky

NODE_LABELS = ("node", "gpu_model", "labels")
VERDICTS = ("pass", "warn", "fail")
# The headline figures, each its own series (name, help, the key in Node.metrics).
HEADLINES = (
    ("cudaweb_node_matmul_bf16_tflops", "bf16 matmul of the node's worst GPU (TFLOP/s), last report",
     "matmul_bf16_tflops"),
    ("cudaweb_node_h2d_pinned_gigabytes_per_second", "pinned host-to-device copy (GB/s), last report",
     "h2d_pinned_gbs"),
    ("cudaweb_node_nccl_busbw_gigabytes_per_second", "NCCL all-reduce bus bandwidth, largest size (GB/s), last report",
     "nccl_busbw_gbs"),
)


def _node_labels(row):
    return [row["name"], row["gpu_model"] or "", ",".join(sorted(str(label) for label in row["labels"] or []))]


def _drift_flags(drift):
    """(kind, metric) of every drift the last run shows: a metric against the baseline, a metric below its peers,
    a software change."""
    drift = drift or {}
    flags = {("baseline", row.get("metric", "")) for row in drift.get("metrics") or [] if row.get("drift")}
    flags |= {("peers", row.get("metric", "")) for row in drift.get("peers") or [] if row.get("below")}
    flags |= {("software", row.get("key", "")) if isinstance(row, dict) else ("software", str(row))
              for row in drift.get("software") or []}
    return sorted(flags)


NO_ROOT_CAUSE = (ValidationRun.Status.PASSED, *ValidationRun.LIVE)


def _root_causes(failing):
    """cudaweb_node_root_cause_info{node, check, playbook} 1 per node whose last run did not pass: the check (the
    run's state where it never reached a verdict, e.g. UNREACHABLE) and its playbook ("" when none): two queries."""
    info = GaugeMetricFamily("cudaweb_node_root_cause_info", "1 per node whose last run did not pass: the check it "
                             "comes down to (else the run's state) and that check's playbook",
                             labels=("node", "check", "playbook"))
    runs = ValidationRun.objects.filter(id__in=[run_id for _, run_id in failing]).only(
        "id", "status", "finished", "reason")
    causes = runs_root_causes(runs=list(runs)) if failing else {}
    for name, run_id in failing:
        cause = causes.get(run_id)
        if cause is not None:
            info.add_metric([name, cause["check"] or cause["status"], (cause["playbook"] or {}).get("id", "")], 1.0)
    return info


class FleetCollector:
    """Reads the fleet per scrape (prometheus_client calls collect())."""

    def collect(self):
        # `status` takes the state keys the pages and the API's `state` use (cudaweb.nodes.states): a node no run
        # has judged is key_to_accept or not_validated here too, never the stored new / ready.
        status = GaugeMetricFamily("cudaweb_node_status", "1 for the node's current state (the fleet page's and the "
                                   "API's word), 0 for the others", labels=NODE_LABELS + ("status",))
        verdict = GaugeMetricFamily("cudaweb_node_last_verdict", "1 for the agent's verdict of the node's last run "
                                    "(all 0 when that run has no report)", labels=NODE_LABELS + ("verdict",))
        validated = GaugeMetricFamily("cudaweb_node_last_validation_timestamp_seconds",
                                      "when the node's last run ended (Unix time)", labels=NODE_LABELS)
        drifted = GaugeMetricFamily("cudaweb_node_drifted", "1 when the node's last run drifted from its baseline or "
                                    "its peers", labels=NODE_LABELS)
        drift = GaugeMetricFamily("cudaweb_node_drift", "1 per drift of the last run: kind baseline (metric worse "
                                  "than the baseline), peers (below the fleet's band), software (changed)",
                                  labels=NODE_LABELS + ("kind", "metric"))
        headlines = [(GaugeMetricFamily(name, text, labels=NODE_LABELS), key) for name, text, key in HEADLINES]
        flaky = GaugeMetricFamily("cudaweb_node_flaky", "1 when the node had flaky checks (failed or warned on a "
                                  "figure, then passed) in CUDAWEB_FLAKY_LIMIT runs or more within CUDAWEB_FLAKY_DAYS "
                                  "days", labels=NODE_LABELS)
        flaky_runs = GaugeMetricFamily("cudaweb_node_flaky_runs", "runs with a flaky check within CUDAWEB_FLAKY_DAYS "
                                       "days", labels=NODE_LABELS)
        flaky_counts = nodes_flaky()

        rows = Node.objects.order_by("name").values("id", "name", "gpu_model", "labels", "status", "transport",
                                                    "drifted", "metrics", "last_run_id", "last_run__status",
                                                    "last_run__verdict", "last_run__finished", "last_run__drift")
        failing = []
        for row in rows.iterator(chunk_size=500):
            if row["last_run_id"] and row["last_run__status"] not in NO_ROOT_CAUSE:
                failing.append((row["name"], row["last_run_id"]))
            labels = _node_labels(row)
            state = state_key(status=row["status"], judged=row["last_run_id"] is not None,
                              local=row["transport"] == Node.Transport.LOCAL)
            for value in STATES:
                status.add_metric(labels + [value], 1.0 if state == value else 0.0)
            for value in VERDICTS:
                verdict.add_metric(labels + [value], 1.0 if row["last_run__verdict"] == value else 0.0)
            if row["last_run__finished"] is not None:
                validated.add_metric(labels, row["last_run__finished"].timestamp())
            drifted.add_metric(labels, 1.0 if row["drifted"] else 0.0)
            count = flaky_counts.get(row["id"], 0)
            flaky.add_metric(labels, 1.0 if is_flaky_node(count) else 0.0)
            flaky_runs.add_metric(labels, float(count))
            for kind, metric in _drift_flags(row["last_run__drift"]):
                drift.add_metric(labels + [kind, metric], 1.0)
            for family, key in headlines:
                value = (row["metrics"] or {}).get(key)
                if isinstance(value, (int, float)) and key in METRICS:
                    family.add_metric(labels, float(value))
        yield from (status, verdict, validated, drifted, drift, flaky, flaky_runs,
                    *(family for family, _ in headlines))
        yield _root_causes(failing)

        runs = GaugeMetricFamily("cudaweb_runs", "validation runs kept, by state", labels=("state",))
        counts = dict(ValidationRun.objects.order_by().values_list("status").annotate(n=Count("id")))
        for state in ValidationRun.Status.values:
            runs.add_metric([state], counts.get(state, 0))
        yield runs

        up = GaugeMetricFamily("cudaweb_broker_up", "1 when the task queue (Redis) answered this scrape")
        depth = GaugeMetricFamily("cudaweb_queue_depth", "tasks waiting in the Celery queue (absent when Redis "
                                  "does not answer)")
        client = queue.broker_client(timeout_s=1.0)
        try:
            depth.add_metric([], queue.queue_depth(client))
            up.add_metric([], 1.0)
            yield depth
        except queue.BROKER_ERRORS:
            up.add_metric([], 0.0)
        finally:
            client.close()
        yield up


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(FleetCollector())
REGISTRY.register(GpuCollector())  # per GPU, in dcgm-exporter's shape (cudaweb/api/gpu_metrics.py)
REGISTRY.register(LoopCollector())  # the loop's states, events and breaker (cudaweb.health)


def _authorised(request):
    """A Bearer token of any role, or the one CUDAWEB_METRICS_TOKEN names (a scraper that is no user)."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    if settings.CUDAWEB_METRICS_TOKEN and hmac.compare_digest(token.encode(), settings.CUDAWEB_METRICS_TOKEN.encode()):
        return True
    user = token_user(token)
    return user is not None and has_role(user, "viewer")


@csrf_exempt  # a POST is a wrong method (405), not a forged form (403): this view changes nothing
def metrics(request):
    if request.method not in ("GET", "HEAD"):
        response = HttpResponse("GET only\n", status=405, content_type="text/plain")
        response["Allow"] = "GET, HEAD"
        return response
    if not _authorised(request):
        response = HttpResponse("send Authorization: Bearer <API token or CUDAWEB_METRICS_TOKEN>\n", status=401,
                                content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="cudaweb metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
