"""Reads for history pages: a node's metric series with its baseline and peer band, and run comparisons."""

from cudaweb.drift import catalog
from cudaweb.drift.models import PeerBand
from cudaweb.drift.services import metric_rows, software_diff, thresholds
from cudaweb.validation.models import CheckResult, ValidationRun

SERIES_RUNS = 100


def node_charts(node):
    """{metric: {label, unit, points: [[iso time, value]...], baseline, band}} over the node's last runs."""
    runs = list(ValidationRun.objects.filter(node=node, status__in=ValidationRun.VERDICT_STATUSES)
                .order_by("-created").values_list("created", "metrics")[:SERIES_RUNS])
    bands = {b.metric: b for b in PeerBand.objects.filter(gpu_model=node.gpu_model)} if node.gpu_model else {}
    baseline = node.baseline.metrics if node.baseline else {}
    charts = {}
    for name, metric in catalog.METRICS.items():
        points = [[created.isoformat(), metrics[name]] for created, metrics in reversed(runs) if name in metrics]
        if not points:
            continue
        band = bands.get(name)
        charts[name] = {"label": metric.label, "unit": metric.unit, "points": points, "baseline": baseline.get(name),
                        "band": None if band is None else {"low": band.low, "median": band.median, "high": band.high,
                                                           "count": band.count}}
    return charts


def compare_runs(run_a, run_b):
    """Two runs side by side: checks whose status changed, checks only one of them has (another mode's, or one the
    agent of that run did not know), software changes, metric deltas (b against a)."""
    statuses = {}
    for run_id, check_id, status in CheckResult.objects.filter(run__in=[run_a, run_b]).values_list(
            "run_id", "check_id", "status"):
        statuses.setdefault(check_id, {})[run_id] = status
    checks = [{"check": cid, "a": s.get(run_a.id, "-"), "b": s.get(run_b.id, "-")}
              for cid, s in sorted(statuses.items())]
    both = [c for c in checks if c["a"] != "-" and c["b"] != "-"]
    return {"checks_changed": [c for c in both if c["a"] != c["b"]], "checks_same": sum(
        1 for c in both if c["a"] == c["b"]), "only_a": [c for c in checks if c["b"] == "-"],
        "only_b": [c for c in checks if c["a"] == "-"], "software": software_diff(run_a.inventory, run_b.inventory),
        "inventory_keys": catalog.SOFTWARE_KEYS, "metrics": metric_rows(run_a.metrics, run_b.metrics, thresholds())}
