"""The life of a validation run: request, claim, execute over a transport, store, finish, reap."""

import json
import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.nodes.models import Node
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports import base
from cudaweb.common import dbretry
from cudaweb.validation import burnin, dashboard_timing, hostoutput, queue, report_spool, retries
from cudaweb.validation.fabric import fabric_agent_args
from cudaweb.validation.models import CheckResult, ValidationRun
from cudaweb.validation.reports import ReportError, parse_report
from cudaweb.validation.signals import run_finished
from cudaweb.validation.statuses import node_status_of, run_status_of

log = logging.getLogger(__name__)
Status = ValidationRun.Status
PROGRESS_CAP = 400
TIMEOUT_EXIT_CODES = (124, 137)
# A report the spool could not take (a full disk) lives only in its worker's memory: its store is tried this many times
# longer before the run is given up on (the reaper never judges a run lost while the database is away).
UNSPOOLED_RETRY_FACTOR = 10  # coreutils timeout: budget reached / killed after the grace period

ERROR_STATES = (
    (base.HostKeyMismatch, Status.HOST_KEY_MISMATCH),
    (base.HostKeyUnknown, Status.HOST_KEY_MISMATCH),
    (base.AuthFailed, Status.AUTH_FAILED),
    (base.Unreachable, Status.UNREACHABLE),
    (base.HostSetupError, Status.AGENT_ERROR),  # the node's SSH setup cannot take the agent: its reason names the fix
)


def agent_budget_s(node, mode, burnin_seconds=None):
    """Seconds one agent run may take (burn-in mode: the burn-in and a margin on top; cudaweb.validation.burnin)."""
    return burnin.agent_budget_s(node, mode, burnin_seconds)


def task_budget_s(run):
    """Seconds a run's task may take: the agent's budget, twice where a second attempt may follow (retries)."""
    budget = agent_budget_s(run.node, run.mode, run.burnin_seconds)
    return 2 * budget if settings.CUDAWEB_RETRY_FIGURES else budget


def run_request(*, node, mode=ValidationRun.Mode.QUICK, requested_by=None, trigger=ValidationRun.Trigger.MANUAL,
                batch=None, burnin_seconds=None):
    """Queue a validation of `node`, or return the run it already has live (one live run per node: a double
    click, a bulk request over a schedule). Raises queue.BrokerUnavailable, keeping nothing, when the task queue
    does not answer."""
    (run,) = runs_request(nodes=[node], mode=mode, requested_by=requested_by, trigger=trigger, batch=batch,
                          burnin_seconds=burnin_seconds)
    return run


def runs_request(*, nodes, mode, requested_by=None, trigger=ValidationRun.Trigger.BULK, batch=None,
                 burnin_seconds=None):
    """Queue a validation of each node, in one go for a rack: one query for the live runs, one insert (a node
    another request took meanwhile is skipped by the one-live-run rule), the tasks published over one broker
    connection once the transaction commits, one update. Nodes with a live run answer with it. Raises
    queue.BrokerUnavailable, keeping none of the new runs, when the task queue does not answer."""
    nodes = list(nodes)
    live = {run.node_id: run for run in ValidationRun.objects.filter(node__in=nodes, status__in=ValidationRun.LIVE)}
    burnin_seconds = burnin.seconds_of(mode, burnin_seconds)
    fresh = [ValidationRun(node=node, mode=mode, requested_by=requested_by, trigger=trigger, batch=batch,
                           burnin_seconds=burnin_seconds) for node in nodes if node.id not in live]
    with transaction.atomic():
        ValidationRun.objects.bulk_create(fresh, ignore_conflicts=True)  # a node another request just took
    created = set(ValidationRun.objects.filter(id__in=[r.id for r in fresh]).values_list("id", flat=True))
    fresh = [run for run in fresh if run.id in created]
    for run in ValidationRun.objects.filter(node__in=nodes, status__in=ValidationRun.LIVE).exclude(id__in=created):
        live.setdefault(run.node_id, run)
    transaction.on_commit(lambda: _enqueue_or_forget(fresh))  # at once, outside a transaction
    by_node = {run.node_id: run for run in fresh}
    by_node.update(live)
    _audit_request(nodes, fresh, live, mode=mode, requested_by=requested_by, trigger=trigger, batch=batch)
    return [by_node[node.id] for node in nodes if node.id in by_node]


