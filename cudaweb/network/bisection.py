"""The allreduce plan's bisection as pure logic: which units to run next, and which units of a round are slow.
No database, no network: `bisect` takes a function that runs one round's units and returns their results (anything
with members, status, busbw_gbs, latency_us and expected_gbs), so a property test drives it over a modelled fabric
for every N (tests/test_network_bisection.py) and cudaweb.network.collective drives it over the real agents.

A unit is slow when it failed; when it is under what its slowest link allows (under half of expected_gbs, or over
STEP_LIMIT_US per ring step: the same bar as round 0, so a round of one unit is judged too) or under half the median
busbw of the good units of earlier rounds (over four times their per-step latency, where that is above the limit);
or when it is the one unit of its round furthest under half the round's best busbw (units of a round run at once,
under the same load). A node is named only when a unit that holds it with nodes shown good is
slow and, for a node found by elimination, a second such unit with another good node is slow too: a lone
untested node is confirmed, never named because the others were fine. A pair whose ends are each fine with good
nodes is a slow link. Where the plan cannot tell (two nodes only, two slow halves, units alike), it names no one and
says why.
"""

import math
import statistics

SLOW_SHARE = 0.5
LATENCY_FACTOR = 4.0
# A ring step over 5 ms is slow for any cluster network (a data-centre round trip is tens of microseconds; gloo's
# own per-step cost on a loaded host, a few ms: 3.9 ms for a healthy pair of the simulated cluster on 2 shared cores,
# docs/benchmarks.md). Latency is never judged under it: per ring step, a small unit carries gloo's fixed cost over
# fewer steps, so a healthy pair can look several times slower than a healthy half.
STEP_LIMIT_US = 5000.0
FAIL, PASS, SLOW = "fail", "pass", "slow"


def per_step_us(result):
    """Latency per ring step: an all-reduce of n ranks takes 2(n-1) steps, so groups of any size compare."""
    return result.latency_us / (2 * (len(result.members) - 1))


def _step_bar(references):
    """The per-step latency over which a unit is slow: STEP_LIMIT_US, or four times the good units' median where
    that is higher (a cluster whose healthy steps are slow is not slow against itself)."""
    steps = [per_step_us(r) for r in references if r.latency_us]
    return max(STEP_LIMIT_US, LATENCY_FACTOR * statistics.median(steps)) if steps else STEP_LIMIT_US


def below_expectation(result, references=()):
    """Failed; under half of what its slowest link allows, or of the good units' median busbw; or over the per-step
    latency bar (_step_bar). Round 0 is judged by this alone (no references)."""
    if result.status == FAIL:
        return True
    if result.busbw_gbs is not None:
        if result.expected_gbs and result.busbw_gbs < SLOW_SHARE * result.expected_gbs:
            return True
        good = [r.busbw_gbs for r in references if r.busbw_gbs]
        if good and result.busbw_gbs < SLOW_SHARE * statistics.median(good):
            return True
    return bool(result.latency_us and per_step_us(result) > _step_bar(references))


def slowest_of_round(results):
    """The one unit of a round whose busbw is furthest under half the round's best, if any is (units of a round run
    at once, under the same load; one slow node is in one unit)."""
    best = max((r.busbw_gbs for r in results if r.busbw_gbs), default=None)
    scored = sorted(((best / r.busbw_gbs / (1 / SLOW_SHARE), i) for i, r in enumerate(results)
                     if best and r.busbw_gbs), reverse=True)
    return [results[scored[0][1]]] if scored and scored[0][0] > 1.0 else []


def slow_units(results, references=()):
    """The slow units of one round: the failed ones if any failed, else those below their expectation (against
    `references`, the good units of earlier rounds, too) and the one furthest under the round's best busbw."""
    failed = [r for r in results if r.status == FAIL]
    if failed:
        return failed
    relative = slowest_of_round(results)
    return [r for r in results if below_expectation(r, references) or r in relative]


class Plan:
    """One bisection: `run(number, [(members, role)])` runs the units of round `number` at once and returns their
    results in order. Rounds are counted from 1 (round 0, over every node, ran before)."""

    def __init__(self, run, mark=None):
        self.run = run
        self.mark = mark  # called with each result judged slow (the stored row says so)
        self.number = 1
        self.good = []  # nodes in a unit judged fine, in the order found
        self.references = []  # results judged fine
        self.slow = []  # results judged slow

    def round(self, units, again_if_alike=False):
        """Run one round; (results, slow results). A round where nothing is slow although the group above it was
        slow runs once more (a lossy link slows an all-reduce only when a loss hits it)."""
        for attempt in range(2 if again_if_alike else 1):
            results = self.run(self.number, [(m, role + (" (again)" if attempt else "")) for m, role in units])
            self.number += 1
            slow = slow_units(results, self.references)
            if slow:
                break
        for result in results:
            if result in slow:
                self.slow.append(result)
                if self.mark:
                    self.mark(result)
            else:
                self.references.append(result)
                self.good += [name for name in result.members if name not in self.good]
        return results, slow

    def partners(self, exclude, count):
        return [name for name in self.good if name not in exclude][:count]


