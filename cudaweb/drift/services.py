"""What a finished run means for its node: metrics and inventory kept flat, changes since the run before,
drift against the baseline and against the fleet's peers, and the node's denormalised fleet row."""

import logging
import statistics
import zlib

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from cudaweb.drift import catalog
from cudaweb.drift.models import DriftThreshold, PeerBand
from cudaweb.nodes.models import Node
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.signals import run_drifted

MIN_PEERS = 3
log = logging.getLogger(__name__)


def thresholds():
    """Percent-worse thresholds per metric: the catalogue's defaults, overridden by DriftThreshold rows."""
    values = {name: metric.threshold_pct for name, metric in catalog.METRICS.items()}
    values.update(DriftThreshold.objects.values_list("metric", "threshold_pct"))
    return values


def _check_statuses(run):
    return dict(CheckResult.objects.filter(run=run).values_list("check_id", "status"))


def status_changes(old, new):
    """Checks whose status differs between two {check_id: status} maps ("-": absent on that side)."""
    return [{"check": cid, "from": old.get(cid, "-"), "to": new.get(cid, "-")}
            for cid in sorted(set(old) | set(new)) if old.get(cid) != new.get(cid)]


def changes_between(before, after):
    """Checks whose status changed and software that changed from `before` to `after` (None: no earlier run with a
    report). Between two modes (quick, then full) a check only one of them runs is no change: it is counted apart
    (`only_one_mode`), and `modes` names both, so the page compares like with like or says the modes differ."""
    if before is None:
        return {"previous": None, "checks": [], "software": []}
    old, new = _check_statuses(before), _check_statuses(after)
    result = {"previous": str(before.id), "software": software_diff(before.inventory, after.inventory)}
    if before.mode != after.mode:
        both = set(old) & set(new)
        result.update(modes=[before.mode, after.mode], only_one_mode=len(set(old) ^ set(new)),
                      checks=status_changes({k: v for k, v in old.items() if k in both},
                                            {k: v for k, v in new.items() if k in both}))
    else:
        result["checks"] = status_changes(old, new)
    return result


def software_diff(old_inventory, new_inventory):
    old, new = catalog.software(old_inventory or {}), catalog.software(new_inventory or {})
    return [{"key": key, "from": old.get(key, "-"), "to": new.get(key, "-")}
            for key in catalog.SOFTWARE_KEYS if old.get(key) != new.get(key) and (key in old or key in new)]


def metric_rows(old_metrics, new_metrics, limits):
    """Per catalogue metric present in either run: values, delta %, how much worse, and whether that is drift."""
    rows = []
    for name, metric in catalog.METRICS.items():
        old, new = (old_metrics or {}).get(name), (new_metrics or {}).get(name)
        if old is None and new is None:
            continue
        worse = catalog.worse_by(metric, old, new) if old is not None and new is not None else None
        rows.append({"metric": name, "label": metric.label, "unit": metric.unit, "old": old, "new": new,
                     "delta_pct": catalog.delta_pct(old, new) if old is not None and new is not None else None,
                     "worse_pct": worse, "threshold_pct": limits[name],
                     "drift": worse is not None and worse > limits[name]})
    return rows


def drift_of(run, baseline, bands, limits):
    """Drift of a run: metrics and software against the node's baseline, metrics against the peer bands."""
    result = {"baseline": None, "metrics": [], "software": [], "peers": []}
    if baseline is not None and baseline.id != run.id:
        result["baseline"] = str(baseline.id)
        result["metrics"] = [r for r in metric_rows(baseline.metrics, run.metrics, limits) if r["new"] is not None]
        result["software"] = software_diff(baseline.inventory, run.inventory)
    for band in bands:
        value = run.metrics.get(band.metric)
        metric = catalog.METRICS.get(band.metric)
        if value is None or metric is None or band.count < MIN_PEERS:
            continue
        worse = catalog.worse_by(metric, band.median, value)
        result["peers"].append({"metric": band.metric, "label": metric.label, "value": value, "median": band.median,
                                "low": band.low, "high": band.high, "count": band.count, "worse_pct": worse,
                                "below": worse is not None and worse > limits[band.metric]})
    return result


def is_drifted(drift):
    return (any(r["drift"] for r in drift["metrics"]) or bool(drift["software"])
            or any(p["below"] for p in drift["peers"]))


def on_run_finished(sender, run_id, **kwargs):
    """Receiver of cudaweb.validation.signals.run_finished (connected in DriftConfig.ready)."""
    run_summarize(run_id=run_id)


