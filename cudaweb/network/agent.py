"""The agent's comm.peer check at the ends of a network test (a pair's two ends, an all-reduce's ranks): every end
started at once, each answering with its report or the error that kept it, and the failures its signatures name."""

import threading

from django.conf import settings
from django.db import connection

from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import Cancelled, TransportError
from cudaweb.validation.reports import ReportError, parse_report

# The agent's signatures -> the failure a pair or an all-reduce names; the first found wins (the connecting side first).
FAILURES = (
    ("bad_interface", "wrong interface"),
    ("nccl_bad_interface", "wrong interface"),
    ("nccl_no_route", "no route to the peer"),
    ("nccl_peer_unreachable", "port closed on the peer"),
    ("rendezvous_port_in_use", "port in use"),
    ("peer_timeout", "peer never answered (port blocked, or it never came)"),
)


def master_of(head, slot):
    """Where rank 0 (on `head`) listens for the test's `slot`: gloo on the port, NCCL on the port + 1."""
    span = max(2, head.pair_port_max - head.pair_port_min)
    port = head.pair_port_min + (2 * slot) % span
    return ("127.0.0.1" if head.is_local else head.address, port)


def peer_args(master, *placing):
    """The agent's arguments for its comm.peer check; `placing` says which end it is (--peer-role, or --world and
    --rank)."""
    return (["--mode", "quick", "--json", "--exit-with-stdin", "--only", "comm.peer", *placing,
             "--master", "%s:%d" % master, "--peer-timeout", str(settings.CUDAWEB_PAIR_TIMEOUT_S)])


def peer_check(report):
    """The comm.peer check of an end's report, or None."""
    return next((c for c in (report or {}).get("checks", []) if c["id"] == "comm.peer"), None)


def never_started(report):
    """Why an end's agent answered without starting its comm.peer check (skipped: a check it needs did not pass,
    e.g. torch.import on a Python without torch), with the blocking check's own summary; None when it started (or
    printed no report: that is the transport's error)."""
    if report is None:
        return None
    check = peer_check(report)
    if check is None:
        return "its report has no comm.peer check"
    if check["status"] != "skip":
        return None
    reason = check.get("summary") or "comm.peer was skipped"
    blocker = next((c for c in report.get("checks", []) if c["id"] == check.get("blocked_by")), None)
    if blocker is not None and blocker.get("summary"):
        reason += " (%s: %s)" % (blocker["id"], blocker["summary"])
    return reason


def end_run(node, args, budget_s, purpose, stop=None):
    """Run the agent with `args` on `node`, its interface named to gloo and NCCL: (report or None, error text).
    Once `stop` (a threading.Event) is set, the agent is ended and the error text says why."""
    env = dict(node.agent_env() or {})
    if node.network_interface:
        env.update(GLOO_SOCKET_IFNAME=node.network_interface, NCCL_SOCKET_IFNAME=node.network_interface)
    try:
        payload, digest = bundle.build()
        with transport_for(node, purpose=purpose) as transport:
            path = transport.upload_agent(payload, digest)
            if stop is not None and stop.is_set():
                raise Cancelled("stopped before it started: %s" % stop.reason)
            result = transport.run_agent(node.python_path, path, args, budget_s, env=env or None,
                                         **({"stop": stop} if stop is not None else {}))
        return parse_report(result.stdout), ""
    except (TransportError, ReportError, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    finally:
        connection.close()


def at_once(fn, calls):
    """fn(*args) for every args of `calls`, each in its thread, all started before any is waited for."""
    threads = [threading.Thread(target=fn, args=tuple(args)) for args in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def ends_run(ends, *, budget_s, stop_when=None):
    """Every end {key: (node, args, purpose)} at once; {key: (report or None, error text)}. `stop_when(node,
    result)` returns a reason to end the other ends now (one that cannot start leaves the rest waiting for it until
    their peer timeout), or None."""
    results = {}
    stop = threading.Event() if stop_when else None

    def one(key, node, args, purpose):
        results[key] = end_run(node, args, budget_s, purpose, stop)
        reason = stop_when(node, results[key]) if stop_when else None
        if reason and not stop.is_set():
            stop.reason = reason
            stop.set()

    at_once(one, [(key,) + end for key, end in ends.items()])
    return results
