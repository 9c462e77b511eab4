"""The allreduce plan: one all-reduce over all N selected nodes at once (the agent's `--world N --rank k`; gloo
everywhere, NCCL too where the nodes have GPUs), judged against what the slowest link should allow; when it is slow
or fails, bisection (cudaweb.network.bisection: the plan and the judging, pure logic) names the slow node or link in
about log2(N) rounds. This module runs the rounds over the real agents and stores each unit.

What a link should allow: NCCL, the lowest InfiniBand rate the nodes should reach (FabricExpectation); gloo, the
slowest interface the agents read times GLOO_LINE_SHARE, the share of the line rate a healthy gloo all-reduce
reaches (gloo over TCP never nears the line: judged against the line itself, a healthy cluster was "slow" and
bisected for nothing).
"""

import logging
import time

from django.db import connection
from django.utils import timezone

from cudaweb.network import agent, bisection
from cudaweb.network.bisection import slow_units  # noqa: F401 (the judging, for callers of this module)
from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.nodes.models import FabricExpectation

log = logging.getLogger(__name__)
AGENT_BUDGET_S = 180
EVIDENCE_CAP = 4000
# gloo's 4 MiB all-reduce busbw over the line rate of the slowest interface, on a healthy cluster: 0.14 GB/s over
# 10000 Mb/s (1.25 GB/s) links, 8 hosts of the simulated cluster (docs/benchmarks.md, "The allreduce plan").
# bench/allreduce_bisect.py measures it again (its healthy row); a cluster whose gloo reaches less than half of it
# is judged slow and bisected.
GLOO_LINE_SHARE = 0.112
# A rank whose agent answered without starting the all-reduce (comm.peer skipped: no torch, a broken driver): the
# others wait for it until their peer timeout and then blame the port. Named first, and the test is not bisected.
NEVER_STARTED = "a rank never started"


def expected_gbs(nodes, checks, backend):
    """What the slowest link allows an all-reduce's busbw (GB/s): NCCL, the lowest IB rate the nodes should
    reach (FabricExpectation); gloo, GLOO_LINE_SHARE of the slowest interface the agents read
    (peer_link_speed_mbps), the share a healthy gloo all-reduce was measured to reach. None: unknown."""
    if backend == "nccl":
        rates = [FabricExpectation.ib_rate_for(node) for node in nodes]
        if all(rates):
            return min(rates) / 8.0
    speeds = [(c.get("metrics") or {}).get("peer_link_speed_mbps") for c in checks]
    if checks and all(speeds):
        line = min(speeds) / 8000.0
        return line * GLOO_LINE_SHARE if backend == "gloo" else line
    return None


def collective_outcome(nodes, results):
    """The fields of a CollectiveResult from every rank's result {name: (report or None, error text)}."""
    checks = [agent.peer_check(results[node.name][0]) for node in nodes]
    errors = ["%s: %s" % (node.name, results[node.name][1]) for node in nodes if results[node.name][1]]
    unstarted = ["%s (rank %d) never started: %s" % (node.name, rank, agent.never_started(results[node.name][0]))
                 for rank, node in enumerate(nodes) if agent.never_started(results[node.name][0])]
    failure, reason = "", ""
    if unstarted:  # the cause first; what the other ranks then saw (stopped, or their timeout) after it
        others = ["%s (rank %d): %s" % (node.name, rank, results[node.name][1] or (check or {}).get("summary", ""))
                  for rank, (node, check) in enumerate(zip(nodes, checks))
                  if not agent.never_started(results[node.name][0]) and (results[node.name][1] or not check or
                                                                           check["status"] != "pass")]
        failure, reason = NEVER_STARTED, "; ".join(unstarted + (["then " + "; ".join(others)] if others else []))
    elif errors:
        failure, reason = "node never came", "; ".join(errors)
    elif not all(c and c["status"] == "pass" for c in checks):
        signatures = [s for c in checks for s in ((c or {}).get("signatures") or [])]
        failure = next((name for signature, name in agent.FAILURES if signature in signatures), "all-reduce failed")
        reason = "; ".join("%s (rank %d): %s" % (node.name, rank, (check or {}).get("summary", "no comm.peer"))
                           for rank, (node, check) in enumerate(zip(nodes, checks)) if not check or
                           check["status"] != "pass")
    metrics = [(c or {}).get("metrics") or {} for c in checks]
    backend = "nccl" if metrics and all("peer_nccl_busbw_gbs.256mib" in m for m in metrics) else "gloo"
    busbw_key = "peer_nccl_busbw_gbs.256mib" if backend == "nccl" else "peer_gloo_busbw_gbs.4mib"
    latency_key = "peer_%s_latency_us" % backend
    busbw = [m[busbw_key] for m in metrics if busbw_key in m]
    latency = [m[latency_key] for m in metrics if latency_key in m]
    evidence = "\n".join("== %s (rank %d)\n%s" % (node.name, rank, (check or {}).get("evidence", ""))
                         for rank, (node, check) in enumerate(zip(nodes, checks)))
    return {"status": CollectiveResult.Status.FAIL if failure else CollectiveResult.Status.PASS, "failure": failure,
            "reason": reason[:4000], "backend": backend,
            "busbw_gbs": min(busbw) if busbw and not failure else None,
            "latency_us": max(latency) if latency and not failure else None,
            "expected_gbs": expected_gbs(nodes, [c for c in checks if c], backend),
            "evidence": evidence[:EVIDENCE_CAP]}


