"""Reads of the loop for the pages, the API and /metrics."""

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q

from cudaweb.health import machine
from cudaweb.health.models import Breaker, HealthEvent, LoopAction, LoopPolicy, NodeLoop, Transition
from cudaweb.health.policy import defaults as policy_defaults
from cudaweb.health.policy import policy_of

EVENTS_CAP = 500
# What happens next, for the node page: by state.
NEXT = {
    machine.READY: "watched every {interval}; a hardware fault makes it suspect",
    machine.SUSPECT: "the next look quarantines it (drain / cordon), unless the fault was a condition that is gone",
    machine.QUARANTINED: "the ladder's next rung, on its own (policy auto) or by an operator's click",
    machine.REMEDIATING: "the rung's outcome: success re-validates, a failed reset goes to RMA",
    machine.REVALIDATING: "the run's verdict: pass returns it to ready (and resumes it), fail takes the next rung",
    machine.RMA: "an operator marks it healthy once it is repaired",
}


def events(*, node=None, since=None, limit=EVENTS_CAP):
    rows = HealthEvent.objects.select_related("node").order_by("-last_seen", "-id")
    if node is not None:
        rows = rows.filter(node=node)
    if since is not None:
        rows = rows.filter(last_seen__gte=since)
    return list(rows[:limit])


def node_timeline(node, limit=50):
    """The node's loop: its row, transitions (real and shadow), rungs, and open events, newest first; its policy and
    the operator's choices the machine would act on now (loop_controls)."""
    loop = NodeLoop.objects.filter(node=node).first()
    policy = policy_of(node)
    state = loop.state if loop else machine.READY
    return {
        "loop": loop,
        "state": state,
        "next": next_of(state, policy),
        "policy": policy,
        "controls": loop_controls(node, loop, policy),
        "transitions": list(Transition.objects.filter(node=node).select_related("bundle")[:limit]),
        "actions": list(LoopAction.objects.filter(node=node)[:limit]),
        "events": list(HealthEvent.objects.filter(node=node)[:limit]),
        "rungs": machine.RUNGS,
    }


def fleet_loop(*, nodes_cap=50, events_cap=20):
    """The fleet page's card: the breaker, nodes per state, the nodes the loop holds (or would, in shadow mode)
    and the newest events."""
    held = (NodeLoop.objects.exclude(state=machine.READY) | NodeLoop.objects.exclude(shadow_state=machine.READY))
    return {
        "breaker": breaker(),
        "counts": state_counts(),
        "held": list(held.select_related("node").order_by("-since")[:nodes_cap]),
        "events": list(HealthEvent.objects.select_related("node").order_by("-last_seen")[:events_cap]),
    }


def breaker():
    return Breaker.objects.filter(id=1).first()


def state_counts():
    counts = dict(NodeLoop.objects.order_by().values_list("state").annotate(n=Count("node")))
    return {state: counts.get(state, 0) for state in machine.STATES}


def states_by_node(node_ids):
    return dict(NodeLoop.objects.filter(node_id__in=node_ids).values_list("node_id", "state"))


