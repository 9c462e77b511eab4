"""Drain and resume a node in Slurm with scontrol, run on the controller through a cudaweb transport."""

import re
import shlex

from cudaweb.hooks import outbound
from cudaweb.hooks.errors import Permanent, Transient
from cudaweb.remote.transports import base

REASON_PREFIX = "cudaweb: "
REASON_CAP = 200  # Slurm keeps the reason in its state file; a whole log does not belong there


def drain_argv(slurm_name, root_cause):
    # The shell's quoting is the transport's (shlex.quote of every argument); the reason's is outbound's.
    reason = outbound.slurm_reason(REASON_PREFIX + root_cause, REASON_CAP)
    return ["update", "NodeName=%s" % slurm_name, "State=DRAIN", "Reason=%s" % reason]


def resume_argv(slurm_name):
    return ["update", "NodeName=%s" % slurm_name, "State=RESUME"]


def scontrol_run(transport, scontrol, argv, timeout_s):
    command = list(scontrol) + list(argv)
    try:
        with transport as connected:
            result = connected.run_command(command, timeout_s=timeout_s)
    except (base.AuthFailed, base.HostKeyMismatch, base.HostKeyUnknown) as exc:
        raise Permanent("the Slurm controller refused us: %s" % exc)
    except base.TransportError as exc:
        raise Transient("the Slurm controller: %s" % exc)
    if result.exit_status != 0:
        # slurmctld busy or restarting answers the same way as a typo: bounded tries tell them apart.
        raise Transient("%s exited %s: %s" % (shlex.join(command), result.exit_status,
                                              (result.stderr or result.stdout).strip()[:500]))
    return result.stdout


def node_state(transport, scontrol, slurm_name, timeout_s=30):
    """(state, reason) of a node from `scontrol show node -o NAME`."""
    text = scontrol_run(transport, scontrol, ["show", "node", "-o", slurm_name], timeout_s)
    state = re.search(r"\bState=(\S+)", text)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", text.strip())
    return (state.group(1) if state else ""), (reason.group(1) if reason else "")


def resume(transport, scontrol, slurm_name, timeout_s=30):
    """Resume the node if cudaweb drained it; a drain someone else set (another reason) is left alone.
    Returns whether it resumed."""
    state, reason = node_state(transport, scontrol, slurm_name, timeout_s)
    if "DRAIN" not in state or not reason.startswith(REASON_PREFIX.strip()):
        return False
    scontrol_run(transport, scontrol, resume_argv(slurm_name), timeout_s)
    return True
