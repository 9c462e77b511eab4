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


def ours(reason):
    """Whether a Slurm reason is cudaweb's own drain (drain_argv's prefix): the only drain cudaweb resumes."""
    return reason.startswith(REASON_PREFIX.strip())


def drain(transport, scontrol, slurm_name, argv, timeout_s=30):
    """Drain the node with `argv` (drain_argv's), unless someone else has drained it already: an update would
    replace their reason with ours, and the resume, which knows cudaweb's drain by its reason, would then undo
    theirs. Returns "" when it drained the node, else a note saying whose drain it found and kept (the node is
    out of the scheduler's hands either way)."""
    state, reason = node_state(transport, scontrol, slurm_name, timeout_s)
    if "DRAIN" in state and not ours(reason):
        # Slurm has no compare-and-set: a drain set between this look and the update below is still replaced
        return "already drained by someone else (State=%s Reason=%s): their drain and reason kept, not ours" % (
            state, reason[:REASON_CAP] or "none")
    scontrol_run(transport, scontrol, argv, timeout_s)
    return ""


def resume(transport, scontrol, slurm_name, timeout_s=30):
    """Resume the node if cudaweb drained it; a drain someone else set (another reason) is left alone.
    Returns "" when it resumed the node, else a note saying why it left the node as it is."""
    state, reason = node_state(transport, scontrol, slurm_name, timeout_s)
    if "DRAIN" not in state:
        return "not drained (State=%s): nothing to resume" % state
    if not ours(reason):
        return "drained by someone else (Reason=%s): left drained" % (reason[:REASON_CAP] or "none")
    scontrol_run(transport, scontrol, resume_argv(slurm_name), timeout_s)
    return ""
