"""The dashboard's own steps of a run, as times: queued (its task put on the queue), claimed (a worker took it),
transport up (the node reached), agent started (the agent uploaded or found in the node's cache, its process
started), report received (the agent's output read) and stored (the report and checks kept, the run ended).
Queued, claimed and stored are the run's `enqueued`, `started` and `finished`; the three in between are kept in
its `dashboard_timing` field, written once by the worker. The run page's waterfall and the API show them, and
bench/dashboard_overhead.py sums them, to find where the dashboard's seconds go (issue 33)."""

import logging
from datetime import datetime

from django.db import DatabaseError
from django.utils import timezone

from cudaweb.common import dbretry

log = logging.getLogger(__name__)

STEPS = ("queued", "claimed", "transport_up", "agent_started", "report_received", "stored")
RECORDED = ("transport_up", "agent_started", "report_received")  # the ones dashboard_timing holds
# What each gap is, named by the step that ends it
GAPS = {"claimed": "waiting for a worker", "transport_up": "preparing the run (arguments, bundle) and reaching the node",
        "agent_started": "agent upload or cache check, process start", "report_received": "the agent",
        "stored": "storing the report"}


def marks_record(*, run_id, marks):
    """Keep the worker's marks on the run (one UPDATE). A database error loses the marks, never the run."""
    from cudaweb.validation.models import ValidationRun

    kept = {step: marks[step].isoformat() for step in RECORDED if step in marks}
    if not kept:
        return
    try:
        ValidationRun.objects.filter(id=run_id).update(dashboard_timing=kept)
    except DatabaseError as exc:  # not retried: the report's storing, next, rides over a dropped connection
        log.warning("dashboard timing of run %s not kept: %s", run_id, exc)
        dbretry.connection_drop()


def _parsed(value):
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if timezone.is_aware(when) else None


def run_steps(run):
    """[{step, at, since_queued_s, gap_s, what}] in STEPS order, for the steps the run has reached; `gap_s` is the
    time since the step before it that the run has (None for the first), `what` says what that gap was."""
    times = {"queued": run.enqueued or run.created, "claimed": run.started,
             "stored": run.finished if run.status not in run.LIVE else None}
    recorded = run.dashboard_timing if isinstance(run.dashboard_timing, dict) else {}
    times.update({step: _parsed(recorded.get(step)) for step in RECORDED})
    if times["queued"] is not None and times["claimed"] is not None and times["queued"] > times["claimed"]:
        times["queued"] = run.created  # queued again after its claim (a retried task): the request counts
    steps, previous = [], None
    for step in STEPS:
        at = times.get(step)
        if at is None:
            continue
        origin = steps[0]["at"] if steps else at
        steps.append({"step": step, "at": at, "since_queued_s": round((at - origin).total_seconds(), 3),
                      "gap_s": None if previous is None else round((at - previous).total_seconds(), 3),
                      "what": GAPS.get(step, "") if previous is not None else ""})
        previous = at
    return steps
