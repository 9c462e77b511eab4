"""Reads of the loop for the pages, the API and /metrics."""

from django.db.models import Count

from cudaweb.health import machine
from cudaweb.health.models import Breaker, HealthEvent, LoopAction, NodeLoop, Transition

EVENTS_CAP = 500
# What happens next, for the node page: by state.
NEXT = {
    machine.READY: "watched every interval; a hardware fault makes it suspect",
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
    """The node's loop: its row, transitions (real and shadow), rungs, and open events, newest first."""
    loop = NodeLoop.objects.filter(node=node).first()
    return {
        "loop": loop,
        "state": loop.state if loop else machine.READY,
        "next": NEXT[loop.state if loop else machine.READY],
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
