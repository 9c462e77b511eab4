"""The check a run's failure comes down to, as data: its part of the root cause (cudaweb.playbooks.root_cause adds
the playbook, a level above)."""

from cudaweb.validation.models import CheckResult, ValidationRun

Status = ValidationRun.Status
LAYER_ORDER = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "advisory")
SEVERITY = {"fail": 0, "error": 0, "warn": 1}  # a warning is a WARNED run's cause, never ahead of a failure
SUMMARY_CAP = 500
NO_CAUSE = (Status.PASSED, Status.PENDING, Status.RUNNING)


def _rank(check):
    layers = {layer: i for i, layer in enumerate(LAYER_ORDER)}
    return SEVERITY[check.status], layers.get(check.layer, len(layers)), check.position


def root_check(checks):
    """The lowest failing check (by layer, then order in the report), else the lowest warning; None if neither."""
    findings = [c for c in checks if c.status in SEVERITY]
    return min(findings, key=_rank) if findings else None


def root_checks(*, runs):
    """{run id: its root check or None} for many runs in one query (one whenever there is a run: a page's query
    count does not depend on how many of its nodes fail)."""
    by_run = {}
    for check in CheckResult.objects.filter(run_id__in=[run.id for run in runs], status__in=tuple(SEVERITY)):
        by_run.setdefault(check.run_id, []).append(check)
    return {run.id: root_check(by_run.get(run.id, ())) if run.status not in NO_CAUSE else None for run in runs}


def _one_line(text, cap=SUMMARY_CAP):
    return " ".join(str(text or "").split())[:cap]


def check_cause(*, run, check):
    """{check, layer, status, summary, signatures} of a finished run that did not pass, or None (passed, live).

    A run with no failing or warning check (it never reached a verdict: UNREACHABLE, AUTH_FAILED, TIMED_OUT,
    AGENT_ERROR, DASHBOARD_ERROR, INTERRUPTED) has no check: `check` and `layer` are None, `status` is the run's
    state and `summary` its reason, which says what to do."""
    if run.status in NO_CAUSE:
        return None
    if check is None:
        return {"check": None, "layer": None, "status": run.status,
                "summary": _one_line(run.reason) or "the run ended %s" % run.status, "signatures": []}
    signatures = check.signatures if isinstance(check.signatures, list) else []
    return {"check": check.check_id, "layer": check.layer, "status": check.status,
            "summary": _one_line(check.summary), "signatures": [str(s)[:200] for s in signatures[:20]]}
