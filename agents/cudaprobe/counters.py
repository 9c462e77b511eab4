"""Error counters judged by their growth since the node's previous validation.

The dashboard passes the previous run's counters (--fabric-previous, JSON: {check id: {metric: value}}, zero
values left out). A counter only grows until the host reboots or the driver reloads; one that went down was reset,
so its whole value is new. Without a previous run of the check, every non-zero counter is reported as counted
since the last reset (boot), which may be long ago.
"""


def growth(check_id, current, previous):
    """(grown, since_reset, baseline): grown = [(key, before, now)] that rose since the previous run;
    since_reset = [(key, now)] non-zero with no usable previous value; baseline = whether one was passed."""
    before_all = (previous or {}).get(check_id)
    grown, since_reset = [], []
    for key, now in sorted(current.items()):
        if before_all is None:
            if now:
                since_reset.append((key, now))
            continue
        before = before_all.get(key, 0)
        if now > before:
            grown.append((key, before, now))
        elif now < before:
            since_reset.append((key, now))  # reset (reboot, driver reload) since the previous run
    return grown, since_reset, before_all is not None


def describe(grown, since_reset, baseline, limit=6):
    """One phrase for the summary: 'grew: a 0 -> 3 (+3); ...' or 'since the last reset: a=4'."""
    parts = []
    if grown:
        parts.append("grew since the previous validation: " + "; ".join(
            "%s %d -> %d (+%d)" % (key, before, now, now - before) for key, before, now in grown[:limit])
            + (" and %d more" % (len(grown) - limit) if len(grown) > limit else ""))
    if since_reset:
        parts.append("%s: " % ("counted since the counters were last reset (no previous validation to compare)"
                               if not baseline else "reset since the previous validation, now") + ", ".join(
            "%s=%d" % (key, now) for key, now in since_reset[:limit])
            + (" and %d more" % (len(since_reset) - limit) if len(since_reset) > limit else ""))
    return "; ".join(parts)
