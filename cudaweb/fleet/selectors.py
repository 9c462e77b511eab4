"""Reads for the fleet pages. Each returns what one page needs in a fixed number of queries."""

from datetime import datetime, time, timedelta

from django.core.paginator import Paginator
from django.db.models import Case, Count, IntegerField, Q, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from cudaweb.drift.catalog import LAYERS
from cudaweb.network.models import PairResult
from cudaweb.nodes import states
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import with_label
from cudaweb.playbooks.root_cause import runs_root_causes
from cudaweb.validation.models import CheckResult, ValidationRun

SORTS = {"name": "name", "-name": "-name", "status": "status", "-status": "-status",
         "validated": "last_run__finished", "-validated": "-last_run__finished", "gpu": "gpu_model",
         "-gpu": "-gpu_model"}
PER_PAGE = 50
LAST_RUN_UNREAD = ("report", "raw_output", "progress", "drift", "changes", "inventory", "retry", "metrics")
SEARCH_CAP = 255  # Node.address's max_length, the longest field searched

NO_LAYER = "none"  # the failing-layer filter's key for failing nodes no layer explains


def fleet_page(*, status="", gpu_model="", label="", failing_layer="", q="", sort="name", page=1, per_page=PER_PAGE):
    """Nodes filtered, sorted and paginated, with per-status counts, filter choices, the runs in progress and each
    last run's root cause."""
    # the last run without its report and the like: a page of 50 nodes must not read 50 whole reports
    nodes = Node.objects.select_related("last_run").defer(*("last_run__%s" % field for field in LAST_RUN_UNREAD))
    if status:
        nodes = nodes.filter(states.state_filter(status) or Q(pk__in=[]))
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    if label:
        nodes = with_label(nodes, label)
    if failing_layer in LAYERS:
        nodes = nodes.filter(**{"layer_status__%s" % failing_layer: "fail"})
    elif failing_layer == NO_LAYER:  # failing, but no layer's checks fail (the overview's "no layer" bar)
        nodes = nodes.filter(status=Node.Status.FAILING)
        for layer in LAYERS:  # a layer absent from the node's row counts as not failing (SQL's NULL would not)
            key = "layer_status__%s" % layer
            nodes = nodes.filter(Q(**{key + "__isnull": True}) | ~Q(**{key: "fail"}))
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
    counts = states.state_counts(Node.objects.all())
    models_and_labels = Node.objects.values_list("gpu_model", "labels")
    gpu_models = sorted({m for m, _ in models_and_labels if m})
    labels = sorted({lab for _, labs in models_and_labels for lab in (labs or [])})
    return {"page": current, "counts": counts, "total": sum(counts.values()), "gpu_models": gpu_models,
            "labels": labels, "layers": LAYERS}



GATING_ORDER = LAYERS + ("advisory",)
RAN_MARK = "(ran, but cannot count as a pass above failed "  # the agent's engine.gate() suffix on a demoted pass


def run_sections(*, checks, playbooks, cause=None):
    """The run page's order: the root cause (the lowest failing check, with its playbook and first fix and the
    checks it made skip), then one card per other playbook with the checks that chose it (a playbook is never
    repeated per check), the findings no playbook names, and the skips and passes, which the page folds away.

    A playbook chosen only by failures at or above the root cause's layer may follow from the root cause (a
    missing driver also fails the device-node check): its card says so and is folded, rather than stating its own
    diagnosis beside the root cause's. `cause` is the run's root cause (cudaweb.playbooks.root_cause, the one every
    surface shows); without it the lowest failing check leads."""
    layer_rank = {layer: i for i, layer in enumerate(GATING_ORDER)}
    skipped_by = {}
    for check in checks:
        if check.status == "skip" and check.blocked_by:
            skipped_by.setdefault(check.blocked_by, []).append(check)
    failing = [c for c in checks if c.status in ("fail", "error")]
    root = min(failing, key=lambda c: (layer_rank.get(c.layer, len(layer_rank)), c.position)) if failing else None
    if cause is not None:
        root = next((c for c in checks if c.check_id == cause["check"]), None)
    root_rank = layer_rank.get(root.layer, len(layer_rank)) if root else None

    def entry(check):
        inline = playbooks.get(check.check_id) or {}
        triage = inline.get("triage")
        first = triage.playbooks[0] if triage is not None and triage.playbooks else None
        downstream = root is not None and check is not root and check.status in ("fail", "error") \
            and layer_rank.get(check.layer, len(layer_rank)) >= root_rank
        return {"check": check, "inline": inline or None, "match": first,
                "playbook": first.playbook if first else None,
                "first_fix": first.fixes[0] if first and first.playbook.fixes else "",
                "matched_lines": first.evidence if first else [],
                "skipped": [c for c in skipped_by.get(check.check_id, []) if RAN_MARK not in c.summary],
                "not_counted": [c for c in skipped_by.get(check.check_id, []) if RAN_MARK in c.summary],
                "downstream": downstream}

    root_entry = entry(root) if root else None
    findings = [entry(c) for c in checks if c.status in ("fail", "error", "warn") and c is not root]
    findings.sort(key=lambda e: ({"fail": 0, "error": 0, "warn": 1}[e["check"].status], e["check"].position))
    cards, unmatched = {}, []
    root_id = root_entry["playbook"].id if root_entry and root_entry["playbook"] else None
    root_also = []
    for item in findings:
        if item["playbook"] is None:
            unmatched.append(item)
        elif item["playbook"].id == root_id:
            root_also.append(item)
        else:
            card = cards.setdefault(item["playbook"].id, {
                "playbook": item["playbook"], "match": item["match"], "entries": [], "first_fix": item["first_fix"],
                "votes": (item["inline"] or {}).get("votes", {}).get(item["playbook"].id)})
            card["entries"].append(item)
    for card in cards.values():
        card["downstream"] = all(e["downstream"] for e in card["entries"])
        card["tone"] = "fail" if any(e["check"].status in ("fail", "error") for e in card["entries"]) else "warn"
    if root_entry is not None:
        root_entry["also"] = root_also
        root_entry["votes"] = ((root_entry["inline"] or {}).get("votes") or {}).get(root_id)
    shown = {c.check_id for c in checks if c.status in ("fail", "error", "warn")}
    skips = [c for c in checks if c.status == "skip"]
    return {"root": root_entry, "cause": cause, "findings": findings,
            "cards": sorted(cards.values(), key=lambda c: (c["downstream"], c["tone"] != "fail",
                                                         c["entries"][0]["check"].position)),
            "unmatched": unmatched,
            "skips": [c for c in skips if c.blocked_by not in shown], "all_skips": skips,
            "passes": [c for c in checks if c.status == "pass"]}


