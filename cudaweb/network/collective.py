"""The allreduce plan: one all-reduce over all N selected nodes at once (the agent's `--world N --rank k`; gloo
everywhere, NCCL too where the nodes have GPUs), judged against what the slowest link should allow; when it is slow
or fails, bisection names the slow node or link in O(log N) rounds: halves (both at once), the slower half halved
again, and the last two nodes each paired with a node already known to be good. A round whose units are alike
although the group above them was slow runs once more (a lossy link is intermittent).

A unit is slow when it fails, when its busbw is under half the best one of its round, or when its latency per ring
step is over four times the best one's: units of a round run at once, under the same load. When they are alike,
the median of the good units of earlier rounds tells whether all are slow. Steps under 2 ms are not compared
(gloo's own cost on a loaded host varies that much; a lost packet costs a retransmission, tens to hundreds of ms).
Round 0 is slow under half of what the slowest link allows, or over STEP_LIMIT_US per ring step.
"""

import logging
import statistics
import threading
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone

from cudaweb.network.models import CollectiveResult, NetworkTest
from cudaweb.nodes.models import FabricExpectation
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
from cudaweb.validation import dbretry
from cudaweb.validation.reports import ReportError, parse_report

log = logging.getLogger(__name__)
AGENT_BUDGET_S = 180
EVIDENCE_CAP = 4000
SLOW_SHARE = 0.5
LATENCY_FACTOR = 4.0
LATENCY_FLOOR_US = 2000.0  # per ring step
# Round 0 has nothing to compare with but the links: a ring step over 5 ms is slow for any cluster network (a
# data-centre round trip is tens of microseconds; gloo's own per-step cost, even on a loaded host, about 1 ms).
STEP_LIMIT_US = 5000.0


def _agent(node, rank, world, master, results):
    """Run rank `rank` of the collective on `node`; results[node.name] = (report or None, error text)."""
    args = ["--mode", "quick", "--json", "--exit-with-stdin", "--only", "comm.peer", "--world", str(world),
            "--rank", str(rank), "--master", "%s:%d" % master, "--peer-timeout", str(settings.CUDAWEB_PAIR_TIMEOUT_S)]
    env = dict(node.agent_env() or {})
    if node.network_interface:
        env.update(GLOO_SOCKET_IFNAME=node.network_interface, NCCL_SOCKET_IFNAME=node.network_interface)
    try:
        payload, digest = bundle.build()
        # the host-key read and the credential's audit row ride over a database blink, as a run's do
        with dbretry.retrying(transport_for, node, purpose="network test all-reduce (rank %d of %d)" % (rank, world),
                              what="connection to %s" % node.name) as transport:
            path = transport.upload_agent(payload, digest)
            result = transport.run_agent(node.python_path, path, args, AGENT_BUDGET_S, env=env or None)
        results[node.name] = (parse_report(result.stdout), "")
    except (TransportError, ReportError, ValueError) as exc:
        results[node.name] = (None, "%s: %s" % (type(exc).__name__, exc))
    finally:
        connection.close()


def _peer_check(report):
    return next((c for c in (report or {}).get("checks", []) if c["id"] == "comm.peer"), None)


def expected_gbs(nodes, checks, backend):
    """What the slowest link allows an all-reduce's busbw (GB/s): NCCL, the lowest IB rate the nodes should
    reach (FabricExpectation); gloo, the slowest interface the agents read (peer_link_speed_mbps). None: unknown."""
    if backend == "nccl":
        rates = [FabricExpectation.ib_rate_for(node) for node in nodes]
        if all(rates):
            return min(rates) / 8.0
    speeds = [(c.get("metrics") or {}).get("peer_link_speed_mbps") for c in checks]
    if checks and all(speeds):
        return min(speeds) / 8000.0
    return None