def _count(value):
    """A GPU count the node's column holds, else None (a report from before the dashboard checked it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 31 else None


def _text(value, cap):
    return value[:cap] if isinstance(value, str) else ""


@transaction.atomic
def run_summarize(*, run_id):
    """Called when a run ends: fill the run's flat fields and drift, update its node's fleet row and peers."""
    run = ValidationRun.objects.select_related("node", "node__baseline").get(id=run_id)
    node = run.node
    report = run.report or {}
    checks = report.get("checks") or []
    run.metrics = catalog.headline_metrics(checks)
    run.inventory = report.get("inventory") or {}
    if report:
        earlier = ValidationRun.objects.filter(node=node, status__in=ValidationRun.VERDICT_STATUSES,
                                               created__lt=run.created).order_by("-created")
        # like with like: the last run of the same mode, else the last of any (the page then says the modes differ)
        previous = earlier.filter(mode=run.mode).first() or earlier.first()
        run.changes = changes_between(previous, run)
    gpu_model = _text(run.inventory.get("gpu_model"), 200) or node.gpu_model
    bands = list(PeerBand.objects.filter(gpu_model=gpu_model)) if gpu_model else []
    limits = thresholds()
    run.drift = drift_of(run, node.baseline, bands, limits) if report else {}
    run.drifted = bool(run.drift) and is_drifted(run.drift)
    run.save(update_fields=["metrics", "inventory", "changes", "drift", "drifted"])

    fields = {"last_run": run, "drifted": run.drifted}
    if report:
        fields.update(layer_status=catalog.layer_status(checks), gpu_model=gpu_model or "",
                      gpu_count=_count(run.inventory.get("gpu_count")), metrics=dict(node.metrics, **run.metrics))
    if run.trigger == ValidationRun.Trigger.SCHEDULED and run.status not in (ValidationRun.Status.PASSED,):
        fields["attention"] = "scheduled run of %s ended %s" % (timezone.localtime(run.created).strftime(
            "%Y-%m-%d %H:%M"), run.status)
    elif run.status == ValidationRun.Status.PASSED:
        fields["attention"] = ""
    Node.objects.filter(id=node.id).update(**fields)
    if run.drifted and not node.drifted:  # new drift, not the same drift again
        transaction.on_commit(lambda: run_drifted.send(sender=ValidationRun, run_id=run.id, node_id=node.id),
                              robust=True)
    if report and gpu_model and run.metrics:
        # After the report's own transaction: a peer band is shared by every node of the model, and a run that
        # finishes at the same moment must not make this one's report fail.
        transaction.on_commit(lambda: peers_refresh_quietly(gpu_model=gpu_model))
    return run


def _quantile(values, q):
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def peers_refresh(*, gpu_model):
    """Recompute the peer bands of one GPU model from the latest metrics of its nodes.

    Refreshes of one model run one after the other (a PostgreSQL advisory lock per model, taken before reading;
    SQLite has one writer anyway), and each reads the nodes after taking it: the last refresh reads every report
    committed before it, so no refresh computed from fewer nodes can land after it. No row is locked, so a report
    still being stored never waits on a refresh nor the other way round. The bands are upserted (no delete-and-
    insert, so no collision on the unique band), then the bands of metrics no node has any more are removed."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(b"peers:" + gpu_model.encode())])
        series = {}
        for metrics in Node.objects.filter(gpu_model=gpu_model).values_list("metrics", flat=True):
            for name, value in (metrics or {}).items():
                if name in catalog.METRICS and catalog.finite(value):
                    series.setdefault(name, []).append(value)
        now = timezone.now()
        PeerBand.objects.bulk_create(
            [PeerBand(gpu_model=gpu_model, metric=name, median=statistics.median(values),
                      low=_quantile(values, 0.1), high=_quantile(values, 0.9), count=len(values), updated=now)
             for name, values in sorted(series.items())],
            update_conflicts=True, unique_fields=["gpu_model", "metric"],
            update_fields=["median", "low", "high", "count", "updated"])
        PeerBand.objects.filter(gpu_model=gpu_model).exclude(metric__in=list(series)).delete()


def peers_refresh_quietly(*, gpu_model, attempts=3):
    """peers_refresh, retried when two refreshes deadlock; a band left a run behind is fixed by the next run,
    so a failure here is logged and never reaches the run."""
    for attempt in range(attempts):
        try:
            return peers_refresh(gpu_model=gpu_model)
        except (IntegrityError, OperationalError) as exc:
            log.warning("peer bands of %s not refreshed (attempt %d): %s", gpu_model, attempt + 1, exc)
    log.error("peer bands of %s left as they were after %d attempts", gpu_model, attempts)
    return None


def baseline_pin(*, node, run):
    """Make `run` the node's baseline and re-judge the node's latest run against it."""
    if run.node_id != node.id or not run.report:
        raise ValueError("a baseline must be a run of this node with a report")
    Node.objects.filter(id=node.id).update(baseline=run)
    latest = ValidationRun.objects.filter(node=node, report__isnull=False).order_by("-created").first()
    if latest is not None:
        run_summarize(run_id=latest.id)