OVERVIEW_DAYS = 14
ATTENTION_SHOWN = 8
# What needs a look first: a node that cannot be reached, then one that fails, then the rest with a note.
ATTENTION_ORDER = {"unreachable": 0, "failing": 1, "warning": 2, "quarantined": 3}


def fleet_overview(*, now=None):
    """The top of the fleet page, in eight queries whatever the fleet's size: counts per status, failing nodes by
    the layer that fails first and by the check that is their root cause, nodes by GPU model, validations per day
    (the last OVERVIEW_DAYS), and the nodes that need attention first."""
    now = now or timezone.now()
    counts = states.state_counts(Node.objects.all())
    failing = list(Node.objects.filter(status=Node.Status.FAILING).values_list("id", "layer_status"))
    by_layer = {}
    for _, layers in failing:
        first = next((layer for layer in LAYERS if (layers or {}).get(layer) == "fail"), "no layer")
        by_layer[first] = by_layer.get(first, 0) + 1
    models = list(Node.objects.values("gpu_model").annotate(
        n=Count("id"), failing=Count("id", filter=Q(status=Node.Status.FAILING))).order_by("-n", "gpu_model"))
    since = (now - timedelta(days=OVERVIEW_DAYS - 1)).date()
    days = {since + timedelta(days=i): {"day": since + timedelta(days=i), "pass": 0, "warn": 0, "fail": 0, "skip": 0}
            for i in range(OVERVIEW_DAYS)}
    start = timezone.make_aware(datetime.combine(since, time.min))  # a range the created index can serve
    # COUNT(*), not COUNT(id): every column read is in run_created_status_idx, so PostgreSQL counts from the index
    # alone and reads none of the table's pages (a run of each node on each day: every page)
    rows = (ValidationRun.objects.filter(created__gte=start).exclude(status__in=ValidationRun.LIVE)
            .annotate(day=TruncDate("created")).values("day", "status").annotate(n=Count("*")))
    for row in rows:
        if row["day"] in days:
            days[row["day"]][DAY_TONES.get(row["status"], "fail")] += row["n"]
    per_day = list(days.values())
    tallest = max([d["pass"] + d["warn"] + d["fail"] + d["skip"] for d in per_day] + [1])
    for d in per_day:
        d["total"] = d["pass"] + d["warn"] + d["fail"] + d["skip"]
        d["tallest"] = tallest
    flagged = Node.objects.filter(Q(status__in=tuple(ATTENTION_ORDER)) | ~Q(attention="") | Q(drifted=True))
    rank = Case(*[When(status=status, then=Value(i)) for status, i in ATTENTION_ORDER.items()],
                default=Value(len(ATTENTION_ORDER)), output_field=IntegerField())
    attention = list(flagged.select_related("last_run").annotate(rank=rank, quiet=Q(attention=""))
                     .defer(*("last_run__%s" % field for field in LAST_RUN_UNREAD))
                     .order_by("rank", "quiet", "name")[:ATTENTION_SHOWN])
    attention_total = flagged.count()
    by_cause = _root_causes_of_failing(also=[n.last_run for n in attention if n.last_run_id])
    causes = by_cause["causes"]
    for node in attention:
        node.root = causes.get(node.last_run_id)
    total = sum(counts.values())
    return {
        "total": total, "counts": counts,
        "failing_total": len(failing),
        "by_layer": [{"layer": layer, "key": NO_LAYER if layer == "no layer" else layer, "n": by_layer[layer]}
                     for layer in LAYERS + ("no layer",) if by_layer.get(layer)],
        "by_cause": by_cause["groups"], "by_model": models, "per_day": per_day,
        "validated_days": sum(d["total"] for d in per_day),
        "attention": attention, "attention_more": max(0, attention_total - len(attention)),
    }


