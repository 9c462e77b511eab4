"""Running a network test: for each round, every pair at once, the agent's pair mode started at both ends of a pair
at the same time (gloo over TCP; NCCL too where the nodes have GPUs), each failure named."""

import logging
import time

from django.db import connection, transaction
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.common import dispatch
from cudaweb.network import agent, collective, plans
from cudaweb.network.models import NetworkTest, PairResult

log = logging.getLogger(__name__)
AGENT_BUDGET_S = 120
EVIDENCE_CAP = 4000
LOOPBACK = "remote=[127.0.0.1]"
TASK = "cudaweb.network.tasks.run_network_test"
FAILURES = agent.FAILURES  # the names a PairResult's failure takes (its field's help text points here)



def network_test_request(*, nodes, requested_by=None, plan=None):
    """A network test of `nodes` (two or more), queued once the transaction commits. Raises
    BrokerUnavailable, keeping nothing, when the task queue does not answer."""
    nodes = list(nodes)
    if len(nodes) < 2:
        raise ValueError("a network test needs two nodes or more")
    test = NetworkTest.objects.create(plan=plan or plans.plan_for(len(nodes)), requested_by=requested_by)
    test.nodes.set(nodes)
    names = [node.name for node in nodes[:50]]
    transaction.on_commit(lambda: _enqueue_or_forget(test, requested_by, names))
    return test


def _enqueue_or_forget(test, requested_by, names):
    """Queue the test's task, then record the request; with the task queue down, raise BrokerUnavailable and keep
    no test (and no audit row naming it)."""
    try:
        dispatch.publish(TASK, args=[str(test.id)])
    except dispatch.BrokerUnavailable:
        NetworkTest.objects.filter(id=test.id, status=NetworkTest.Status.PENDING).delete()
        raise
    audit.record("network_test.requested", actor=requested_by, obj=test, plan=test.plan, nodes=names)


def pair_run(*, test, round_number, node_a, node_b):
    """Both ends of one pair at once; the stored PairResult."""
    master, started = agent.master_of(node_a, round_number), time.monotonic()
    results = agent.ends_run({role: (node, agent.peer_args(master, "--peer-role", role),
                                     "network test pair (%s)" % role)
                              for node, role in ((node_a, "rank0"), (node_b, "rank1"))}, budget_s=AGENT_BUDGET_S)
    fields = pair_outcome(node_a, node_b, results)
    return PairResult.objects.create(test=test, round=round_number, node_a=node_a, node_b=node_b,
                                     duration_s=round(time.monotonic() - started, 2), **fields)


def pair_outcome(node_a, node_b, results):
    """What one pair showed, from both ends' results {"rank0" | "rank1": (report or None, error text)}: its
    status, the failure named, the figures and the evidence (the PairResult's fields)."""
    checks = {role: agent.peer_check(results[role][0]) for role in ("rank0", "rank1")}
    signatures = [s for role in ("rank1", "rank0") for s in ((checks[role] or {}).get("signatures") or [])]
    failure, reason = "", ""
    ends = ((node_a.name, "rank0"), (node_b.name, "rank1"))
    if any(results[role][1] for _, role in ends):
        failure = "peer never came"
        reason = "; ".join("%s: %s" % (name, results[role][1]) for name, role in ends if results[role][1])
    elif not all(c and c["status"] == "pass" for c in checks.values()):
        failure = next((name for signature, name in agent.FAILURES if signature in signatures), "pair test failed")
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

        agent.at_once(one, round_)
        stored.extend(done)
    suspects = suspects_of(stored)
    failed = [p for p in stored if p.status == PairResult.Status.FAIL]
    summary = "%d pair%s in %d round%s: %d passed, %d failed%s" % (
        len(stored), "" if len(stored) == 1 else "s", len(rounds), "" if len(rounds) == 1 else "s",
        len(stored) - len(failed), len(failed),
        "; fails with every partner: %s" % ", ".join(suspects) if suspects else "")
    NetworkTest.objects.filter(id=test.id).update(status=NetworkTest.Status.DONE, finished=timezone.now(),
                                                  summary=summary, suspects=suspects)
    return summary


def network_test_fail(*, test_id, reason):
    NetworkTest.objects.filter(id=test_id, status__in=(NetworkTest.Status.PENDING, NetworkTest.Status.RUNNING)).update(
        status=NetworkTest.Status.DASHBOARD_ERROR, finished=timezone.now(), summary=reason[:2000])
