"""Reads for the fleet pages. Each returns what one page needs in a fixed number of queries."""

from django.core.paginator import Paginator
from django.db.models import Count, Q

from cudaweb.drift.catalog import LAYERS
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import with_label
from cudaweb.validation.models import ValidationRun

SORTS = {"name": "name", "-name": "-name", "status": "status", "-status": "-status",
         "validated": "last_run__finished", "-validated": "-last_run__finished", "gpu": "gpu_model",
         "-gpu": "-gpu_model"}
PER_PAGE = 50


def fleet_page(*, status="", gpu_model="", label="", failing_layer="", q="", sort="name", page=1, per_page=PER_PAGE):
    """Nodes filtered, sorted and paginated, with per-status counts, filter choices and the runs in progress."""
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
        nodes = nodes.filter(Q(name__icontains=q) | Q(address__icontains=q))
    nodes = nodes.order_by(SORTS.get(sort, "name"), "name")
    paginator = Paginator(nodes, per_page)
    current = paginator.get_page(page)
    ids = [n.id for n in current]
    live = {}
    for run in ValidationRun.objects.filter(node_id__in=ids, status__in=ValidationRun.LIVE).order_by("created"):
        live[run.node_id] = run
    for node in current:
        node.live_run = live.get(node.id)
        node.layer_cells = [(layer, node.layer_status.get(layer, "")) for layer in LAYERS]
    counts = dict(Node.objects.values_list("status").annotate(n=Count("id")))
    models_and_labels = Node.objects.values_list("gpu_model", "labels")
    gpu_models = sorted({m for m, _ in models_and_labels if m})
    labels = sorted({lab for _, labs in models_and_labels for lab in (labs or [])})
    return {"page": current, "counts": counts, "total": sum(counts.values()), "gpu_models": gpu_models,
            "labels": labels, "layers": LAYERS}

