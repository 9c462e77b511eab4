"""The ladder's rungs on a node: re-validate (standard or burn-in), GPU reset, reboot through the site's command. Each
is a LoopAction (kept and queued by cudaweb.health.actions), claimed PENDING -> RUNNING by one conditional UPDATE (a
redelivered task finds it taken), with a deadline (the sweep ends a rung past it as timed_out: never started again)
and a named outcome, which goes back to the state machine."""

import logging
import shlex
import subprocess
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cudaweb.common.dbretry import retrying
from cudaweb.health import actions, machine, services
from cudaweb.health.ingest import GPU_UUID
from cudaweb.health.models import LoopAction, NodeLoop, Transition
from cudaweb.health.policy import policy_of
from cudaweb.hooks.models import HookDelivery
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)
Status = LoopAction.Status
OUTCOME_OF = {Status.SUCCEEDED: machine.SUCCEEDED, Status.FAILED: machine.FAILED,
              Status.TIMED_OUT: machine.TIMED_OUT, Status.BUSY: machine.BUSY, Status.ABORTED: machine.ABORTED,
              Status.SKIPPED: machine.SKIPPED}
DRAIN_POLL_S = 0.5
_pause = time.sleep  # the drain wait's (tests stand in for the hooks' worker here)
# A run that ended by the dashboard's own failure says nothing of the node: its rung is aborted, never failed
OUR_FAILURES = (ValidationRun.Status.INTERRUPTED, ValidationRun.Status.DASHBOARD_ERROR)


def action_run(action_id):
    """Claim and run one rung. Returns its status, or None when it was not ours to run."""
    action = retrying(_claim, action_id, what="claim of loop action %s" % action_id)
    if action is None:
        return None  # taken by another worker, ended or cancelled: never run twice, never beside a decision
    try:
        if action.kind in machine.REVALIDATIONS:
            return _revalidate(action)
        if action.kind == machine.RESET:
            status, outcome = _reset(action)
        elif action.kind == machine.REBOOT:
            status, outcome = _reboot(action)
        else:
            status, outcome = Status.FAILED, "unknown rung %r" % action.kind
    except Exception as exc:  # a bug of ours: the rung ends with a name, never stays RUNNING, and says nothing of
        log.exception("loop action %s failed", action_id)  # the node: aborted, taken again
        status, outcome = Status.ABORTED, "the dashboard failed while running it: %s: %s" % (type(exc).__name__, exc)
    return action_finish(action, status, outcome)


@transaction.atomic
def _claim(action_id):
    """PENDING -> RUNNING under the node's loop row lock, the lock an operator's decision takes too: a rung starts
    only while its node is still in that rung (not marked healthy or sent to rma a moment before; then it is
    cancelled), and no decision is applied while the claim is made. Its deadline runs from now, its start."""
    action = LoopAction.objects.select_related("node", "node__credential").filter(
        id=action_id, status=Status.PENDING).first()
    if action is None:
        return None
    loop = NodeLoop.objects.select_for_update().filter(node_id=action.node_id).first()
    now = timezone.now()
    if loop is None or loop.state not in machine.IN_RUNG or loop.action != action.kind:
        LoopAction.objects.filter(id=action.id, status=Status.PENDING).update(
            status=Status.CANCELLED, finished=now, outcome="cancelled: the node is %s, no longer in this rung" % (
                loop.state if loop else "gone"))
        return None
    if not LoopAction.objects.filter(id=action.id, status=Status.PENDING).update(
            status=Status.RUNNING, started=now, deadline=now + timedelta(seconds=actions.timeout_s(action.kind))):
        return None
    action.status, action.started = Status.RUNNING, now
    return action


def action_finish(action, status, outcome):
    """End a RUNNING rung (conditionally: a rung the sweep timed out meanwhile keeps that outcome) and tell the
    machine, in one transaction, tried again whole over a dropped database connection: the rung's end and the
    transition it makes are kept together or not at all (then the rung is still RUNNING, and ends again)."""
    return retrying(_action_finish, action, status, outcome, what="end of loop action %s" % action.id)