def _audit_request(nodes, fresh, live, *, mode, requested_by, trigger, batch):
    """A person's request goes to the audit log (one event for a bulk request); beat's scheduled runs do not."""
    if trigger == ValidationRun.Trigger.SCHEDULED or not nodes:
        return
    detail = {"mode": mode, "trigger": trigger, "queued": len(fresh), "already_live": len(live)}
    if fresh and fresh[0].burnin_seconds:
        detail["burnin_seconds"] = fresh[0].burnin_seconds
    if len(nodes) == 1:
        run = fresh[0] if fresh else live.get(nodes[0].id)
        audit.record("validation.requested", actor=requested_by, obj=nodes[0],
                     run=str(run.id) if run else None, **detail)
    else:
        audit.record("validation.bulk_requested", actor=requested_by, batch=batch, nodes=len(nodes),
                     names=[node.name for node in nodes[:50]], **detail)


def _enqueue_or_forget(runs):
    try:
        if queue.fanout_wanted(len(runs)):
            queue.enqueue_fanout(runs)  # a worker publishes the runs' tasks (runs_enqueue)
        else:
            queue.enqueue_many([(run, task_budget_s(run)) for run in runs])
    except queue.BrokerUnavailable:
        ValidationRun.objects.filter(id__in=[r.id for r in runs], status=Status.PENDING).delete()  # none kept
        raise


def runs_enqueue(*, run_ids):
    """The worker's half of a fan-out: publish the tasks of those runs still PENDING and not yet queued (a
    redelivered fan-out message queues nothing twice). Returns how many were queued."""
    runs = list(ValidationRun.objects.select_related("node").filter(
        id__in=run_ids, status=Status.PENDING, enqueued__isnull=True))
    queue.enqueue_many([(run, task_budget_s(run)) for run in runs])
    return len(runs)


def run_claim(*, run_id):
    """PENDING -> RUNNING, exactly once: a redelivered task finds 0 rows and does nothing. Tried again over a
    dropped connection; a claim whose answer was lost is recognised by its start time."""
    now = timezone.now()

    def claim():
        return ValidationRun.objects.filter(id=run_id, status=Status.PENDING).update(
            status=Status.RUNNING, started=now, heartbeat=now) == 1 or ValidationRun.objects.filter(
            id=run_id, status=Status.RUNNING, started=now).exists()

    return dbretry.retrying(claim, what="claim of run %s" % run_id)


def run_finish(*, run, status, reason="", raw_output="", report=None, from_statuses=(Status.RUNNING,),
               report_unstored=False):
    """Move a live run to a terminal state (only if it is still in one of `from_statuses`), update its node and
    tell the apps above (signals.run_finished), all in one transaction, tried again over a dropped connection.
    `report`: a report kept with a run that could not store it (DASHBOARD_ERROR); `report_unstored`: the reaper is
    to store it with its checks once the database takes it (reaper.reports_sweep)."""
    return dbretry.retrying(_run_finish, run=run, status=status, reason=reason, raw_output=raw_output, report=report,
                            from_statuses=from_statuses, report_unstored=report_unstored,
                            what="end of run %s" % run.id)


@transaction.atomic
def _run_finish(*, run, status, reason, raw_output, report, from_statuses, report_unstored):
    now = timezone.now()
    fields = {"report": report} if report is not None else {}
    fields["report_unstored"] = report_unstored
    updated = ValidationRun.objects.filter(id=run.id, status__in=from_statuses).update(
        status=status, reason=hostoutput.text_for_db(reason)[:10000], finished=now,
        raw_output=hostoutput.text_for_db(raw_output[: settings.CUDAWEB_OUTPUT_CAP]), **fields)
    if not updated:
        return False
    node_status = node_status_of(status)
    if node_status:
        Node.objects.filter(id=run.node_id).exclude(status=Node.Status.QUARANTINED).update(status=node_status)
    run_finished.send(sender=ValidationRun, run_id=run.id, status=status)
    return True


