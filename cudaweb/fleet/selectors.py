"""Reads for the fleet pages. Each returns what one page needs in a fixed number of queries."""

from django.core.paginator import Paginator
from django.db.models import Count, Q

from cudaweb.drift.catalog import LAYERS
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import with_label
from cudaweb.playbooks.root_cause import runs_root_causes
from cudaweb.validation.models import ValidationRun

SORTS = {"name": "name", "-name": "-name", "status": "status", "-status": "-status",
         "validated": "last_run__finished", "-validated": "-last_run__finished", "gpu": "gpu_model",
         "-gpu": "-gpu_model"}
PER_PAGE = 50
SEARCH_CAP = 255  # Node.address's max_length, the longest field searched


def fleet_page(*, status="", gpu_model="", label="", failing_layer="", q="", sort="name", page=1, per_page=PER_PAGE):
    """Nodes filtered, sorted and paginated, with per-status counts, filter choices, the runs in progress and each
    last run's root cause."""
    nodes = Node.objects.select_related("last_run")
    if status:
        nodes = nodes.filter(status=status)
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    if label:
        nodes = with_label(nodes, label)
    if failing_layer in LAYERS:
        nodes = nodes.filter(**{"layer_status__%s" % failing_layer: "fail"})
    if q:
        # Longer than any name or address: it matches nothing (and SQLite refuses a LIKE pattern over 50,000 bytes).
        nodes = nodes.filter(Q(name__icontains=q) | Q(address__icontains=q)) if len(q) <= SEARCH_CAP else nodes.none()
    nodes = nodes.order_by(SORTS.get(sort, "name"), "name")
    paginator = Paginator(nodes, per_page)
    current = paginator.get_page(page)
    ids = [n.id for n in current]
    live = {}
    for run in ValidationRun.objects.filter(node_id__in=ids, status__in=ValidationRun.LIVE).order_by("created"):
        live[run.node_id] = run
    causes = runs_root_causes(runs=[node.last_run for node in current])
    for node in current:
        node.live_run = live.get(node.id)
        node.root_cause = causes.get(node.last_run_id)
        node.layer_cells = [(layer, node.layer_status.get(layer, "")) for layer in LAYERS]
    counts = dict(Node.objects.values_list("status").annotate(n=Count("id")))
    models_and_labels = Node.objects.values_list("gpu_model", "labels")
    gpu_models = sorted({m for m, _ in models_and_labels if m})
    labels = sorted({lab for _, labs in models_and_labels for lab in (labs or [])})
    return {"page": current, "counts": counts, "total": sum(counts.values()), "gpu_models": gpu_models,
            "labels": labels, "layers": LAYERS}



GATING_ORDER = LAYERS + ("advisory",)


def run_sections(*, checks, playbooks):
    """The run page's order: the root cause (the lowest failing check, with its playbook and first fix and the
    checks it made skip), then the other findings (fail, error, warn; each with what it made skip), the other
    skips, and the passes, which the page folds away."""
    layer_rank = {layer: i for i, layer in enumerate(GATING_ORDER)}
    skipped_by = {}
    for check in checks:
        if check.status == "skip" and check.blocked_by:
            skipped_by.setdefault(check.blocked_by, []).append(check)
    failing = [c for c in checks if c.status in ("fail", "error")]
    root = min(failing, key=lambda c: (layer_rank.get(c.layer, len(layer_rank)), c.position)) if failing else None

    def entry(check):
        triage = (playbooks.get(check.check_id) or {}).get("triage")
        first = triage.playbooks[0] if triage is not None and triage.playbooks else None
        return {"check": check, "inline": playbooks.get(check.check_id), "playbook": first.playbook if first else None,
                "first_fix": first.playbook.fixes[0] if first and first.playbook.fixes else "",
                "evidence": first.evidence if first else [],  # the lines to mark (none when no playbook matched)
                "skipped": skipped_by.get(check.check_id, [])}

    findings = [entry(c) for c in checks if c.status in ("fail", "error", "warn") and c is not root]
    findings.sort(key=lambda e: ({"fail": 0, "error": 0, "warn": 1}[e["check"].status], e["check"].position))
    shown = {c.check_id for c in checks if c.status in ("fail", "error", "warn")}
    return {"root": entry(root) if root else None, "findings": findings,
            "skips": [c for c in checks if c.status == "skip" and c.blocked_by not in shown],
            "passes": [c for c in checks if c.status == "pass"]}