@transaction.atomic
def _action_finish(action, status, outcome):
    ended = LoopAction.objects.filter(id=action.id, status=Status.RUNNING).update(
        status=status, outcome=outcome[:500], finished=timezone.now())
    if ended:
        transition = services.apply(action.node, machine.Stimulus(machine.OUTCOME, action=action.kind,
                                                                  outcome=OUTCOME_OF[status]), run=action.run)
        if transition is not None and status != Status.SUCCEEDED:
            # the machine's words say what it does; the rung's own say why (which process, which drain)
            Transition.objects.filter(id=transition.id).update(why=("%s: %s" % (transition.why, outcome))[:500])
    return status if ended else None


SCHEDULERS = ((HookDelivery.Kind.SLURM_DRAIN, HookDelivery.Kind.SLURM_RESUME, "CUDAWEB_SLURM_CONTROLLER", "Slurm"),
              (HookDelivery.Kind.K8S_CORDON, HookDelivery.Kind.K8S_UNCORDON, "CUDAWEB_K8S_API", "Kubernetes"))


def _out_of_service(node):
    """(None, "", False) when every scheduler configured has the node out of its hands: for each, the newest drain /
    resume of the node is a drain, delivered. ("idle", "", False) when none is configured and the node's policy says
    it has no scheduler: the caller then needs every GPU idle. Else (Status.BUSY, why, whether a drain is pending,
    i.e. may yet be delivered): no reset or reboot."""
    configured = [(drain, resume, what) for drain, resume, setting, what in SCHEDULERS if getattr(settings, setting)]
    if not configured:
        if policy_of(node).no_scheduler:
            return "idle", "", False
        return Status.BUSY, "no scheduler is configured to drain the node (CUDAWEB_SLURM_CONTROLLER, " \
            "CUDAWEB_K8S_API) and its policy does not say it has none: no reset or reboot of a node that may run " \
            "jobs", False
    for drain, resume, what in configured:
        newest = HookDelivery.objects.filter(node=node, kind__in=(drain, resume)).order_by("-created", "-id").first()
        if newest is None or newest.kind != drain:
            return Status.BUSY, "no %s drain of the node is on record: no reset or reboot of a node the scheduler " \
                "may still use" % what, False
        if newest.status != HookDelivery.Status.DELIVERED:
            return Status.BUSY, "the node's %s drain is %s, not delivered: no reset or reboot of a node the " \
                "scheduler may still use" % (what, newest.status), newest.status == HookDelivery.Status.PENDING
    return None, "", False


def _drained_in_time(node):
    """_out_of_service, waiting up to CUDAWEB_LOOP_DRAIN_WAIT_S for drains still pending: the rung starts as the
    quarantine queues its drain, and a drain is delivered a moment later (else every first reset ended busy and
    waited a retry). A drain failed for good, or none on record, is answered at once."""
    deadline = time.monotonic() + settings.CUDAWEB_LOOP_DRAIN_WAIT_S
    while True:
        status, why, pending = _out_of_service(node)
        if not pending or time.monotonic() >= deadline:
            return status, why
        _pause(DRAIN_POLL_S)


def _gpu_processes(connected, smi):
    """[(gpu uuid, pid)] of the compute processes on the node, or raises _Refused."""
    held = connected.run_command(smi + ["--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"], timeout_s=30)
    if held.exit_status != 0:
        raise _Refused(Status.FAILED, "nvidia-smi could not list the GPUs' processes: %s" % (
            (held.stderr or held.stdout).strip()[:300]))
    return [(line.split(",")[0].strip(), line.split(",")[1].strip()) for line in held.stdout.splitlines()
            if "," in line]


class _Refused(Exception):
    def __init__(self, status, outcome):
        super().__init__(outcome)
        self.status, self.outcome = status, outcome


