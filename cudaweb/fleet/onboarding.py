"""Where a node's onboarding stands: which step, the run it shows, the run a decision rests on, and what to do
after a run that ended without a verdict."""

from cudaweb.nodes.models import HostKey
from cudaweb.validation.models import ValidationRun

Status = ValidationRun.Status
# A run that ended without a verdict: what it means and what to do before validating again.
WHAT_TO_DO = {
    Status.UNREACHABLE: "The dashboard could not reach the node's SSH server. Check the address and port, that sshd "
                        "runs on the node and that no firewall drops the connection, then validate again.",
    Status.AUTH_FAILED: "The node refused the login. Check the user name and that the key's public half is in that "
                        "user's ~/.ssh/authorized_keys on the node, then validate again.",
    Status.HOST_KEY_MISMATCH: "The node presented another host key than the one accepted. Find out why (a "
                              "reinstalled node, or someone in between) before you accept its new key on the node "
                              "page.",
    Status.TIMED_OUT: "The agent ran past its time budget (a hung GPU, a slow host): read the output it left, "
                      "fix the node or raise its agent timeout, then validate again.",
    Status.AGENT_ERROR: "The node could not take or start the agent, or its output is not a report: the reason names "
                        "what the node lacks (its SSH setup, the Python path, a package). Fix it, then validate "
                        "again.",
    Status.DASHBOARD_ERROR: "The dashboard failed, not the node: validate again; if it repeats, give the dashboard's "
                            "admins this run's page.",
    Status.INTERRUPTED: "The worker holding the run was lost before the node answered: validate again.",
}


def onboarding_state(*, node):
    """{step, run, decidable, record, host_key, what_to_do}. `run` is the node's newest run whatever started it (the
    wizard, the node page, a schedule); `decidable` the newest finished run with a verdict, the one a decision rests
    on. Steps: host_key -> validate (no run yet) -> running -> decide (any ending; "validate again" is offered) ->
    done (decided on the newest run with a verdict)."""
    host_key = HostKey.objects.filter(node=node).first()
    run = node.runs.select_related("requested_by").order_by("-created").first()
    decidable = node.runs.filter(status__in=ValidationRun.VERDICT_STATUSES).order_by("-finished", "-created").first()
    record = node.acceptance_records.select_related("decided_by").first()
    if not (node.is_local or (host_key and host_key.accepted)):
        step = "host_key"
    elif run is None:
        step = "validate"
    elif run.is_live:
        step = "running"
    elif record is not None and decidable is not None and record.run_id == decidable.id:
        step = "done"
    else:
        step = "decide"
    return {"step": step, "run": run, "decidable": decidable, "record": record, "host_key": host_key,
            "what_to_do": WHAT_TO_DO.get(run.status, "") if run is not None and not run.is_live else ""}


def decidable_run(*, node):
    """The run a decision on `node` may rest on now: its newest finished run with a verdict, or None."""
    return onboarding_state(node=node)["decidable"]
