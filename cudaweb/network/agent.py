"""The agent's comm.peer check at the ends of a network test (a pair's two ends, an all-reduce's ranks): every end
started at once, each answering with its report or the error that kept it, and the failures its signatures name."""

import threading

from django.conf import settings
from django.db import connection

from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
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


def end_run(node, args, budget_s, purpose):
    """Run the agent with `args` on `node`, its interface named to gloo and NCCL: (report or None, error text)."""
    env = dict(node.agent_env() or {})
    if node.network_interface:
        env.update(GLOO_SOCKET_IFNAME=node.network_interface, NCCL_SOCKET_IFNAME=node.network_interface)
    try:
        payload, digest = bundle.build()
        with transport_for(node, purpose=purpose) as transport:
            path = transport.upload_agent(payload, digest)
            result = transport.run_agent(node.python_path, path, args, budget_s, env=env or None)
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


def ends_run(ends, *, budget_s):
    """Every end {key: (node, args, purpose)} at once; {key: (report or None, error text)}."""
    results = {}

    def one(key, node, args, purpose):
        results[key] = end_run(node, args, budget_s, purpose)

    at_once(one, [(key,) + end for key, end in ends.items()])
    return results
