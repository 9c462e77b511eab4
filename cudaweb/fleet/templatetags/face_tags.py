"""The page components' vocabulary: one tone per status word (node, run or check), the label a node's status
shows, and the 5 % steps the bar and column classes use (the Content-Security-Policy allows no inline style)."""

from django import template

from cudaweb.drift.catalog import METRICS
from cudaweb.drift.figures import display_unit
from cudaweb.fleet.selectors import RAN_MARK
from cudaweb.health import selectors as health_selectors
from cudaweb.nodes import states

register = template.Library()

TONES = {
    "pass": "pass", "PASSED": "pass", "passing": "pass",
    "warn": "warn", "WARNED": "warn", "warning": "warn",
    "fail": "fail", "error": "fail", "FAILED": "fail", "failing": "fail", "unreachable": "fail",
    "quarantined": "fail", "UNREACHABLE": "fail", "AUTH_FAILED": "fail", "HOST_KEY_MISMATCH": "fail",
    "TIMED_OUT": "fail", "AGENT_ERROR": "fail", "DASHBOARD_ERROR": "fail", "INTERRUPTED": "fail",
    "RUNNING": "live", "PENDING": "live",
    "skip": "skip", "new": "skip", "ready": "skip", "ran": "ran",
    # the loop's states (cudaweb.health.machine)
    "suspect": "warn", "remediating": "live", "revalidating": "live", "rma": "fail",
}


@register.filter
def tone(status):
    """pass | warn | fail | live | skip | ran | none: the colour a status word is shown in."""
    return TONES.get(status or "", "none")


@register.filter
def node_state(node):
    """(label, tone, title) of a node's state badge, in the one vocabulary (cudaweb.nodes.states)."""
    state = states.node_state(node)
    if state.key == states.QUARANTINED.key:
        # one word, one meaning: the badge says who holds the node, as the loop's card counts it
        holder = health_selectors.quarantine_holder(node)
        return "Quarantined by %s" % holder, state.tone, (
            "taken out of service by an operator" if holder == health_selectors.BY_OPERATOR else
            "the loop drained it after a fault; it leaves when the loop's ladder or an operator returns it")
    return state.label, state.tone, state.description


# An event's badge by its class: only hardware faults are red (the loop acts on them); an application's fault is a
# warning, an observation is neutral, whatever severity the watch gave it.
EVENT_TONES = {"hardware": "fail", "application": "warn", "observation": "skip"}


@register.filter
def event_tone(klass):
    """The status word whose tone a health event of class `klass` is shown in."""
    return EVENT_TONES.get(klass or "", "none")


@register.filter
def state_tone(key):
    """The tone of a node state's key (a fleet tile)."""
    state = states.STATES.get(key)
    return state.tone if state else "none"


@register.filter
def not_counted(check):
    """The agent ran the check and it passed, but a lower layer failed, so its pass does not count (its figures are
    real): the agent says "skip" with RAN_MARK in the summary."""
    get = check.get if isinstance(check, dict) else lambda key: getattr(check, key, None)
    return (get("status") or "") == "skip" and RAN_MARK in str(get("summary") or "")


@register.filter
def check_state(check):
    """(label, tone, title) of a check's badge. The label is the agent's status word, as the API, JUnit, the compare
    page and the agent's text say it; a check not counted above a failed layer is "skip" in its own tone, and its
    title says why."""
    status = (check.get if isinstance(check, dict) else lambda key: getattr(check, key, None))("status") or ""
    if not_counted(check):
        return status, "ran", "ran and passed, but a lower layer failed, so it cannot count as a pass"
    return status, tone(status), ""


@register.filter
def ran_summary(summary):
    """The summary without the agent's "(ran, but ...)" suffix (the badge says it)."""
    text = summary or ""
    cut = text.find(" " + RAN_MARK)
    return text[:cut] if cut >= 0 else text


@register.filter
def step5(value, total):
    """value / total in 5 % steps (0-100), for the .hN / .wN classes."""
    try:
        share = float(value) / float(total)
    except (TypeError, ValueError, ZeroDivisionError):
        return 0
    if share <= 0:
        return 0
    return max(5, min(100, int(round(share * 20)) * 5))


@register.filter
def unit_of(metric):
    """A catalogue metric's unit (drift rows stored before units were kept name only the metric)."""
    found = METRICS.get(metric or "")
    return display_unit(metric, found.unit) if found else ""


@register.filter
def answers(result):
    """A triage's matches apart: confident answers, other rule matches, and guesses (near misses, similar texts)."""
    matches = list(getattr(result, "playbooks", None) or [])
    return {"confident": [m for m in matches if m.confident],
            "likely": [m for m in matches if m.basis == "rules" and not m.confident],
            "guesses": [m for m in matches if m.basis != "rules"]}


MARKS = {"pass": "✓", "warn": "!", "fail": "✕", "error": "✕", "skip": "–"}


@register.filter
def mark(status):
    """The symbol a layer cell shows (the colour is not the only sign: colour-blind readers, print)."""
    return MARKS.get(status or "", "·")
