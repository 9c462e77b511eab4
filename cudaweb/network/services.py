"""Running a network test: for each round, every pair at once, the agent's pair mode started at both ends of a pair
at the same time (gloo over TCP; NCCL too where the nodes have GPUs), each failure named."""

import logging
import threading
import time

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.network import collective, plans
from cudaweb.network.models import NetworkTest, PairResult
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
from cudaweb.validation import dbretry, queue
from cudaweb.validation.reports import ReportError, parse_report

log = logging.getLogger(__name__)
AGENT_BUDGET_S = 120
EVIDENCE_CAP = 4000
LOOPBACK = "remote=[127.0.0.1]"
# The agent's signatures -> the failure the matrix names; the first found wins (the connecting side first).
FAILURES = (
    ("bad_interface", "wrong interface"),
    ("nccl_bad_interface", "wrong interface"),
    ("nccl_no_route", "no route to the peer"),
    ("nccl_peer_unreachable", "port closed on the peer"),
    ("rendezvous_port_in_use", "port in use"),
    ("peer_timeout", "peer never answered (port blocked, or it never came)"),
)


def network_test_request(*, nodes, requested_by=None, plan=None):
    """A network test of `nodes` (two or more), queued once the transaction commits. Raises
    queue.BrokerUnavailable, keeping nothing, when the task queue does not answer."""
    from cudaweb.network.tasks import run_network_test

    nodes = list(nodes)
    if len(nodes) < 2:
        raise ValueError("a network test needs two nodes or more")
    test = NetworkTest.objects.create(plan=plan or plans.plan_for(len(nodes)), requested_by=requested_by)
    test.nodes.set(nodes)
    names = [node.name for node in nodes[:50]]
    transaction.on_commit(lambda: _enqueue_or_forget(test, run_network_test, requested_by, names))
    return test


def _enqueue_or_forget(test, task, requested_by, names):
    """Queue the test's task, then record the request; with the task queue down, raise queue.BrokerUnavailable
    and keep no test (and no audit row naming it)."""
    try:
        task.apply_async(args=[str(test.id)], retry=True, retry_policy=queue.PUBLISH_RETRY)
    except queue.BROKER_ERRORS as exc:
        NetworkTest.objects.filter(id=test.id, status=NetworkTest.Status.PENDING).delete()
        raise queue.BrokerUnavailable("the task queue (Redis) does not answer: %s" % exc) from exc
    audit.record("network_test.requested", actor=requested_by, obj=test, plan=test.plan, nodes=names)


def _agent(node, role, master, results, key):
    """Run the agent's pair mode on `node`; results[key] = (report or None, error text)."""
    args = ["--mode", "quick", "--json", "--exit-with-stdin", "--only", "comm.peer", "--peer-role", role,
            "--master", "%s:%d" % master, "--peer-timeout", str(settings.CUDAWEB_PAIR_TIMEOUT_S)]
    env = dict(node.agent_env() or {})
    if node.network_interface:
        env.update(GLOO_SOCKET_IFNAME=node.network_interface, NCCL_SOCKET_IFNAME=node.network_interface)
    try:
        payload, digest = bundle.build()
        # the host-key read and the credential's audit row ride over a database blink, as a run's do
        with dbretry.retrying(transport_for, node, purpose="network test pair (%s)" % role,
                              what="connection to %s" % node.name) as transport:
            path = transport.upload_agent(payload, digest)
            result = transport.run_agent(node.python_path, path, args, AGENT_BUDGET_S, env=env or None)
        results[key] = (parse_report(result.stdout), "")
    except (TransportError, ReportError, ValueError) as exc:
        results[key] = (None, "%s: %s" % (type(exc).__name__, exc))
    finally:
        connection.close()


def _peer_check(report):
    if report is None:
        return None
    return next((c for c in report["checks"] if c["id"] == "comm.peer"), None)


