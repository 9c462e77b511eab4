"""Realistic demo history built from the agent's real H200 reports (tests/fixtures/real/), for seed_demo and the
page benchmarks. Each node replays a real report with small run-to-run noise; a few nodes degrade, fail or get a
software change part-way through their history, so fleet filters, drift and peers have something to find."""

import json
import random
import re
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from cudaweb.drift import catalog
from cudaweb.drift.services import (
    drift_of, is_drifted, peers_refresh, run_summarize, software_diff, status_changes, thresholds,
)
from cudaweb.nodes.models import Node
from cudaweb.validation.gpus import NVIDIA_UUID
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.statuses import node_status_of, run_status_of

REAL_REPORTS = Path(settings.BASE_DIR) / "tests" / "fixtures" / "real"
TEMPLATES = ("h200-gpus2-standard.json", "h200-gpus2-full.json", "h200-gpus1-standard.json")
STORY_WEIGHTS = (("healthy", 90), ("degrading", 4), ("failing", 3), ("software_change", 3))
HISTORY_EVIDENCE = 300  # older runs keep a short evidence excerpt; the latest keeps it whole


def load_templates():
    import json

    return [json.loads((REAL_REPORTS / name).read_text()) for name in TEMPLATES if (REAL_REPORTS / name).exists()]


REPORT_HOSTNAME = re.compile(r"^vm(?=:)", re.M)  # the real reports' host: NCCL's log lines start "vm:<pid>:<tid>"


def _own_host(template, *, hostname, seed):
    """A copy of the template as its own host would send it: its hostname, and GPU UUIDs of NVIDIA's form drawn
    from `seed` (the real reports' UUIDs are one host's: fifty nodes replaying them would list each other's GPUs and
    make /metrics' per-GPU series and the README's joins on UUID many-to-many)."""
    rng = random.Random(seed)
    renamed = {}

    def fresh(match):
        key = match.group(0).lower()
        if key not in renamed:
            renamed[key] = "GPU-%s" % uuid.UUID(int=rng.getrandbits(128), version=4)
        return renamed[key]

    report = _copy_report(template)
    report["host"] = dict(template.get("host") or {}, hostname=hostname)
    for check in report["checks"]:
        for key in ("summary", "evidence"):
            text = NVIDIA_UUID.sub(fresh, check[key] or "")
            check[key] = REPORT_HOSTNAME.sub(hostname, text)
    return report


def _jitter(report, rng, scale):
    for check in report["checks"]:
        for key, value in list(check["metrics"].items()):
            if isinstance(value, float):
                check["metrics"][key] = round(value * rng.gauss(1.0, 0.015) * scale.get(key.split(".")[0], 1.0), 3)
    return report


def _copy_report(report):
    """A copy of a report that _jitter and _story_step may change (its checks, their metrics, the inventory): a
    deepcopy of the whole report per run was most of the seeding's Python time."""
    copied = dict(report, inventory=dict(report["inventory"]))
    copied["checks"] = [dict(check, metrics=dict(check["metrics"])) for check in report["checks"]]
    return copied


def _write(model, rows, batch_size):
    """Insert rows (model instances, or dicts of field attnames where building an instance per check cost more
    than storing it): bulk_create, or on PostgreSQL one COPY (bulk_create spent most of the seeding's time quoting
    parameters). A field a dict leaves out gets its default; a primary key left to its sequence is left out;
    auto_now_add is not applied (seed sets `created` itself)."""
    if connection.vendor != "postgresql":
        objects = [model(**row) if isinstance(row, dict) else row for row in rows]
        return model.objects.bulk_create(objects, batch_size=batch_size)
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, models.AutoField)]
    json_fields = {f.attname for f in fields if isinstance(f, models.JSONField)}
    defaults = {f.attname: f.get_default() for f in fields}
    quote = connection.ops.quote_name
    sql = "COPY %s (%s) FROM STDIN" % (quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields))
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            get = row.get if isinstance(row, dict) else (lambda name, default, obj=row: getattr(obj, name))
            values = []
            for name in defaults:
                value = get(name, defaults[name])
                values.append(json.dumps(value) if name in json_fields and value is not None else value)
            copy.write_row(values)
    return rows


def _story_step(report, story, step, turn):
    """Apply a node's story to one of its runs (step counts from 0, the story turns at `turn`)."""
    if step < turn:
        return report
    if story == "degrading":
        for check in report["checks"]:
            if check["id"] == "cuda.copy_bandwidth":
                check["status"], check["signatures"] = "warn", ["copy_bandwidth_low"]
                check["summary"] = "pinned H2D far below the link's ceiling (seeded degradation)"
    elif story == "failing":
        for check in report["checks"]:
            if check["id"] == "driver.xid":
                check.update(status="fail", signatures=["xid_critical", "gpu_fallen_off_bus"],
                             summary="Xid 79 in the kernel log since boot: GPU has fallen off the bus (seeded)",
                             evidence="NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.")
        report["verdict"] = "fail"
    elif story == "software_change":
        report["inventory"]["driver_version"] = "580.172.01"
    if report["verdict"] != "fail":
        statuses = {c["status"] for c in report["checks"]}
        report["verdict"] = "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"
    return report


