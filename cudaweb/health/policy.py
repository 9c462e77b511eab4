"""A node's loop policy: its first label's LoopPolicy, else the defaults of the settings (CUDAWEB_LOOP_*)."""

from dataclasses import dataclass

from django.conf import settings

from cudaweb.health import machine
from cudaweb.health.models import LoopPolicy


@dataclass(frozen=True)
class Policy:
    mode: str
    ladder: tuple
    auto: bool
    interval_s: int
    repeat_limit: int
    repeat_window_days: int
    label: str = ""  # the label it comes from; "" for the defaults
    no_scheduler: bool = False  # no drain to wait for: a reset or reboot only with every GPU idle


def ladder_check(rungs):
    """The ladder as a tuple of known rungs; a reboot rung only where a reboot command is configured (a reboot is
    never guessed). Raises ValueError naming what is wrong."""
    rungs = tuple(rungs or ())
    unknown = [r for r in rungs if r not in machine.RUNGS]
    if unknown:
        raise ValueError("unknown rung(s) %s; known: %s" % (", ".join(map(str, unknown)), ", ".join(machine.RUNGS)))
    if machine.REBOOT in rungs and not settings.CUDAWEB_REBOOT_COMMAND:
        raise ValueError("a reboot rung needs CUDAWEB_REBOOT_COMMAND (the site's IPMI / Redfish / ssh command)")
    return rungs


def defaults():
    return Policy(mode=settings.CUDAWEB_LOOP_MODE, ladder=ladder_check(settings.CUDAWEB_LOOP_LADDER),
                  auto=settings.CUDAWEB_LOOP_AUTO, interval_s=settings.CUDAWEB_WATCH_INTERVAL_S,
                  repeat_limit=settings.CUDAWEB_LOOP_REPEAT_LIMIT,
                  repeat_window_days=settings.CUDAWEB_LOOP_REPEAT_DAYS,
                  no_scheduler=settings.CUDAWEB_LOOP_NO_SCHEDULER)


def policy_of(node, policies=None):
    """`policies`: every LoopPolicy, read once by a caller that resolves many nodes."""
    labels = set(node.labels or ())
    if policies is None:
        policies = list(LoopPolicy.objects.filter(label__in=labels)) if labels else []
    for row in policies:  # ordered by priority, then label
        if row.label in labels:
            return Policy(mode=row.mode, ladder=tuple(r for r in row.ladder if r in machine.RUNGS), auto=row.auto,
                          interval_s=row.interval_s or settings.CUDAWEB_WATCH_INTERVAL_S,
                          repeat_limit=row.repeat_limit, repeat_window_days=row.repeat_window_days, label=row.label,
                          no_scheduler=row.no_scheduler)
    return defaults()