def collective_run(*, test, round_number, nodes, slot, role):
    """One all-reduce over `nodes` (rank 0 first, its node listens), every rank started at once; the stored row."""
    master, started, world = agent.master_of(nodes[0], slot), time.monotonic(), len(nodes)
    results = agent.ends_run({node.name: (node, agent.peer_args(master, "--world", str(world), "--rank", str(rank)),
                                          "network test all-reduce (rank %d of %d)" % (rank, world))
                              for rank, node in enumerate(nodes)}, budget_s=AGENT_BUDGET_S, stop_when=_unstarted)
    fields = collective_outcome(nodes, results)
    return CollectiveResult.objects.create(test=test, round=round_number, members=[n.name for n in nodes], role=role,
                                           duration_s=round(time.monotonic() - started, 2), **fields)


def _unstarted(node, result):
    """The reason to stop the other ranks at once: this one answered without starting (they would wait for it)."""
    return "%s never started" % node.name if agent.never_started(result[0]) else None


def _mark_slow(result):
    if result.status == CollectiveResult.Status.PASS:
        CollectiveResult.objects.filter(id=result.id).update(status=CollectiveResult.Status.SLOW)
        result.status = CollectiveResult.Status.SLOW


def _round(test, number, units):
    """Run the units [(nodes, role)] of one round at once (they share no node)."""
    done = [None] * len(units)

    def one(index, nodes, role):
        try:
            done[index] = collective_run(test=test, round_number=number, nodes=nodes, slot=number * 4 + index,
                                         role=role)
        except Exception as exc:  # our failure: the unit is kept and says so
            log.exception("all-reduce of network test %s", test.id)
            done[index] = CollectiveResult.objects.create(
                test=test, round=number, members=[n.name for n in nodes], role=role,
                status=CollectiveResult.Status.FAIL, failure="dashboard error", reason="%s: %s" % (
                    type(exc).__name__, exc))
        finally:
            connection.close()

    agent.at_once(one, [(i, nodes, role) for i, (nodes, role) in enumerate(units)])
    return done


def _figures(result):
    share = result.share_of_expected
    basis = ("gloo should reach over the slowest link (%.1f %% of its line rate, calibrated on a healthy gloo "
             "cluster)" % (100 * GLOO_LINE_SHARE) if result.backend == "gloo" else "the slowest link allows")
    return "%s busbw %s GB/s%s, 4 KiB in %s" % (
        result.backend, "%.3g" % result.busbw_gbs if result.busbw_gbs is not None else "-",
        " (%.0f %% of the %.3g GB/s %s)" % (100 * share, result.expected_gbs, basis)
        if share is not None else "", "%.0f us" % result.latency_us if result.latency_us else "-")


def allreduce_execute(*, test, nodes):
    """Round 0 over all nodes; bisection when it is slow or fails. Returns (summary, suspects, rounds)."""
    (full,) = _round(test, 0, [(nodes, "all %d nodes" % len(nodes))])
    if full.failure == NEVER_STARTED:  # nothing was measured: bisecting would blame ports and pairs for it
        return "all-reduce over %d nodes failed: %s; not bisected (a rank that cannot start says nothing of the " \
               "network)" % (len(nodes), full.reason), [], 1
    head = "all-reduce over %d nodes%s: %s" % (len(nodes), " failed" if full.status == CollectiveResult.Status.FAIL
                                               else "", full.failure or _figures(full))
    if not bisection.below_expectation(full):
        return head + "; as fast as %s" % ("gloo should be over the slowest link" if full.backend == "gloo" else
                                           "the slowest link allows"), [], 1
    _mark_slow(full)
    by_name = {node.name: node for node in nodes}

    def run(number, units):
        return _round(test, number, [([by_name[name] for name in members], role) for members, role in units])

    suspects, verdict, rounds, _ = bisection.bisect([node.name for node in nodes], run, mark=_mark_slow)
    return "%s; bisected in %d more round%s: %s" % (head, rounds, "" if rounds == 1 else "s", verdict), suspects, \
        rounds + 1


def network_test_allreduce(*, test):
    """The allreduce plan's run, stored on the test (the caller claimed it)."""
    nodes = list(test.nodes.order_by("name"))
    started = time.monotonic()
    summary, suspects, rounds = allreduce_execute(test=test, nodes=nodes)
    summary += " (%d round%s, %.0f s)" % (rounds, "" if rounds == 1 else "s", time.monotonic() - started)
    failed = test.collectives.filter(round=0, status=CollectiveResult.Status.FAIL).exists()
    NetworkTest.objects.filter(id=test.id).update(
        status=NetworkTest.Status.FAILED if failed else NetworkTest.Status.DONE, finished=timezone.now(),
        summary=summary[:2000], suspects=suspects)
    return summary