def collective_outcome(nodes, results):
    """The fields of a CollectiveResult from every rank's result {name: (report or None, error text)}."""
    from cudaweb.network.services import FAILURES

    checks = [_peer_check(results[node.name][0]) for node in nodes]
    errors = ["%s: %s" % (node.name, results[node.name][1]) for node in nodes if results[node.name][1]]
    failure, reason = "", ""
    if errors:
        failure, reason = "node never came", "; ".join(errors)
    elif not all(c and c["status"] == "pass" for c in checks):
        signatures = [s for c in checks for s in ((c or {}).get("signatures") or [])]
        failure = next((name for signature, name in FAILURES if signature in signatures), "all-reduce failed")
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
    head = nodes[0]
    span = max(2, head.pair_port_max - head.pair_port_min)
    port = head.pair_port_min + (2 * slot) % span  # gloo on port, NCCL on port + 1
    master = ("127.0.0.1" if head.is_local else head.address, port)
    results, started = {}, time.monotonic()
    threads = [threading.Thread(target=_agent, args=(node, rank, len(nodes), master, results))
               for rank, node in enumerate(nodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fields = collective_outcome(nodes, results)
    return CollectiveResult.objects.create(test=test, round=round_number, members=[n.name for n in nodes], role=role,
                                           duration_s=round(time.monotonic() - started, 2), **fields)


def _per_step_us(result):
    """Latency per ring step: an all-reduce of n ranks takes 2(n-1) steps, so groups of any size compare."""
    return result.latency_us / (2 * (len(result.members) - 1))


def _slower(result, busbw, step_us):
    """Failed, or slow against a busbw and a per-step latency (either may be None)."""
    if result.status == CollectiveResult.Status.FAIL:
        return True
    if busbw and result.busbw_gbs is not None and result.busbw_gbs < SLOW_SHARE * busbw:
        return True
    return bool(step_us and result.latency_us and _per_step_us(result) > LATENCY_FLOOR_US
                and _per_step_us(result) > LATENCY_FACTOR * step_us)


def _slowness(result, busbw, step_us):
    """How far past its threshold a unit is: busbw under half the best is 1.0 at half, latency 1.0 at four times."""
    score = 0.0
    if busbw and result.busbw_gbs:
        score = (busbw / result.busbw_gbs) / (1 / SLOW_SHARE)
    if step_us and result.latency_us and _per_step_us(result) > LATENCY_FLOOR_US:
        score = max(score, _per_step_us(result) / step_us / LATENCY_FACTOR)
    return score


def slow_units(results):
    """The units of one round that are slow: those that failed, else the one furthest past its threshold against
    the round's best (units that ran at once, under the same load, compare best with each other; one slow node is
    in one unit, and a noisy latency elsewhere must not outvote a busbw ten times lower)."""
    failed = [r for r in results if r.status == CollectiveResult.Status.FAIL]
    if failed:
        return failed
    best_busbw = max((r.busbw_gbs for r in results if r.busbw_gbs), default=None)
    best_step = min((_per_step_us(r) for r in results if r.latency_us), default=None)
    scored = sorted(((_slowness(r, best_busbw, best_step), i) for i, r in enumerate(results)), reverse=True)
    return [results[scored[0][1]]] if scored and scored[0][0] >= 1.0 else []


def all_slow_against(results, references):
    """Whether every result is slow against the median of the good results of earlier rounds (when a round's units
    are alike: all fine, or all slow)."""
    busbw = [r.busbw_gbs for r in references if r.busbw_gbs]
    steps = [_per_step_us(r) for r in references if r.latency_us]
    if not busbw and not steps:
        return False
    return all(_slower(r, statistics.median(busbw) if busbw else None, statistics.median(steps) if steps else None)
               for r in results)


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

    threads = [threading.Thread(target=one, args=(i, nodes, role)) for i, (nodes, role) in enumerate(units)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done


def _judged_round(test, number, units, references):
    """Run a round and find its slow units; a round whose units are alike although the group above them was slow
    runs once more (a lossy link slows an all-reduce only when a loss hits it: intermittent). Returns (results,
    slow, the next round's number)."""
    for attempt in range(2):
        results = _round(test, number, [(nodes, role + (" (again)" if attempt else "")) for nodes, role in units])
        number += 1
        slow = slow_units(results)
        if not slow and all_slow_against(results, references):
            slow = list(results)
        if slow:
            break
    for result in slow:
        _mark_slow(result)
    return results, slow, number


def _figures(result):
    share = result.share_of_expected
    return "%s busbw %s GB/s%s, 4 KiB in %s" % (
        result.backend, "%.3g" % result.busbw_gbs if result.busbw_gbs is not None else "-",
        " (%.0f %% of the %.3g GB/s the slowest link allows)" % (100 * share, result.expected_gbs)
        if share is not None else "", "%.0f us" % result.latency_us if result.latency_us else "-")


def allreduce_execute(*, test, nodes):
    """Round 0 over all nodes; bisection when it is slow or fails. Returns (summary, suspects, rounds)."""
    (full,) = _round(test, 0, [(nodes, "all %d nodes" % len(nodes))])
    expected_slow = full.status == CollectiveResult.Status.PASS and (
        (full.expected_gbs and full.busbw_gbs is not None and full.busbw_gbs < SLOW_SHARE * full.expected_gbs)
        or (full.latency_us and _per_step_us(full) > STEP_LIMIT_US))
    head = "all-reduce over %d nodes: %s" % (len(nodes), full.failure or _figures(full))
    if full.status == CollectiveResult.Status.PASS and not expected_slow:
        return head + "; as fast as the slowest link allows", [], 1
    _mark_slow(full)
    by_name = {node.name: node for node in nodes}
    group, good, good_results, number, verdict = list(nodes), [], [], 1, ""
    while len(group) > 2:
        half = (len(group) + 1) // 2
        halves = [group[:half], group[half:]]
        units = []
        for part in halves:
            if len(part) >= 2:
                units.append((part, "half"))
            elif good:
                units.append((part + [good[0]], "with a good node"))
        results, slow, number = _judged_round(test, number, units, good_results)
        fine = [r for r in results if r not in slow]
        good_results += fine
        good += [by_name[name] for r in fine for name in r.members if by_name[name] not in good]
        untested = [part for part in halves if part and not any(set(n.name for n in part) <= set(r.members)
                                                                for r in results)]
        if len(slow) == 1:
            group = [by_name[name] for name in slow[0].members if by_name[name] in group]
        elif not slow and untested:
            group = untested[0]  # the others are fine: the one node that could not be tested alone
        elif not slow:
            below = all(r.expected_gbs and r.busbw_gbs is not None and r.busbw_gbs < SLOW_SHARE * r.expected_gbs
                        for r in results)
            verdict = "no single node or link stands out: the halves are alike (%s)%s" % ("; ".join(
                _figures(r) for r in results), "; each is under half of what its slowest link allows: more than "
                "one node, or something they share (a switch, the hosts' CPUs)" if below else "")
            group = []
        else:
            verdict = "both halves are slow: more than one node, or something they share (%s)" % "; ".join(
                "%s: %s" % (",".join(r.members), r.failure or _figures(r)) for r in slow)
            group = []
    suspects = []
    if len(group) == 1:
        suspects = [group[0].name]
    elif len(group) == 2:
        partners = [n for n in good if n not in group][:2]
        if len(partners) < 2:
            verdict = "the pair %s is slow; too few nodes known to be good to tell which end" % "-".join(
                n.name for n in group)
            suspects = [n.name for n in group]
        else:
            results, slow, number = _judged_round(test, number, [([group[0], partners[0]], "with a good node"),
                                                                 ([group[1], partners[1]], "with a good node")],
                                                  good_results)
            suspects = [group[i].name for i, result in enumerate(results) if result in slow]
            if not suspects:
                suspects = ["%s-%s" % (group[0].name, group[1].name)]  # each end is fine with others: their link
    if suspects:
        verdict = "slow %s: %s" % ("link" if "-" in suspects[0] and len(suspects) == 1 and suspects[0] not in by_name
                                   else "node" if len(suspects) == 1 else "nodes", ", ".join(suspects))
    return "%s; bisected in %d more round(s): %s" % (head, number - 1, verdict), suspects, number


def network_test_allreduce(*, test):
    """The allreduce plan's run, stored on the test (the caller claimed it)."""
    nodes = list(test.nodes.order_by("name"))
    started = time.monotonic()
    summary, suspects, rounds = allreduce_execute(test=test, nodes=nodes)
    summary += " (%d round(s), %.0f s)" % (rounds, time.monotonic() - started)
    NetworkTest.objects.filter(id=test.id).update(status=NetworkTest.Status.DONE, finished=timezone.now(),
                                                  summary=summary[:2000], suspects=suspects)
    return summary