def _progress_recorder(run, events=None):
    events = list(events or [])

    def record(line):
        try:
            event = json.loads(line)
        except ValueError:
            return  # stray stderr text: kept in the capped stderr copy, not a progress event
        if not isinstance(event, dict) or "event" not in event:
            return
        events.append(hostoutput.clean({k: event[k] for k in ("event", "id", "layer", "status", "summary", "title",
                                                              "t", "verdict") if k in event}))
        try:  # never waits: the agent's stderr is being read; the next event writes the whole list again
            ValidationRun.objects.filter(id=run.id).update(progress=events[-PROGRESS_CAP:], heartbeat=timezone.now())
        except DatabaseError as exc:
            log.warning("progress of run %s not written: %s", run.id, exc)
            dbretry.connection_drop()

    return record


def run_store_report(*, run, report, retry=None, outcomes=None, from_statuses=(Status.RUNNING,), reason_note="",
                     budget_s=None):
    """Keep the report and one CheckResult row per check; the verdict decides the terminal state. `retry` and
    `outcomes` are a second attempt's (run_retry_figures): the run's note, and each retried check's attempts. One
    transaction, tried again as a whole over a dropped connection; storing a report already stored does nothing
    and answers the run's status."""
    return dbretry.retrying(_run_store_report, run=run, report=report, retry=retry, outcomes=outcomes,
                            from_statuses=from_statuses, reason_note=reason_note, what="report of run %s" % run.id,
                            budget_s=budget_s)


@transaction.atomic
def _run_store_report(*, run, report, retry, outcomes, from_statuses, reason_note):
    current = ValidationRun.objects.select_for_update().filter(id=run.id).values_list("status", flat=True).first()
    if current not in from_statuses:
        return current  # stored by a try whose answer was lost, or by the reaper's sweep
    status = run_status_of(report["verdict"])
    outcomes = outcomes or {}
    CheckResult.objects.bulk_create([
        CheckResult(run=run, position=i, check_id=c["id"], layer=c["layer"], title=c["title"], status=c["status"],
                    summary=c["summary"], duration_s=c["duration_s"], metrics=c["metrics"], evidence=c["evidence"],
                    signatures=c["signatures"], blocked_by=c["blocked_by"] or "",
                    retry=outcomes.get(c["id"], ("", []))[0], attempts=outcomes.get(c["id"], ("", []))[1])
        for i, c in enumerate(report["checks"])
    ])
    ValidationRun.objects.filter(id=run.id).update(report=report, agent_version=report["agent_version"],
                                                   verdict=report["verdict"], retry=retry or {})
    reason = "agent verdict: %s%s" % (report["verdict"], reason_note)
    if retry and retry.get("summary"):
        reason += " (%s)" % retry["summary"]
    run_finish(run=run, status=status, reason=reason, from_statuses=from_statuses)
    return status


def run_execute(*, run_id):
    """Claim the run and carry it to a terminal state; every failure path is named and recorded."""
    if not run_claim(run_id=run_id):
        return None
    run, agent_args = dbretry.retrying(_run_prepare, run_id=run_id, what="start of run %s" % run_id)
    node = run.node
    budget = agent_budget_s(node, run.mode, run.burnin_seconds)
    payload, digest = bundle.build()
    marks = {}  # the dashboard's own steps (dashboard_timing): kept whatever the run's end
    try:
        with Heartbeat(run.id), _transport(run, purpose="run %s" % run.id) as transport:
            marks["transport_up"] = timezone.now()
            agent_path = transport.upload_agent(payload, digest)
            marks["agent_started"] = timezone.now()
            result = transport.run_agent(node.python_path, agent_path, agent_args, budget, env=node.agent_env(),
                                         on_stderr_line=_progress_recorder(run))
            marks["report_received"] = timezone.now()
    except base.TimedOut as exc:
        dashboard_timing.marks_record(run_id=run.id, marks=marks)
        run_finish(run=run, status=Status.TIMED_OUT, reason=str(exc), raw_output=exc.stdout + "\n" + exc.stderr)
        return Status.TIMED_OUT
    except base.TransportError as exc:
        dashboard_timing.marks_record(run_id=run.id, marks=marks)
        status = next(state for cls, state in ERROR_STATES if isinstance(exc, cls))
        run_finish(run=run, status=status, reason=str(exc))
        return status
    dashboard_timing.marks_record(run_id=run.id, marks=marks)
    if result.exit_status in TIMEOUT_EXIT_CODES:
        run_finish(run=run, status=Status.TIMED_OUT, reason="the agent ran past its %d s budget and was killed on "
                   "the host" % budget, raw_output=result.stdout + "\n" + result.stderr)
        return Status.TIMED_OUT
    try:
        report = hostoutput.clean(parse_report(result.stdout))
    except ReportError as exc:
        reason, raw_output = _unparsable(result, exc, python=node.python_path)
        run_finish(run=run, status=Status.AGENT_ERROR, reason=reason, raw_output=raw_output)
        return Status.AGENT_ERROR
    retry, outcomes = {}, {}
    again, blocked = retries.retry_plan(report) if settings.CUDAWEB_RETRY_FIGURES else ([], [])
    if again:
        report, retry, outcomes = run_retry_figures(run=run, report=report, again=again, blocked=blocked,
                                                    agent_args=agent_args, budget=budget, payload=payload,
                                                    digest=digest)
    return _run_keep_report(run=run, report=report, retry=retry, outcomes=outcomes)