def _reset(action):
    """`nvidia-smi -r -i <GPU UUID>` (argv, each argument quoted by the transport), only on a node out of the
    schedulers' hands, only for a GPU named by NVIDIA's UUID form that nvidia-smi lists on that node now (never an
    index or free text from a report), and only when no process holds it (with no scheduler: none holds any GPU)."""
    node = action.node
    status, why = _drained_in_time(node)
    if status not in (None, "idle"):
        return status, why
    if not GPU_UUID.match(action.gpu_uuid or ""):
        return Status.SKIPPED, "no GPU named by its UUID (GPU-...) in the events: a reset does not apply"
    smi = list(settings.CUDAWEB_NVIDIA_SMI)
    try:
        with transport_for(node, purpose="loop reset %s" % action.id) as connected:
            listed = connected.run_command(smi + ["--query-gpu=uuid", "--format=csv,noheader"], timeout_s=30)
            if listed.exit_status != 0:
                return Status.FAILED, "nvidia-smi could not list the node's GPUs: %s" % (
                    (listed.stderr or listed.stdout).strip()[:300])
            if action.gpu_uuid not in {line.strip() for line in listed.stdout.splitlines()}:
                return Status.FAILED, "GPU %s is not one of the GPUs nvidia-smi lists on %s: not reset" % (
                    action.gpu_uuid, node.name)
            held = _gpu_processes(connected, smi)
            pids = [pid for gpu, pid in held if status == "idle" or gpu == action.gpu_uuid]
            if pids:
                return Status.BUSY, "process(es) %s hold %s: not reset" % (
                    ", ".join(pids[:10]), "the node's GPUs (it has no scheduler)" if status == "idle"
                    else "GPU %s" % action.gpu_uuid)
            result = connected.run_command(smi + ["-r", "-i", action.gpu_uuid],
                                           timeout_s=settings.CUDAWEB_RESET_TIMEOUT_S)
    except _Refused as refused:
        return refused.status, refused.outcome
    except TransportError as exc:
        return Status.FAILED, "the reset did not reach the node: %s" % exc
    text = (result.stdout + result.stderr).strip()[:300]
    if result.exit_status != 0:
        return Status.FAILED, "nvidia-smi -r -i %s exited %d: %s" % (action.gpu_uuid, result.exit_status, text)
    return Status.SUCCEEDED, "GPU %s reset: %s" % (action.gpu_uuid, text)


