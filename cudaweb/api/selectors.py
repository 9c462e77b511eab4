"""Reads for the API, each in a fixed number of queries whatever the size of the fleet."""

from django.conf import settings

from cudaweb.accounts.selectors import audit_event_export, audit_events
from cudaweb.health.models import HealthEvent
from cudaweb.health.selectors import event_detail, events_filtered
from cudaweb.network.selectors import network_test_export
from cudaweb.nodes.models import Node
from cudaweb.nodes.states import node_state
from cudaweb.nodes.selectors import with_label
from cudaweb.playbooks.root_cause import run_root_cause, runs_root_causes
from cudaweb.validation.dashboard_timing import run_steps
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.selectors import is_flaky_node, nodes_flaky

RUN_BRIEF_FIELDS = ("id", "node_id", "status", "mode", "verdict", "created", "finished")
NODE_RUNS = 10


def _brief(run):
    if run is None:
        return None
    return {field: getattr(run, field) for field in RUN_BRIEF_FIELDS if field != "node_id"}


def _flaky_out(count):
    return {"runs": count, "days": settings.CUDAWEB_FLAKY_DAYS, "limit": settings.CUDAWEB_FLAKY_LIMIT,
            "flagged": is_flaky_node(count)}


def _node_out(node, live_run, root_cause, flaky_runs=0):
    state = node_state(node)
    return {"name": node.name, "status": node.status, "state": state.key, "state_label": state.label,
            "transport": node.transport, "address": node.address,
            "labels": [str(label) for label in node.labels or []], "gpu_model": node.gpu_model,
            "gpu_count": node.gpu_count, "layer_status": node.layer_status or {},
            "metrics": {k: v for k, v in (node.metrics or {}).items() if isinstance(v, (int, float))},
            "drifted": node.drifted, "attention": node.attention, "can_validate": node.can_validate,
            "last_run": _brief(node.last_run), "live_run": _brief(live_run), "flaky": _flaky_out(flaky_runs),
            "root_cause": root_cause}


def _nodes():
    # The last run without its report and the like: listing a fleet must not read every large report.
    return Node.objects.select_related("last_run", "host_key").defer(
        *("last_run__%s" % field for field in ("report", "raw_output", "progress", "drift", "changes", "inventory")))


def _live_runs(node_ids):
    return {run.node_id: run for run in ValidationRun.objects.filter(node_id__in=node_ids, status__in=ValidationRun.LIVE)
            .only(*RUN_BRIEF_FIELDS)}


def node_list(*, label="", status=None, gpu_model="", limit=1000, offset=0):
    """Nodes by name, filtered, with their last and live runs, the last run's root cause and their flaky count."""
    nodes = _nodes()
    if label:
        nodes = with_label(nodes, label)
    if status:
        nodes = nodes.filter(status=status)
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    count = nodes.count()
    page = list(nodes.order_by("name")[offset:offset + limit])
    live = _live_runs([node.id for node in page])
    flaky = nodes_flaky(node_ids=[node.id for node in page])
    causes = runs_root_causes(runs=[node.last_run for node in page])
    return {"count": count, "nodes": [_node_out(node, live.get(node.id), causes.get(node.last_run_id),
                                                flaky.get(node.id, 0)) for node in page]}


def node_detail(*, name):
    """One node with its newest runs, or None."""
    node = _nodes().filter(name=name).first()
    if node is None:
        return None
    runs = list(ValidationRun.objects.filter(node=node).only(*RUN_BRIEF_FIELDS)[:NODE_RUNS])
    live = next((run for run in runs if run.is_live), None)
    flaky = nodes_flaky(node_ids=[node.id]).get(node.id, 0)
    return dict(_node_out(node, live, run_root_cause(run=node.last_run), flaky), baseline=node.baseline_id,
                runs=[_brief(run) for run in runs])


def run_detail(*, run_id):
    run = ValidationRun.objects.select_related("node").filter(id=run_id).defer("raw_output", "progress").first()
    if run is None:
        return None
    return {"id": run.id, "node": run.node.name, "status": run.status, "mode": run.mode, "trigger": run.trigger,
            "verdict": run.verdict, "reason": run.reason, "created": run.created, "started": run.started,
            "finished": run.finished, "agent_version": run.agent_version, "retry_of": run.retry_of_id,
            "metrics": {k: v for k, v in (run.metrics or {}).items() if isinstance(v, (int, float))},
            "drifted": run.drifted, "drift": run.drift or {}, "report": run.report,
            "burnin_seconds": run.burnin_seconds,
            "retry": {k: v for k, v in (run.retry or {}).items() if k != "report"},
            "root_cause": run_root_cause(run=run), "dashboard_timing": run_steps(run)}


def audit_page(*, limit, offset, **filters):
    events = audit_events(**{key: value for key, value in filters.items() if value})
    return {"count": events.count(), "events": [audit_event_export(e) for e in events[offset:offset + limit]]}


def network_test_detail(test):
    return network_test_export(test)


def health_events(*, node_name="", since=None, state=None, klass=None, limit=100):
    node = None
    if node_name:
        node = Node.objects.filter(name=node_name).first()
        if node is None:
            return {"count": 0, "events": []}
    rows = list(events_filtered(node=node, since=since, state=state or "", klass=klass or "")[:limit])
    return {"count": len(rows), "events": [health_event_out(e) for e in rows]}


def health_event_out(e):
    return {"id": e.id, "node": e.node.name, "gpu_uuid": e.gpu_uuid, "check": e.check_id, "signature": e.signature,
            "severity": e.severity, "event_class": e.klass, "first_seen": e.first_seen, "last_seen": e.last_seen,
            "count": e.count, "open": e.open, "summary": e.summary, "evidence": e.evidence,
            "acknowledged_at": e.acknowledged_at, "acknowledged_by": e.acknowledged_by_name, "ack_note": e.ack_note}


def health_event_detail(*, event_id):
    """One event with its node's state, newest run and playbook, or None."""
    event = HealthEvent.objects.select_related("node").filter(id=event_id).first()
    if event is None:
        return None
    found = event_detail(event, cap=0)
    return dict(health_event_out(event), node_state=found["loop"].state if found["loop"] else "ready",
                latest_run=found["latest_run"].id if found["latest_run"] else None, playbook=found["playbook"])