def pair_run(*, test, round_number, node_a, node_b):
    """Both ends of one pair at once; the stored PairResult."""
    span = max(2, node_a.pair_port_max - node_a.pair_port_min)
    port = node_a.pair_port_min + (2 * round_number) % span  # gloo on port, NCCL on port + 1
    master = ("127.0.0.1" if node_a.is_local else node_a.address, port)
    results, started = {}, time.monotonic()
    threads = [threading.Thread(target=_agent, args=(node, role, master, results, role))
               for node, role in ((node_a, "rank0"), (node_b, "rank1"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fields = pair_outcome(node_a, node_b, results)
    return PairResult.objects.create(test=test, round=round_number, node_a=node_a, node_b=node_b,
                                     duration_s=round(time.monotonic() - started, 2), **fields)


def pair_outcome(node_a, node_b, results):
    """What one pair showed, from both ends' results {"rank0" | "rank1": (report or None, error text)}: its
    status, the failure named, the figures and the evidence (the PairResult's fields)."""
    checks = {role: _peer_check(results[role][0]) for role in ("rank0", "rank1")}
    signatures = [s for role in ("rank1", "rank0") for s in ((checks[role] or {}).get("signatures") or [])]
    failure, reason = "", ""
    ends = ((node_a.name, "rank0"), (node_b.name, "rank1"))
    if any(results[role][1] for _, role in ends):
        failure = "peer never came"
        reason = "; ".join("%s: %s" % (name, results[role][1]) for name, role in ends if results[role][1])
    elif not all(c and c["status"] == "pass" for c in checks.values()):
        failure = next((name for signature, name in FAILURES if signature in signatures), "pair test failed")
        reason = "; ".join("%s (%s): %s" % (name, role, (checks[role] or {}).get("summary", "no comm.peer"))
                           for name, role in ends)
    metrics = (checks["rank0"] or {}).get("metrics") or {}
    evidence = "\n".join("== %s\n%s" % (role, (checks[role] or {}).get("evidence", "")) for role in checks)
    if failure and LOOPBACK in evidence and not (node_a.is_local and node_b.is_local):
        # gloo advertised the address its host name resolves to, 127.0.0.1: the peer cannot reach that
        failure = "wrong interface (loopback chosen)"
    transport = next((line.split(": ", 1)[1] for line in evidence.splitlines() if line.startswith("transports: ")),
                     "")
    return {"status": PairResult.Status.FAIL if failure else PairResult.Status.PASS, "failure": failure,
            "signatures": sorted(set(signatures)), "reason": reason[:4000],
            "gloo_latency_us": metrics.get("peer_gloo_latency_us"),
            "gloo_busbw_gbs": metrics.get("peer_gloo_busbw_gbs.4mib"),
            "nccl_busbw_gbs": metrics.get("peer_nccl_busbw_gbs.256mib"), "transport": transport[:64],
            "evidence": evidence[:EVIDENCE_CAP]}


def suspects_of(pairs):
    """Nodes that fail with every partner (two partners or more) while other pairs of the test pass."""
    if not any(p.status == PairResult.Status.PASS for p in pairs):
        return []
    outcomes = {}
    for pair in pairs:
        for node in (pair.node_a, pair.node_b):
            outcomes.setdefault(node.name, []).append(pair.status)
    return sorted(name for name, statuses in outcomes.items()
                  if len(statuses) >= 2 and all(s == PairResult.Status.FAIL for s in statuses))


def network_test_execute(*, test_id):
    """Claim the test and run its rounds; every pair of a round at once."""
    if not NetworkTest.objects.filter(id=test_id, status=NetworkTest.Status.PENDING).update(
            status=NetworkTest.Status.RUNNING):
        return None
    test = NetworkTest.objects.get(id=test_id)
    if test.plan == NetworkTest.Plan.ALLREDUCE:
        return collective.network_test_allreduce(test=test)
    nodes = list(test.nodes.order_by("name"))
    rounds = plans.matrix(len(nodes)) if test.plan == NetworkTest.Plan.MATRIX else plans.ring(len(nodes))
    stored = []
    for number, round_ in enumerate(rounds):
        done = []

        def one(a, b, number=number, done=done):
            try:
                done.append(pair_run(test=test, round_number=number, node_a=nodes[a], node_b=nodes[b]))
            except Exception as exc:  # our failure: the pair is kept and says so, it does not vanish
                log.exception("pair %s-%s of network test %s", nodes[a].name, nodes[b].name, test.id)
                done.append(PairResult.objects.create(
                    test=test, round=number, node_a=nodes[a], node_b=nodes[b], status=PairResult.Status.FAIL,
                    failure="dashboard error", reason="%s: %s" % (type(exc).__name__, exc)))
            finally:
                connection.close()

        threads = [threading.Thread(target=one, args=pair) for pair in round_]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored.extend(done)
    suspects = suspects_of(stored)
    failed = [p for p in stored if p.status == PairResult.Status.FAIL]
    summary = "%d pair(s) in %d round(s): %d passed, %d failed%s" % (
        len(stored), len(rounds), len(stored) - len(failed), len(failed),
        "; fails with every partner: %s" % ", ".join(suspects) if suspects else "")
    NetworkTest.objects.filter(id=test.id).update(status=NetworkTest.Status.DONE, finished=timezone.now(),
                                                  summary=summary, suspects=suspects)
    return summary


def network_test_fail(*, test_id, reason):
    NetworkTest.objects.filter(id=test_id, status__in=(NetworkTest.Status.PENDING, NetworkTest.Status.RUNNING)).update(
        status=NetworkTest.Status.DASHBOARD_ERROR, finished=timezone.now(), summary=reason[:2000])