def _transport(run, *, purpose):
    """The run's transport to its node, on behalf of whoever asked for the run (transport_for rides over a dropped
    database connection like the run's other reads and writes)."""
    return transport_for(run.node, purpose=purpose, on_behalf_of=run.requested_by)


def _run_prepare(*, run_id):
    """The claimed run and the agent's arguments."""
    run = ValidationRun.objects.select_related("node", "node__credential", "requested_by").get(id=run_id)
    # the agent stops when its worker is gone
    agent_args = burnin.agent_args(run.mode, run.burnin_seconds) + ["--json", "--exit-with-stdin"]
    previous = (ValidationRun.objects.filter(node=run.node, status__in=ValidationRun.VERDICT_STATUSES,
                                             finished__lt=run.created).order_by("-finished").only("finished").first())
    if previous is not None:  # kernel-log Xid errors from before it are history, not a failure of this run
        agent_args += ["--since", previous.finished.isoformat()]
    agent_args += fabric_agent_args(node=run.node, previous=previous)  # counters grown since it, the IB rate expected
    if run.node.dcgm_level:  # DCGM's own diagnostic, where the node's setting asks for it (checks/dcgm.py)
        agent_args += ["--with-dcgm", run.node.dcgm_level]
    return run, agent_args


NOT_STARTED = {126: "is not executable", 127: "was not found"}  # the shell's and coreutils timeout's exit codes


def _unparsable(result, error, python=""):
    """The reason and the kept output of output that is not a report; binary output is kept as a short sample.
    An interpreter that could not be started (exit 126 / 127, nothing printed) is named once, with the fix."""
    truncated = ", output truncated" if result.truncated else ""
    if result.exit_status in NOT_STARTED and not result.stdout.strip():
        said = next((line.strip() for line in result.stderr.splitlines() if line.strip()), "")
        if python and (python in said or not said):
            reason = ("the node's Python %s %s (exit status %d): set the node's Python to an interpreter that has "
                      "torch" % (python, NOT_STARTED[result.exit_status], result.exit_status))
        else:  # something else could not be started (timeout, env): the host's own words
            reason = "the agent could not be started: %s (exit status %d)" % (said[:300], result.exit_status)
        return reason, result.stderr
    if hostoutput.looks_binary(result.stdout):
        reason = ("the agent's output is binary, not a report (%d characters%s, agent exit status %s); its first "
                  "%d characters are kept, escaped" % (len(result.stdout), truncated, result.exit_status,
                                                       hostoutput.SAMPLE_CHARS))
        stdout = hostoutput.binary_sample(result.stdout)
    else:
        reason = "%s (agent exit status %s%s)" % (error, result.exit_status, truncated)
        stdout = result.stdout
    stderr = hostoutput.binary_sample(result.stderr) if hostoutput.looks_binary(result.stderr) else result.stderr
    return reason, stdout + ("\n--- stderr ---\n" + stderr if stderr else "")