def _halving(plan, group):
    """Halve `group` (its all-reduce was slow) until two nodes or one are left; (group, verdict)."""
    while len(group) > 2:
        half = (len(group) + 1) // 2
        parts = [group[:half], group[half:]]
        units, tested = [], []
        for part in parts:
            partner = plan.partners(group, 1)
            if len(part) >= 2:
                units.append((part, "half"))
                tested.append(part)
            elif partner:
                units.append((part + partner, "with a good node"))
                tested.append(part)
        # a round where all looks fine below a slow group runs again, unless a part went untested (that explains it)
        results, slow = plan.round(units, again_if_alike=len(tested) == len(parts))
        slow_parts = [part for part, result in zip(tested, results) if result in slow]
        untested = [part for part in parts if part not in tested]
        if len(slow_parts) == 1:
            group = slow_parts[0]
        elif len(slow_parts) == 2:
            return [], "both halves are slow (%s): more than one node, or something they share; no single node " \
                       "or link stands out" % "; ".join(",".join(r.members) for r in slow)
        elif untested:
            group = untested[0]  # one node the round could not test: confirmed below, never named by elimination
        else:
            return [], "no single node or link stands out: the halves are alike (%s)" % "; ".join(
                ",".join(r.members) for r in results)
    return group, ""


def _confirm_one(plan, node, implicated=None):
    """`node` is the one suspect left: slow with two different good nodes, it is slow itself; slow with one and
    fine with another, the link between it and the first is."""
    partners = plan.partners([node, implicated], 2)
    if implicated is None:
        if not partners:
            return [], "%s could not be tested: no node is known to be good" % node
        (first_results, first_slow) = plan.round([([node, partners[0]], "with a good node")], again_if_alike=True)
        if not first_slow:
            return [], "no single node or link stands out: %s is fine with %s" % (node, partners[0])
        implicated, partners = partners[0], partners[1:]
    if not partners:
        return [], "%s is slow with %s and no other node is known to be good to tell which" % (node, implicated)
    _, slow = plan.round([([node, partners[0]], "with a good node")], again_if_alike=True)
    if slow:
        return [node], ""
    return ["%s-%s" % (node, implicated)], ""


def _resolve_pair(plan, pair, everyone):
    """Two nodes whose all-reduce was slow: each with a node known to be good (at once where two are known); slow
    with its partner, that end is slow; fine both, their link is."""
    first, second = pair
    partners = plan.partners(pair, 2)
    if len(partners) == 2:
        results, slow = plan.round([([first, partners[0]], "with a good node"),
                                    ([second, partners[1]], "with a good node")], again_if_alike=True)
        ends = [end for end, result in zip(pair, results) if result in slow]
    else:
        # no two good nodes: each end with the same third node, one after the other. That node is unproven, so only
        # a contrast names an end (slow with it against fine with it); slow both ways names no one.
        third = (partners or [name for name in everyone if name not in pair])[:1]
        if not third:
            return [], "the pair %s-%s is slow; with no third node, which end (or their link) cannot be told" % (
                first, second)
        ends = []
        for end in pair:
            _, slow = plan.round([([end] + third, "with a third node")])  # one end fine is expected
            if slow:
                ends.append(end)
        if len(ends) == 2 and not partners:
            return [], "%s and %s are each slow with %s too: more than one node, or something they share" % (
                first, second, third[0])
    if not ends:
        return ["%s-%s" % (first, second)], ""  # each end is fine with others: their link
    return ends, ""


def bisect(names, run, mark=None):
    """Bisect `names` (round 0 over all of them was slow): (suspects, verdict, rounds run after round 0, slow
    results). Suspects are node names, or 'a-b' for a link; `mark` is called with each result judged slow."""
    plan = Plan(run, mark)
    group, verdict = _halving(plan, list(names))
    suspects = []
    if len(group) == 2:
        suspects, verdict = _resolve_pair(plan, group, names)
    elif len(group) == 1:
        implicated = None
        last = plan.slow[-1] if plan.slow else None
        if last is not None and group[0] in last.members and len(last.members) == 2:
            implicated = next(name for name in last.members if name != group[0])
        suspects, verdict = _confirm_one(plan, group[0], implicated)
    if suspects:
        links = [s for s in suspects if s not in names]
        verdict = "slow %s: %s" % ("link" if links else "node" if len(suspects) == 1 else "nodes", ", ".join(suspects))
    return suspects, verdict, plan.number - 1, plan.slow


def rounds_at_most(count):
    """The rounds a bisection of `count` nodes may take after round 0 with one slow node: the halvings, one or two
    to confirm, each possibly run twice when alike."""
    return 2 * (max(1, math.ceil(math.log2(count))) + 2)
