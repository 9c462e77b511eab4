"""The ladder's rungs on a node: re-validate (standard or burn-in), GPU reset, reboot through the site's command. Each
is a LoopAction (kept and queued by cudaweb.health.actions), claimed PENDING -> RUNNING by one conditional UPDATE (a
redelivered task finds it taken), with a deadline (the sweep ends a rung past it as timed_out: never started again)
and a named outcome, which goes back to the state machine."""

import logging
import shlex
import subprocess
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cudaweb.common.dbretry import retrying
from cudaweb.health import actions, machine, services
from cudaweb.health.models import LoopAction
from cudaweb.hooks.models import HookDelivery
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
from cudaweb.validation.models import ValidationRun

log = logging.getLogger(__name__)
Status = LoopAction.Status
OUTCOME_OF = {Status.SUCCEEDED: machine.SUCCEEDED, Status.FAILED: machine.FAILED,
              Status.TIMED_OUT: machine.TIMED_OUT, Status.BUSY: machine.BUSY}


def action_run(action_id):
    """Claim and run one rung. Returns its status, or None when it was not ours to run."""
    now = timezone.now()
    if not LoopAction.objects.filter(id=action_id, status=Status.PENDING).update(status=Status.RUNNING, started=now):
        return None  # taken by another worker, or ended already: never run twice
    action = LoopAction.objects.select_related("node", "node__credential").get(id=action_id)
    try:
        if action.kind in machine.REVALIDATIONS:
            return _revalidate(action)
        if action.kind == machine.RESET:
            status, outcome = _reset(action)
        elif action.kind == machine.REBOOT:
            status, outcome = _reboot(action)
        else:
            status, outcome = Status.FAILED, "unknown rung %r" % action.kind
    except Exception as exc:  # a bug of ours: the rung ends with a name, never stays RUNNING
        log.exception("loop action %s failed", action_id)
        status, outcome = Status.FAILED, "the dashboard failed while running it: %s: %s" % (type(exc).__name__, exc)
    return action_finish(action, status, outcome)


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
        services.apply(action.node, machine.Stimulus(machine.OUTCOME, action=action.kind, outcome=OUTCOME_OF[status]),
              run=action.run)
    return status if ended else None


def _drained(node):
    """The node is out of the schedulers' hands: every drain / cordon queued for it was delivered (none configured:
    nothing to wait for)."""
    kinds = (HookDelivery.Kind.SLURM_DRAIN, HookDelivery.Kind.K8S_CORDON)
    latest = HookDelivery.objects.filter(node=node, kind__in=kinds).order_by("-created").first()
    return latest is None or latest.status in (HookDelivery.Status.DELIVERED,)


def _reset(action):
    """`nvidia-smi -r -i <gpu>` (argv, each argument quoted by the transport), only on a drained node and only when
    no process holds the GPU."""
    node = action.node
    if not _drained(node):
        return Status.BUSY, "the node's drain is not confirmed yet; no reset on a node the scheduler may still use"
    if not action.gpu_uuid:
        return Status.FAILED, "no GPU named by the events: a reset needs one"
    smi = list(settings.CUDAWEB_NVIDIA_SMI)
    try:
        with transport_for(node, purpose="loop reset %s" % action.id) as connected:
            held = connected.run_command(smi + ["--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
                                         timeout_s=30)
            if held.exit_status != 0:
                return Status.FAILED, "nvidia-smi could not list the GPU's processes: %s" % (
                    (held.stderr or held.stdout).strip()[:300])
            pids = [line.split(",")[1].strip() for line in held.stdout.splitlines()
                    if line.split(",")[0].strip() == action.gpu_uuid and "," in line]
            if pids:
                return Status.BUSY, "process(es) %s hold GPU %s: not reset" % (", ".join(pids[:10]), action.gpu_uuid)
            result = connected.run_command(smi + ["-r", "-i", action.gpu_uuid],
                                           timeout_s=settings.CUDAWEB_RESET_TIMEOUT_S)
    except TransportError as exc:
        return Status.FAILED, "the reset did not reach the node: %s" % exc
    text = (result.stdout + result.stderr).strip()[:300]
    if result.exit_status != 0:
        return Status.FAILED, "nvidia-smi -r -i %s exited %d: %s" % (action.gpu_uuid, result.exit_status, text)
    return Status.SUCCEEDED, "GPU %s reset: %s" % (action.gpu_uuid, text)


def _reboot(action):
    """The site's reboot command (CUDAWEB_REBOOT_COMMAND, an argv template; {node} and {address} are filled in as
    single arguments, never through a shell), only on a drained node, as a reset."""
    template = settings.CUDAWEB_REBOOT_COMMAND
    if not template:
        return Status.FAILED, "no reboot command is configured (CUDAWEB_REBOOT_COMMAND)"
    node = action.node
    if not _drained(node):
        return Status.BUSY, "the node's drain is not confirmed yet; no reboot of a node the scheduler may still use"
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
    """Ask validation for a run; its end (validation's run_finished) is the rung's outcome."""
    from cudaweb.validation.services import run_request

    mode = ValidationRun.Mode.BURNIN if action.kind == machine.REVALIDATE_BURNIN else ValidationRun.Mode.STANDARD
    burnin_s = settings.CUDAWEB_LOOP_BURNIN_S if mode == ValidationRun.Mode.BURNIN else None
    try:
        run = run_request(node=action.node, mode=mode, burnin_seconds=burnin_s)
    except Exception as exc:  # the queue is down: the rung failed to start, by name
        return action_finish(action, Status.FAILED, "the re-validation could not be queued: %s" % exc)
    LoopAction.objects.filter(id=action.id).update(run=run)
    return Status.RUNNING


def on_run_finished(sender, run_id, status, **kwargs):
    """Receiver of validation.signals.run_finished: the outcome of a re-validation rung (passed or warned:
    succeeded; anything else: failed). Runs inside the transaction that ends the run."""
    action = LoopAction.objects.select_related("node").filter(run_id=run_id, status=Status.RUNNING).first()
    if action is None:
        return
    action.run = ValidationRun.objects.get(id=run_id)
    good = status in (ValidationRun.Status.PASSED, ValidationRun.Status.WARNED)
    action_finish(action, Status.SUCCEEDED if good else Status.FAILED, "the run ended %s" % status)


def actions_sweep(now=None):
    """A rung past its deadline ends timed_out (its worker died, or it hangs): it is never started again. A PENDING
    rung nobody took is queued again. Returns (timed out, queued again)."""
    now = now or timezone.now()
    late = list(LoopAction.objects.select_related("node").filter(status=Status.RUNNING, deadline__lt=now))
    for action in late:
        action_finish(action, Status.TIMED_OUT, "no outcome within its deadline (%s)" % action.deadline.isoformat())
    stale = list(LoopAction.objects.filter(status=Status.PENDING, created__lt=now - timedelta(seconds=60))
                 .values_list("id", flat=True))
    for action_id in stale:
        actions.action_enqueue(action_id)
    return len(late), len(stale)