def _run_keep_report(*, run, report, retry=None, outcomes=None):
    """Store a valid report. It waits in the worker's spool while it is stored, and stays there until it is: if the
    database stays away past the retries the run ends DASHBOARD_ERROR with the report in its column (or stays RUNNING
    where even that cannot be written), and a reaper stores it later (reaper.reports_sweep)."""
    held = None
    try:
        held = report_spool.report_keep(run_id=run.id, report=report)
    except report_spool.SpoolFull as exc:  # the retries still protect the report; a longer outage would cost it
        log.error("run %s: %s; the report is held in this worker's memory only, its store tried for up to %d s",
                  run.id, exc, UNSPOOLED_RETRY_FACTOR * settings.CUDAWEB_DB_RETRY_S)
    try:
        try:
            status = run_store_report(run=run, report=report, retry=retry, outcomes=outcomes, budget_s=None if held
                                      else UNSPOOLED_RETRY_FACTOR * settings.CUDAWEB_DB_RETRY_S)
        except DatabaseError as exc:  # our failure, not the agent's
            return _run_report_not_stored(run=run, report=report, error=exc, spooled=held is not None)
        if status in ValidationRun.VERDICT_STATUSES:  # stored, by this try or one whose answer was lost
            report_spool.report_drop(run_id=run.id)
        elif held is not None:  # ended otherwise meanwhile (a reaper judged it lost): the report is not stored yet
            log.warning("run %s ended %s before its report was stored; the report waits in %s for the reaper",
                        run.id, status, report_spool.location(run.id))
        return status
    finally:
        if held is not None:
            held.release()  # from here on the reaper may take a report left in the spool


def _run_report_not_stored(*, run, report, error, spooled):
    """The database did not take a valid report: away past the retries (the reaper stores it later), or refusing
    it (a fault of ours: the report is kept with the run, its spool copy set aside). Says which, and where it is."""
    away = isinstance(error, dbretry.RETRYABLE)
    where = report_spool.location(run.id)
    if away:
        log.error("run %s: the database did not take the report within the retries (%s)", run.id, error)
        reason = ("the database was away when the report came (%s: %s); the report is kept with the run and is "
                  "stored with its checks once the database takes it" % (type(error).__name__, error))
    else:
        log.exception("run %s: the database refused the report", run.id)
        if spooled:
            where = report_spool.report_quarantine(run_id=run.id, why="%s: %s" % (type(error).__name__, error))
        reason = ("the dashboard could not store the agent's report (%s: %s); the report is kept with the run%s" % (
            type(error).__name__, error, " and in %s" % where if spooled else ""))
    try:
        run_finish(run=run, status=Status.DASHBOARD_ERROR, report=report, reason=reason, report_unstored=away)
        return Status.DASHBOARD_ERROR
    except dbretry.RETRYABLE:
        if spooled:
            log.error("run %s stays RUNNING: the database is away; its report waits in %s for the reaper", run.id,
                      where)
        else:
            log.error("run %s stays RUNNING: the database is away and the spool could not take its report: the "
                      "report is lost unless the database answers before the run is judged lost", run.id)
        return None
    except DatabaseError as refused:  # the report itself cannot be written: end the run without it
        log.exception("run %s: the database refused the report even as the run's own copy", run.id)
        run_finish(run=run, status=Status.DASHBOARD_ERROR,
                   reason="the dashboard could not store the agent's report (%s: %s)%s" % (
                       type(refused).__name__, refused, "; the report is kept in %s" % where if spooled else
                       "; the report is lost"))
        return Status.DASHBOARD_ERROR