def next_of(state, policy):
    """What happens next to a node in `state` under `policy`, for the node page (the real watch interval)."""
    seconds = policy.interval_s
    interval = "%d s" % seconds if seconds < 120 or seconds % 60 else "%d min" % (seconds // 60)
    text = NEXT[state].format(interval=interval)
    if policy.mode == "off":
        text += " (policy off: events are recorded, the loop moves nothing)"
    elif policy.mode == "record":
        text += " (policy record: shadow mode, nothing is drained or run)"
    return text


# ------------------------------------------------------------------------------------------ an operator's controls

def _rung_label(kind, gpu_uuid, policy):
    waits = "only while no process holds a GPU" if policy.no_scheduler else "drains first"
    if kind == machine.RESET:
        return "Reset GPU %s (%s)" % (gpu_uuid, waits)
    if kind == machine.REBOOT:
        return "Reboot the node with the site's reboot command (%s)" % waits
    if kind == machine.REVALIDATE_BURNIN:
        return "Re-validate with burn-in (full run + %d s of load; a pass returns it to ready)" % (
            settings.CUDAWEB_LOOP_BURNIN_S)
    return "Re-validate (a standard run; a pass returns it to ready)"


def _schedulers():
    names = [name for name, on in (("Slurm", settings.CUDAWEB_SLURM_CONTROLLER),
                                   ("Kubernetes", settings.CUDAWEB_K8S_API)) if on]
    return " and ".join(names)


def _effects_words(effects):
    schedulers, words = _schedulers(), []
    if machine.RESUME in effects:
        words.append("resumes the node in %s" % schedulers if schedulers else "no scheduler is set up to resume")
    if machine.DRAIN in effects:
        words.append("drains the node in %s" % schedulers if schedulers else "no scheduler is set up to drain")
    if machine.BUNDLE in effects:
        words.append("attaches the evidence bundle")
    return "; ".join(words)


def loop_controls(node, loop=None, policy=None):
    """The operator's choices on `node` that the machine would act on now, each as {verdict, action, label}: a
    choice `machine.step` answers with no move (a ready node asked to take a rung) is not offered, nor a rung that
    cannot run (a reset with no GPU named, a reboot with no command), nor marking healthy or RMA while a rung runs
    (operator_decide refuses them). Returns {"choices": [...], "notes": [why a choice is not offered]}."""
    from cudaweb.health.services import _gpu_of

    policy = policy or policy_of(node)
    state = loop.state if loop else machine.READY
    cause = loop.root_cause if loop else ""
    current = machine.Loop(state=state, root_cause=cause, rung=loop.rung if loop else 0,
                           action=loop.action if loop else "", ladder=policy.ladder, auto=False,
                           repeat_limit=policy.repeat_limit)
    running = LoopAction.objects.filter(node=node, status=LoopAction.Status.RUNNING).first()
    choices, notes = [], []
    for verdict, kind in (("healthy", machine.MARK_HEALTHY), ("rma", machine.SEND_RMA)):
        decision = machine.step(current, machine.Stimulus(kind))
        if decision.to is None:
            continue
        if running is not None:
            notes.append("a %s is running: mark healthy or send to RMA once it has ended" % running.kind)
            break
        words = _effects_words(decision.effects)
        label = ("Mark healthy" if verdict == "healthy" else "Send to RMA") + (" (%s)" % words if words else "")
        choices.append({"verdict": verdict, "action": "", "label": label})
    gpu_uuid = _gpu_of(node, cause) if state == machine.QUARANTINED else ""
    for kind in machine.RUNGS:
        if machine.step(current, machine.Stimulus(machine.REMEDIATE, action=kind)).to is None:
            continue
        if kind == machine.RESET and not gpu_uuid:
            notes.append("no reset: no event of %s names a GPU" % (cause or "the fault"))
            continue
        if kind == machine.REBOOT and not settings.CUDAWEB_REBOOT_COMMAND:
            notes.append("no reboot: CUDAWEB_REBOOT_COMMAND is not set")
            continue
        choices.append({"verdict": "remediate", "action": kind, "label": _rung_label(kind, gpu_uuid, policy)})
    return {"choices": choices, "notes": notes}


def loop_control_offered(node, verdict, action=""):
    """Whether the node page offers this choice now (the view refuses what it does not offer)."""
    offered = loop_controls(node, NodeLoop.objects.filter(node=node).first())["choices"]
    return any(c["verdict"] == verdict and c["action"] == (action if verdict == "remediate" else "")
               for c in offered)


# ------------------------------------------------------------------------------------------------- the events page

EVENT_STATES = ("open", "acknowledged", "closed")
AROUND = timedelta(hours=1)


def events_filtered(*, state="", klass="", node=None, node_name="", since=None):
    """Health events, newest first. state: open (still seen, nobody acknowledged it), acknowledged (still seen, an
    operator works it) or closed (no longer seen); klass: hardware, application, observation."""
    rows = HealthEvent.objects.select_related("node").order_by("-last_seen", "-id")
    if state == "open":
        rows = rows.filter(open=True, acknowledged_at__isnull=True)
    elif state == "acknowledged":
        rows = rows.filter(open=True, acknowledged_at__isnull=False)
    elif state == "closed":
        rows = rows.filter(open=False)
    if klass:
        rows = rows.filter(klass=klass)
    if node is not None:
        rows = rows.filter(node=node)
    elif node_name:
        rows = rows.filter(node__name=node_name)
    if since is not None:
        rows = rows.filter(last_seen__gte=since)
    return rows


def event_counts():
    """{open, acknowledged, closed}: the events page's tabs."""
    counts = HealthEvent.objects.aggregate(
        n_open=Count("id", filter=Q(open=True, acknowledged_at__isnull=True)),
        n_acknowledged=Count("id", filter=Q(open=True, acknowledged_at__isnull=False)),
        n_closed=Count("id", filter=Q(open=False)))
    return {state: counts["n_%s" % state] for state in EVENT_STATES}


def event_playbook(event):
    """The playbook the rules choose for the event's signature, or None."""
    from cudaweb.playbooks.matcher import triage

    found = triage("", signatures=(event.signature,), similar=False).playbooks
    if not found:
        return None
    return {"id": found[0].playbook.id, "title": found[0].playbook.title}


def event_detail(event, cap=100):
    """An event's page: the node's transitions (real and shadow) and rungs within an hour of it, its latest run and
    the playbook its signature maps to."""
    from cudaweb.validation.models import ValidationRun

    start, end = event.first_seen - AROUND, event.last_seen + AROUND
    return {
        "event": event,
        "transitions": list(Transition.objects.filter(node=event.node_id, at__gte=start, at__lte=end)
                            .select_related("event")[:cap]),
        "actions": list(LoopAction.objects.filter(node=event.node_id, created__gte=start, created__lte=end)[:cap]),
        "latest_run": ValidationRun.objects.filter(node=event.node_id).only("id", "status", "created", "node_id")
        .order_by("-created").first(),
        "playbook": event_playbook(event),
        "window": (start, end),
        "loop": NodeLoop.objects.filter(node=event.node_id).first(),
    }


# ----------------------------------------------------------------------------------------------- the policies page

def policies():
    """Every LoopPolicy (in the order policy_of reads them), each with how many nodes carry its label, and the
    defaults of the settings."""
    from cudaweb.nodes.selectors import nodes_with_label

    rows = list(LoopPolicy.objects.all())
    for row in rows:
        row.node_count = nodes_with_label(row.label).count()
    return {"policies": rows, "defaults": policy_defaults(),
            "reboot_configured": bool(settings.CUDAWEB_REBOOT_COMMAND)}


BY_OPERATOR, BY_LOOP = "an operator", "the loop"


def quarantine_holder(node):
    """Who holds a quarantined node: the loop (it drained the node after a fault: quarantined, in a rung or in RMA),
    else an operator (an onboarding quarantine, which the loop holds as operator_hold, or one from before the loop)."""
    row = NodeLoop.objects.filter(node_id=node.id).values_list("state", "root_cause").first()
    if row and row[0] in machine.DRAINED | {machine.RMA} and row[1] != machine.OPERATOR_HOLD:
        return BY_LOOP
    return BY_OPERATOR
