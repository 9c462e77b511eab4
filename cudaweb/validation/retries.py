"""Flaky or hard: a check that failed or warned on a measured figure is run once more in the same run, and the two
attempts decide what it was.

The rule (README, "Flaky or hard"): a check is run again when its status is fail or warn, it has at least one
numeric metric, and every signature it carries (remarks aside: REMARK_SIGNATURES) names a figure judged against
an expectation, the GPU's siblings or its own series (FIGURE_SIGNATURES, or a name ending in FIGURE_SUFFIXES).
A missing or broken thing (no driver, an OOM, an Xid, a wrong result, a setting named as the cause) carries other
signatures and is not run again: it would fail the same way, and a wrong result seen once is a finding, not noise.

Two kinds are never run again, whatever their signatures: a state named like a figure (STATE_SIGNATURES: a port
that trained at a lower rate, memory held from the start of the memory test) reads the same a second time; and the
burn-in's own findings (L7, STANDING_LAYERS: a throughput decay, a sustained figure below expectation, a slow
sibling under load) stand: the burn-in exists to see what a node does once under long load, and a decay that does
not come back in a second short run is the intermittent fault it is there to catch, not noise. Only a burn-in figure
another process spoiled (gpu_busy alone) is measured again.

The second attempt passes: flaky (the check counts as passed, the run does not fail, the node's flaky count grows);
it fails or warns again: hard; it does not measure the check (skipped, errored, or the second agent run itself
failed): unconfirmed, the first attempt stands.
"""

from agents.cudaprobe.engine import enforce_layer_order, verdict_of

# The agent's figure signatures: matmul_below_expected, sustained_below_expected, copy_bandwidth_low,
# memory_bandwidth_low, nccl_busbw_low, memory_clock_low, throughput_decay, ... A setting named as the cause
# (env_setting_named), an Xid, ECC, throttle reasons, out of memory, a wrong result: none of these.
FIGURE_SUFFIXES = ("_below_expected", "_low", "_decay")
FIGURE_SIGNATURES = frozenset({"gpu_slower_than_siblings", "gpu_busy", "clock_sag_unexplained"})
REMARK_SIGNATURES = frozenset({"no_reference_for_model"})  # said at pass: judged against the siblings only
# Named like figures (_low), read from a state: an InfiniBand port's trained rate (sysfs), memory another process held
# when the memory test began. A second attempt reads the same state; it proves nothing either way.
STATE_SIGNATURES = frozenset({"ib_rate_low", "memory_test_coverage_low"})
STANDING_LAYERS = ("L7",)  # the burn-in: its findings stand (see above)
SPOILED_SIGNATURES = frozenset({"gpu_busy"})  # in a standing layer, only a figure another process spoiled is retried
RETRIED_STATUSES = ("fail", "warn")
RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "error": 2}
FLAKY, HARD, UNCONFIRMED, RERUN = "flaky", "hard", "unconfirmed", "rerun"


def is_figure_signature(signature):
    if signature in STATE_SIGNATURES:
        return False
    return signature in FIGURE_SIGNATURES or signature.endswith(FIGURE_SUFFIXES)


def in_standing_layer(check):
    return check.get("layer") in STANDING_LAYERS or str(check.get("id", "")).startswith("stress.")


def on_a_figure(check):
    """Whether a check failed or warned on a measured figure, not on a missing or broken thing, a state, or a finding
    of the burn-in."""
    signatures = [s for s in check.get("signatures") or [] if s not in REMARK_SIGNATURES]
    metrics = (check.get("metrics") or {}).values()
    numeric = any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics)
    if in_standing_layer(check) and not set(signatures) <= SPOILED_SIGNATURES:
        return False
    return (check.get("status") in RETRIED_STATUSES and numeric and bool(signatures)
            and all(is_figure_signature(s) for s in signatures))


def retry_plan(report):
    """(checks to judge again, checks they blocked): the ids for the agent's `--only`, in report order."""
    checks = report.get("checks") or []
    again = [c["id"] for c in checks if on_a_figure(c)]
    blocked = [c["id"] for c in checks if c.get("status") == "skip" and c.get("blocked_by") in again]
    return again, blocked


def _outcome(first, second):
    if second is None or second.get("status") not in ("pass", "warn", "fail"):
        return UNCONFIRMED
    return FLAKY if second["status"] == "pass" else HARD


def merge(report, second, again, blocked):
    """The run's report after the second attempt, and {check id: (retry, [attempts])} for the check rows.

    Flaky: the second attempt stands (it passed). Hard: the worse attempt stands (the later one on a tie).
    Unconfirmed: the first stands. A check the first attempt skipped because of one that turned out flaky takes its
    second run. The layer rule and the verdict are then applied again, as the agent applies them."""
    by_id = {c["id"]: c for c in (second or {}).get("checks") or []}
    outcomes = {}
    merged = []
    for check in report["checks"]:
        if check["id"] in again:
            retried = by_id.get(check["id"])
            kind = _outcome(check, retried)
            attempts = [check] + ([retried] if retried is not None else [])
            if kind == FLAKY:
                final = retried
            elif kind == HARD:
                final = check if RANK[check["status"]] > RANK[retried["status"]] else retried
            else:
                final = check
            outcomes[check["id"]] = (kind, attempts)
            merged.append(dict(final))
        else:
            merged.append(dict(check))
    flaky = {cid for cid, (kind, _) in outcomes.items() if kind == FLAKY}
    for i, check in enumerate(merged):
        if check["id"] in blocked and check.get("blocked_by") in flaky and check["id"] in by_id:
            outcomes[check["id"]] = (RERUN, [check, by_id[check["id"]]])
            merged[i] = dict(by_id[check["id"]])
    enforce_layer_order(merged)
    return dict(report, checks=merged, verdict=verdict_of(merged)), outcomes


def label(kind, attempts):
    """The words a page shows for a check's retry: "flaky (failed, then passed)", "hard (warned twice)"."""
    verbs = {"fail": "failed", "warn": "warned", "pass": "passed"}
    statuses = [verbs.get(a.get("status"), a.get("status")) for a in attempts[:2]]
    if kind == FLAKY and statuses:
        return "flaky (%s, then passed)" % statuses[0]
    if kind == HARD and len(statuses) == 2:
        return "hard (%s twice)" % statuses[0] if statuses[0] == statuses[1] else "hard (%s, then %s)" % tuple(
            statuses)
    if kind == UNCONFIRMED:
        return "not confirmed (the second attempt did not measure it)"
    if kind == RERUN:
        return "run again after the check that blocked it passed"
    return ""