def run_retry_figures(*, run, report, again, blocked, agent_args, budget, payload, digest):
    """Run the checks that failed or warned on a measured figure once more (`--only`), with those they blocked;
    returns (the merged report, the run's retry note, {check id: (retry kind, attempts)}). A second attempt that does
    not come back (transport, timeout, no report) leaves the first attempts standing, each unconfirmed."""
    node = run.node
    started = timezone.now()
    note = {"checks": again, "blocked": blocked, "started": started.isoformat()}
    progress = dbretry.retrying(ValidationRun.objects.filter(id=run.id).values_list("progress", flat=True).first,
                                what="progress of run %s" % run.id)
    recorder = _progress_recorder(run, progress)
    recorder(json.dumps({"event": "retry", "id": ",".join(again), "summary": "running again: %s" % ", ".join(again)}))
    second, error = None, ""
    try:
        with Heartbeat(run.id), _transport(run, purpose="run %s (second attempt)" % run.id) as transport:
            agent_path = transport.upload_agent(payload, digest)
            only = ["--only", ",".join(again + blocked)]
            result = transport.run_agent(node.python_path, agent_path, agent_args + only, budget,
                                         env=node.agent_env(), on_stderr_line=recorder)
        if result.exit_status in TIMEOUT_EXIT_CODES:
            error = "the second attempt ran past its %d s budget" % budget
        else:
            try:
                second = hostoutput.clean(parse_report(result.stdout))
            except ReportError as exc:
                error = "the second attempt printed no report (exit status %s): %s" % (result.exit_status, exc)
    except base.TransportError as exc:
        error = "the second attempt did not run: %s" % exc
    except Exception as exc:  # ours, or the task's soft time limit: the first attempt's report is kept all the same
        log.exception("run %s: the second attempt failed", run.id)
        error = "the second attempt failed in the dashboard (%s: %s)" % (type(exc).__name__, exc)
    merged, outcomes = retries.merge(report, second, again, blocked)
    kinds = [kind for kind, _ in outcomes.values()]
    counted = ["%d %s" % (kinds.count(kind), kind) for kind in (retries.FLAKY, retries.HARD, retries.UNCONFIRMED)
               if kinds.count(kind)]
    note.update(finished=timezone.now().isoformat(), error=error, first_verdict=report["verdict"],
                summary="second attempt of %d check%s: %s" % (len(again), "" if len(again) == 1 else "s",
                                                               ", ".join(counted) or "none measured"),
                outcomes={cid: kind for cid, (kind, _) in outcomes.items()},
                report=second)
    if error:
        log.warning("run %s: %s", run.id, error)
    return merged, note, outcomes


def run_mark_timed_out(*, run_id, reason):
    run = dbretry.retrying(ValidationRun.objects.filter(id=run_id).only("id", "node_id").first)
    return run is not None and run_finish(run=run, status=Status.TIMED_OUT, reason=reason)


class Heartbeat:
    """Touch the run's heartbeat while a worker holds it, so the reaper can tell a live run from a lost one."""

    def __init__(self, run_id, every_s=None):
        self.run_id = run_id
        self.every_s = every_s or settings.CUDAWEB_HEARTBEAT_S
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self):
        try:
            while not self.stop.wait(self.every_s):
                try:
                    ValidationRun.objects.filter(id=self.run_id, status=Status.RUNNING).update(
                        heartbeat=timezone.now())
                except DatabaseError as exc:  # a dropped connection: reconnect on the next beat, never stop
                    log.warning("heartbeat of run %s not written: %s", self.run_id, exc)
                    dbretry.connection_drop()
                    if isinstance(exc, dbretry.RETRYABLE):
                        dbretry.away_note()  # the reaper judges this silence from when the database is back
        finally:
            dbretry.connection_drop()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def runs_prune(*, older_than_days, keep_last=10, now=None, nodes_per_batch=200):
    """Delete finished runs (their check rows go with them) older than `older_than_days`, keeping each node's
    `keep_last` newest runs, its baseline and last run, and every run an acceptance record rests on. Works through
    the nodes a batch at a time, so memory stays bounded however long the history. Returns how many runs went."""
    now = now or timezone.now()
    protected = (set(Node.objects.exclude(baseline=None).values_list("baseline", flat=True))
                 | set(Node.objects.exclude(last_run=None).values_list("last_run", flat=True)))
    node_ids = list(Node.objects.order_by("id").values_list("id", flat=True))
    deleted = 0
    for start in range(0, len(node_ids), nodes_per_batch):
        # Ranked over all of a node's runs first: a window sees only the rows its own query's filters leave.
        beyond_newest = ValidationRun.objects.filter(node_id__in=node_ids[start:start + nodes_per_batch]).annotate(
            newest=Window(RowNumber(), partition_by=[F("node_id")], order_by=F("created").desc())
        ).filter(newest__gt=keep_last).values_list("id", flat=True)
        doomed = (ValidationRun.objects.filter(id__in=list(beyond_newest),
                                               created__lt=now - timedelta(days=older_than_days))
                  .exclude(status__in=ValidationRun.LIVE).exclude(acceptance_records__isnull=False))
        ids = [run_id for run_id in doomed.values_list("id", flat=True) if run_id not in protected]
        if ids:
            deleted += ValidationRun.objects.filter(id__in=ids).delete()[1].get("validation.ValidationRun", 0)
    return deleted