DAY_TONES = {"PASSED": "pass", "WARNED": "warn", "INTERRUPTED": "skip"}


def _root_causes_of_failing(*, also=()):
    """The root cause of each failing node's last run (cudaweb.playbooks.root_cause, as on every other surface),
    grouped by check and playbook, and of the runs `also` names: one query for the runs, one for their checks."""
    runs = list(ValidationRun.objects.filter(
        id__in=Node.objects.filter(status=Node.Status.FAILING, last_run__isnull=False).values("last_run_id"))
        .only("id", "status", "reason", "finished", "node_id"))
    failing = {run.id for run in runs}
    causes = runs_root_causes(runs=runs + [run for run in also if run.id not in failing])
    groups = {}
    for run_id, cause in causes.items():
        if cause is None or run_id not in failing:
            continue
        book = cause.get("playbook") or {}
        key = (cause["check"] or cause["status"], book.get("id"))
        group = groups.setdefault(key, {"check": cause["check"] or cause["status"], "layer": cause["layer"],
                                        "playbook": book or None, "n": 0})
        group["n"] += 1
    return {"causes": causes, "groups": sorted(groups.values(), key=lambda g: (-g["n"], g["check"]))}


HEAT_STEPS = (1.25, 1.5, 2.0, 4.0)  # a pair's latency over the test's best: heat-1 up to 1.25x ... heat-5 beyond 4x


def network_page(*, test):
    """A network test's node x node heatmap, its pairs and each pair's earlier results. Each passing cell is shaded
    by its gloo latency against the test's best pair (heat-1 .. heat-5), a failing one is red."""
    nodes = list(test.nodes.order_by("name"))
    pairs = list(test.pairs.select_related("node_a", "node_b"))
    latencies = [p.gloo_latency_us for p in pairs if p.status == "pass" and p.gloo_latency_us]
    best = min(latencies) if latencies else None
    cells = {}
    for pair in pairs:
        pair.heat = None
        if pair.status == "pass" and best and pair.gloo_latency_us:
            ratio = pair.gloo_latency_us / best
            pair.heat = 1 + sum(ratio > step for step in HEAT_STEPS)
        pair.nccl_note = _nccl_note(pair)
        cells[(pair.node_a_id, pair.node_b_id)] = cells[(pair.node_b_id, pair.node_a_id)] = pair
    matrix = [(row, [cells.get((row.id, col.id)) if row.id != col.id else "self" for col in nodes]) for row in nodes]
    history = {}
    for pair in pairs:  # each pair's earlier results, newest first (pair_history_idx)
        history[pair.id] = list(PairResult.objects.filter(node_a=pair.node_a, node_b=pair.node_b)
                                .exclude(id=pair.id).select_related("test")[:10])
    return {"test": test, "nodes": nodes, "matrix": matrix, "pairs": pairs, "history": history, "best_us": best,
            "heat_steps": HEAT_STEPS, "live": test.status in ("PENDING", "RUNNING")}


def _nccl_note(pair):
    """Why a pair has no NCCL figure: the agent tries NCCL only where torch sees a GPU at both ends."""
    if pair.nccl_busbw_gbs is not None:
        return ""
    if pair.status != "pass":
        return "not measured: the pair failed"
    return "not run: no GPU that torch can use (gloo only)"


def node_gpus(*, node):
    """The node's GPUs as the latest run with a report read them: {"run", "count", "model"}; "run" is None when
    no run has a report, "count" None when that report holds no GPU count (its agent could not list them)."""
    run = (ValidationRun.objects.filter(node=node, report__isnull=False).exclude(report={})
           .only("id", "created", "inventory").order_by("-created").first())
    if run is None:
        return {"run": None, "count": None, "model": ""}
    inventory = run.inventory if isinstance(run.inventory, dict) else {}
    count = inventory.get("gpu_count")
    count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
    model = inventory.get("gpu_model") if isinstance(inventory.get("gpu_model"), str) else ""
    return {"run": run, "count": count, "model": model or node.gpu_model}

