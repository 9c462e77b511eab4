"""The one place that says what a verdict means: agent verdict -> run status -> node status."""

from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun

Status = ValidationRun.Status

RUN_STATUS_OF_VERDICT = {"pass": Status.PASSED, "warn": Status.WARNED, "fail": Status.FAILED}
NODE_STATUS_OF_RUN = {
    Status.PASSED: Node.Status.PASSING, Status.WARNED: Node.Status.WARNING, Status.FAILED: Node.Status.FAILING,
    Status.UNREACHABLE: Node.Status.UNREACHABLE, Status.AUTH_FAILED: Node.Status.UNREACHABLE,
    Status.HOST_KEY_MISMATCH: Node.Status.UNREACHABLE, Status.TIMED_OUT: Node.Status.FAILING,
    Status.AGENT_ERROR: Node.Status.FAILING,
}


def run_status_of(verdict):
    """The terminal run status an agent verdict ("pass" | "warn" | "fail") leads to."""
    return RUN_STATUS_OF_VERDICT[verdict]


def node_status_of(run_status, default=None):
    """The node status a run's terminal state leads to; `default` where the state says nothing of the node
    (INTERRUPTED: the dashboard lost the run, the node did nothing)."""
    return NODE_STATUS_OF_RUN.get(run_status, default)


def node_status_of_verdict(verdict, default=None):
    status = RUN_STATUS_OF_VERDICT.get(verdict)
    return default if status is None else node_status_of(status, default)