def _reboot(action):
    """The site's reboot command (CUDAWEB_REBOOT_COMMAND, an argv template; {node} and {address} are filled in as
    single arguments, never through a shell), only on a node out of the schedulers' hands, as a reset (with no
    scheduler: only while no process holds any of its GPUs)."""
    template = settings.CUDAWEB_REBOOT_COMMAND
    if not template:
        return Status.FAILED, "no reboot command is configured (CUDAWEB_REBOOT_COMMAND)"
    node = action.node
    status, why = _drained_in_time(node)
    if status not in (None, "idle"):
        return status, why
    if status == "idle":
        try:
            with transport_for(node, purpose="loop reboot %s" % action.id) as connected:
                held = _gpu_processes(connected, list(settings.CUDAWEB_NVIDIA_SMI))
        except _Refused as refused:
            return refused.status, refused.outcome
        except TransportError as exc:
            return Status.FAILED, "could not look at the node's GPUs before the reboot: %s" % exc
        if held:
            return Status.BUSY, "process(es) %s hold the node's GPUs (it has no scheduler): not rebooted" % (
                ", ".join(pid for _, pid in held[:10]))
    argv = [part.format(node=node.name, address=node.address) for part in shlex.split(template)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=settings.CUDAWEB_REBOOT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Status.TIMED_OUT, "%s ran past %d s" % (argv[0], settings.CUDAWEB_REBOOT_TIMEOUT_S)
    except OSError as exc:
        return Status.FAILED, "%s could not start: %s" % (argv[0], exc)
    text = (done.stdout + done.stderr).strip()[:300]
    if done.returncode != 0:
        return Status.FAILED, "%s exited %d: %s" % (argv[0], done.returncode, text)
    return Status.SUCCEEDED, "rebooted by %s: %s" % (argv[0], text)


def _revalidate(action):
    """Ask validation for a run begun now; its end (validation's run_finished) is the rung's outcome. A run the node
    already has live began before the rung (an operator's quick run, before the reset): it is not adopted; the rung
    waits for it to end, then asks for its own (on_run_finished)."""
    from cudaweb.validation.services import run_request

    earlier = ValidationRun.objects.filter(node=action.node, status__in=ValidationRun.LIVE).first()
    if earlier is not None:
        LoopAction.objects.filter(id=action.id).update(
            outcome=("waiting for run %s (begun before this rung) to end" % earlier.id)[:500])
        return Status.RUNNING
    mode = ValidationRun.Mode.BURNIN if action.kind == machine.REVALIDATE_BURNIN else ValidationRun.Mode.STANDARD
    burnin_s = settings.CUDAWEB_LOOP_BURNIN_S if mode == ValidationRun.Mode.BURNIN else None
    try:
        run = run_request(node=action.node, mode=mode, burnin_seconds=burnin_s)
    except Exception as exc:  # the queue is down: our failure, the rung is taken again
        return action_finish(action, Status.ABORTED, "the re-validation could not be queued: %s" % exc)
    LoopAction.objects.filter(id=action.id).update(run=run, outcome="")
    return Status.RUNNING


def on_run_finished(sender, run_id, status, **kwargs):
    """Receiver of validation.signals.run_finished: the outcome of a re-validation rung (passed or warned:
    succeeded; lost by a killed worker: its retry is followed; ended by another of our own failures: aborted, taken
    again; anything else: failed). A run that began before a waiting rung ends: the rung asks for its own. Runs
    inside the transaction that ends the run."""
    run = ValidationRun.objects.get(id=run_id)
    action = LoopAction.objects.select_related("node").filter(run_id=run_id, status=Status.RUNNING).first()
    if action is None:
        waiting = LoopAction.objects.select_related("node").filter(
            node_id=run.node_id, status=Status.RUNNING, run=None, kind__in=machine.REVALIDATIONS).first()
        if waiting is not None:
            transaction.on_commit(lambda: _revalidate(waiting), robust=True)
        return
    action.run = run
    if status in OUR_FAILURES:
        # once the run's end commits (a lost run's retry is made in that transaction, after this signal)
        transaction.on_commit(lambda: _follow_or_abort(action, run_id, status), robust=True)
        return
    good = status in (ValidationRun.Status.PASSED, ValidationRun.Status.WARNED)
    action_finish(action, Status.SUCCEEDED if good else Status.FAILED, "the run ended %s" % status)


def _follow_or_abort(action, run_id, status):
    """A re-validation whose run the dashboard lost: follow the run's retry (the reaper's), else abort the rung."""
    retry = ValidationRun.objects.filter(retry_of_id=run_id, status__in=ValidationRun.LIVE).first()
    if retry is not None and LoopAction.objects.filter(id=action.id, status=Status.RUNNING, run_id=run_id).update(
            run=retry):
        return
    action_finish(action, Status.ABORTED, "the run ended %s, the dashboard's own failure" % status)


def actions_sweep(now=None):
    """A rung past its deadline (from its claim) ends aborted: its worker died or the database was away past its
    retries (a rung that hangs on the node is ended by its own worker first, timed_out); it is never started again,
    and the node goes back to quarantined, its rung taken anew. A PENDING rung nobody took is queued again. Returns
    (aborted, queued again)."""
    now = now or timezone.now()
    late = list(LoopAction.objects.select_related("node").filter(status=Status.RUNNING, deadline__lt=now))
    for action in late:
        action_finish(action, Status.ABORTED, "no outcome within its deadline (%s): its worker was lost or the "
                      "database away" % action.deadline.isoformat())
    stale = list(LoopAction.objects.filter(status=Status.PENDING, created__lt=now - timedelta(seconds=60))
                 .values_list("id", flat=True))
    for action_id in stale:
        actions.action_enqueue(action_id)
    return len(late), len(stale)
