"""The one vocabulary of a node's state: the key, the words and the tone every surface uses (the fleet page's tiles
and filter, its table's badge, the node page, the API's `state`), so that one state never has three names.

A state is the node's stored status read together with whether a run has judged it: "ready" only says the host key
was accepted, so a node no run has judged is "Not validated" everywhere. A new state (a remediation loop's, say) is
one `define()` here and, where it is not a stored status, one rule in `state_key` and `state_filter`."""

from dataclasses import dataclass

from django.db.models import BooleanField, Count, ExpressionWrapper, Q

from cudaweb.nodes.models import Node


@dataclass(frozen=True)
class State:
    key: str
    label: str
    tone: str  # pass | warn | fail | skip: the colour the pages show it in
    description: str


STATES = {}  # key -> State, in the order the fleet page lists them


def define(key, label, tone, description):
    STATES[key] = State(key, label, tone, description)
    return STATES[key]


KEY_TO_ACCEPT = define("key_to_accept", "Host key to accept", "skip",
                       "added; its SSH host key is not accepted yet, so no run can reach it")
NOT_VALIDATED = define("not_validated", "Not validated", "skip", "reachable; no run has judged it yet")
READY = define(Node.Status.READY, "No verdict yet", "skip", "host key accepted; its last run ended without a verdict")
PASSING = define(Node.Status.PASSING, "Passing", "pass", "its last verdict passed")
WARNING = define(Node.Status.WARNING, "Warning", "warn", "its last verdict warned")
FAILING = define(Node.Status.FAILING, "Failing", "fail", "its last verdict failed")
UNREACHABLE = define(Node.Status.UNREACHABLE, "Unreachable", "fail",
                     "its last run could not reach it or run the agent")
QUARANTINED = define(Node.Status.QUARANTINED, "Quarantined", "fail", "taken out of service by an operator")
NEW = define(Node.Status.NEW, "Added, no verdict", "skip", "added; its runs so far gave no verdict")


def state_key(*, status, judged, local=False):
    """The state of a node with this stored `status`, whether a run has `judged` it (it has a last run), and
    whether it is this host (`local`: no host key to accept)."""
    if status in (Node.Status.NEW, Node.Status.READY) and not judged:
        return NOT_VALIDATED.key if status == Node.Status.READY or local else KEY_TO_ACCEPT.key
    return status


def node_state(node):
    return STATES[state_key(status=node.status, judged=node.last_run_id is not None, local=node.is_local)]


def state_filter(key):
    """The nodes in state `key`, as a filter (None: no such state)."""
    unjudged = Q(last_run__isnull=True, status__in=(Node.Status.NEW, Node.Status.READY))
    local = Q(transport=Node.Transport.LOCAL)
    if key == KEY_TO_ACCEPT.key:
        return unjudged & Q(status=Node.Status.NEW) & ~local
    if key == NOT_VALIDATED.key:
        return unjudged & (Q(status=Node.Status.READY) | local)
    if key in (Node.Status.NEW, Node.Status.READY):
        return Q(status=key, last_run__isnull=False)
    if key in STATES:
        return Q(status=key)
    return None


def state_counts(nodes):
    """{state key: how many of `nodes`} in one query."""
    rows = (nodes.order_by().annotate(judged=ExpressionWrapper(Q(last_run__isnull=False), output_field=BooleanField()))
            .values("status", "transport", "judged").annotate(n=Count("id")))
    counts = {}
    for row in rows:
        key = state_key(status=row["status"], judged=row["judged"], local=row["transport"] == Node.Transport.LOCAL)
        counts[key] = counts.get(key, 0) + row["n"]
    return counts