def seed(*, nodes, runs_per_node, seed=0, prefix="demo", every_hours=24, stdout=None):
    rng = random.Random(seed)
    templates = load_templates()
    limits = thresholds()
    now = timezone.now()
    stories = [s for s, w in STORY_WEIGHTS for _ in range(w)]
    created = []
    for index in range(nodes):
        template = templates[index % 10 % len(templates)] if index % 10 < 3 else templates[0]
        story = rng.choice(stories)
        turn = rng.randrange(max(1, runs_per_node // 2), max(2, runs_per_node))
        name = "%s-gpu-%04d" % (prefix, index)
        # Its own RNG, so the fleet's stories stay what this seed gave before; the prefix in it, so two demo fleets
        # in one database do not share GPUs either.
        own = _own_host(template, hostname=name, seed="%s:%s:%d" % (seed, prefix, index))
        with transaction.atomic():
            node = Node.objects.create(
                name=name, address="198.18.%d.%d" % (index // 250, index % 250 + 1),
                username="ops", transport=Node.Transport.SSH,
                labels=["rack-%02d" % (index // 40), "pool-%s" % "ab"[index % 2]], status=Node.Status.NEW)
            runs, reports, whens, previous = [], [], [], None
            for step in range(runs_per_node):
                scale = {"h2d_pinned_gbs": 0.6} if story == "degrading" and step >= turn else {}
                report = _story_step(_jitter(_copy_report(own), rng, scale), story, step, turn)
                latest = step == runs_per_node - 1
                when = now - timedelta(hours=every_hours * (runs_per_node - step))
                run = ValidationRun(
                    node=node, created=when, mode=report["mode"], status=run_status_of(report["verdict"]), verdict=report["verdict"],
                    started=when, finished=when + timedelta(seconds=report["duration_s"]),
                    agent_version=report["agent_version"], reason="agent verdict: %s (seeded demo)" % report["verdict"],
                    trigger=ValidationRun.Trigger.SCHEDULED if step else ValidationRun.Trigger.WIZARD,
                    metrics=catalog.headline_metrics(report["checks"]), inventory=report["inventory"],
                    report=report if latest else {k: v for k, v in report.items() if k != "checks"})
                run.changes = _changes(previous, report)
                if runs:  # against the first run, the baseline; peers are judged at the end
                    run.changes["previous"] = str(runs[-1].id)
                    run.drift = drift_of(run, runs[0], [], limits)
                    run.drifted = is_drifted(run.drift)
                runs.append(run)
                reports.append(report)
                whens.append(when)
                previous = report
            _write(ValidationRun, runs, batch_size=500)
            if connection.vendor != "postgresql":  # created is auto_now_add: give the history its own times
                for run, when in zip(runs, whens):
                    run.created = when
                ValidationRun.objects.bulk_update(runs, ["created"], batch_size=500)
            checks = []
            for run, report in zip(runs, reports):
                whole = run is runs[-1]
                checks.extend(dict(
                    run_id=run.id, position=i, check_id=c["id"], layer=c["layer"], title=c["title"], status=c["status"],
                    summary=c["summary"], duration_s=c["duration_s"], metrics=c["metrics"],
                    evidence=c["evidence"] if whole else c["evidence"][:HISTORY_EVIDENCE], signatures=c["signatures"],
                    blocked_by=c["blocked_by"] or "") for i, c in enumerate(report["checks"]))
            _write(CheckResult, checks, batch_size=2000)
            Node.objects.filter(id=node.id).update(baseline=runs[0], status=Node.Status.READY)
        created.append((node, runs[-1]))
        if stdout and (index + 1) % 100 == 0:
            stdout.write("  %d nodes" % (index + 1))
    for model in {n.gpu_model or r.inventory.get("gpu_model", "") for n, r in created} - {""}:
        peers_refresh(gpu_model=model)
    for node, last in created:
        run_summarize(run_id=last.id)  # the fleet row and drift with peers, as a real finish does
        Node.objects.filter(id=node.id).update(status=node_status_of(last.status))
    for model in {r.inventory.get("gpu_model", "") for _, r in created} - {""}:
        peers_refresh(gpu_model=model)
    return [n for n, _ in created]


def _changes(previous, report):
    if previous is None:
        return {"previous": None, "checks": [], "software": []}
    statuses = lambda r: {c["id"]: c["status"] for c in r["checks"]}  # noqa: E731
    return {"previous": None, "checks": status_changes(statuses(previous), statuses(report)),
            "software": software_diff(previous["inventory"], report["inventory"])}
