"""The loop's state machine (cudaweb/health/machine.py), driven with hypothesis over sequences of stimuli with worker
and database blinks, through a model of the services' protocol: a decision applies only on the version it was
made from (the conditional UPDATE), a rung is keyed by the version that started it, a blink rolls a decision back
and the stimulus comes again, a worker lost mid-rung ends it aborted (the sweep: our failure, not the node's) and
never starts it again, an operator's word waits for a running rung, the policy changes mid-rung (off, record: only
a rung's end still moves the node), and a rung that failed is never taken again for the same fault."""

from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cudaweb.health import machine as m

SIGNATURES = ("xid_critical", "nvlink_errors_growing", "fabric_in_progress", "row_remap_failure")
LADDERS = st.lists(st.sampled_from(m.RUNGS), max_size=4).map(tuple)


class Store:
    """The services' protocol in memory: a version, the transition log, the rungs by key."""

    def __init__(self, loop):
        self.loop, self.version = loop, 0
        self.log = []          # (version, from, to)
        self.kinds = []        # the stimulus of each transition
        self.started = {}      # key -> rung
        self.executed = []     # keys whose rung ran (at most once each)
        self.live = None       # key of the rung in flight
        self.ending = None     # the rung whose end is being told to the machine
        self.mode = "act"      # the node's policy now: act | record | off (services.apply)
        self.failed = set()    # ladder indexes whose rung failed for the node's present fault
        self.rung_of = {}      # key -> the ladder index it was taken at, or None when an operator asked for it
        self.escalated_by_us = []  # transitions an outcome of ours (aborted) made other than back to quarantined
        self.retaken = []      # (ladder index, rung) the loop took again after it failed for the same fault
        self.held_rungs = []   # (key, whether the node was held by an operator when the rung was started)

    def apply(self, stimulus, *, blink=False, read_version=None):
        """One decision. `blink`: the transaction dies before its commit (nothing kept). `read_version`: the
        version the deciding worker read (an older one: another decision got there first)."""
        seen = self.version if read_version is None else read_version
        operator = stimulus.kind in (m.REMEDIATE, m.MARK_HEALTHY, m.SEND_RMA, m.HOLD, m.RELEASE)
        if self.mode != "act" and not operator and stimulus.kind != m.OUTCOME:
            return None  # off: nothing moves; record: only the shadow state would (not modelled)
        decision = m.step(self.loop, stimulus)
        if decision.to is None or blink:
            return None
        if seen != self.version:  # the conditional UPDATE matches no row
            return None
        # an outcome moves the node only for the rung that just ended (never a stale or repeated one)
        assert stimulus.kind != m.OUTCOME or stimulus.action == self.ending, "moved by an outcome of no live rung"
        self.version += 1
        self.log.append((self.version, self.loop.state, decision.loop.state))
        self.kinds.append(stimulus.kind)
        if self.loop.state in m.IN_RUNG and decision.loop.state not in m.IN_RUNG and self.live is not None:
            # left the ladder other than by the rung's end: a rung no worker took is cancelled, never started
            assert self.started[self.live][1] == "pending", "an operator moved a node whose rung was running"
            self.started[self.live][1] = "cancelled"
            self.live = None
        if stimulus.kind == m.OUTCOME and stimulus.outcome == m.ABORTED and decision.loop.state != m.QUARANTINED:
            self.escalated_by_us.append((self.loop.state, decision.loop.state))
        if decision.loop.state in (m.READY, m.RMA):
            self.failed = set()  # a new fault starts the ladder again
        before, self.loop = self.loop, decision.loop
        if decision.action:
            key = self.version
            assert key not in self.started
            assert self.live is None or self.started[self.live][1] == "ended", "two rungs in flight"
            self.started[key] = [decision.action, "pending"]
            self.rung_of[key] = None if stimulus.kind == m.REMEDIATE else decision.loop.rung
            self.held_rungs.append((key, before.root_cause == m.OPERATOR_HOLD and before.state == m.QUARANTINED
                                    and stimulus.kind in (m.ADVANCE, m.LOOK, m.FINDING)))
            if self.rung_of[key] is not None and self.rung_of[key] in self.failed:
                self.retaken.append((self.rung_of[key], decision.action))
            self.live = key
        return decision

    def claim(self):
        """A worker claims the live rung: PENDING -> RUNNING, once."""
        if self.live is None or self.started[self.live][1] != "pending":
            return None
        self.started[self.live][1] = "running"
        self.executed.append(self.live)
        return self.live

    def finish(self, key, outcome):
        """The rung's end, told to the machine; only a RUNNING rung ends (a second finish is ignored)."""
        if self.started.get(key, [None, None])[1] != "running":
            return
        self.started[key][1] = "ended"
        self.live = None
        action = self.ending = self.started[key][0]
        if outcome in (m.FAILED, m.TIMED_OUT) and self.rung_of.get(key) is not None:
            self.failed.add(self.rung_of[key])
        while self.apply(m.Stimulus(m.OUTCOME, action=action, outcome=outcome)) is None and \
                self.loop.action == action:
            pass  # a blink between the rung's end and its transition: the same outcome again (dbretry)
        self.ending = None


STEP = st.one_of(
    st.tuples(st.just("finding"), st.sampled_from(SIGNATURES)),
    st.tuples(st.just("look"), st.booleans()),
    st.tuples(st.just("advance"), st.none()),
    st.tuples(st.just("remediate"), st.sampled_from(m.RUNGS)),
    st.tuples(st.just("run"), st.sampled_from(m.OUTCOMES)),           # a worker takes the rung, it ends so
    st.tuples(st.just("worker_dies"), st.none()),                      # claimed, then lost: the sweep aborts it
    st.tuples(st.just("policy"), st.sampled_from(("act", "record", "off"))),  # an admin changes the label's policy
    st.tuples(st.just("clock"), st.sampled_from(("forward", "back"))),  # a clock step: forward past a deadline, the
                                                                         # sweep aborts the rung running; back: none
    st.tuples(st.just("redeliver"), st.sampled_from(m.OUTCOMES)),      # a stale outcome arrives again
    st.tuples(st.just("healthy"), st.none()),
    st.tuples(st.just("rma"), st.none()),
    st.tuples(st.just("hold"), st.none()),                             # an operator's quarantine at onboarding
    st.tuples(st.just("release"), st.none()),                          # their acceptance
    st.tuples(st.just("race"), st.sampled_from(SIGNATURES)),           # a decision made on an old version
)


def _drive(store, steps, blinks):
    for (kind, arg), blink in zip(steps, blinks):
        if kind == "finding":
            stimulus = m.Stimulus(m.FINDING, signature=arg)
        elif kind == "look":
            stimulus = m.Stimulus(m.LOOK, clean=arg)
        elif kind == "advance":
            stimulus = m.Stimulus(m.ADVANCE)
        elif kind == "remediate":
            stimulus = m.Stimulus(m.REMEDIATE, action=arg)
        elif kind in ("healthy", "rma"):
            if store.live is not None and store.started[store.live][1] == "running":
                continue  # operator_decide refuses while a rung runs: decide once it has ended
            stimulus = m.Stimulus(m.MARK_HEALTHY if kind == "healthy" else m.SEND_RMA)
        elif kind in ("hold", "release"):
            stimulus = m.Stimulus(m.HOLD if kind == "hold" else m.RELEASE)
        elif kind == "policy":
            store.mode = arg
            continue
        elif kind == "clock":
            if arg == "forward" and store.live is not None and store.started[store.live][1] == "running":
                store.finish(store.live, m.ABORTED)
            continue
        elif kind == "race":
            store.apply(m.Stimulus(m.FINDING, signature=arg), read_version=store.version - 1)
            continue
        elif kind in ("run", "worker_dies"):
            key = store.claim()
            if key is not None:
                store.finish(key, m.ABORTED if kind == "worker_dies" else arg)
                store.finish(key, arg or m.FAILED)  # the worker's own late answer after the sweep: ignored
            continue
        else:  # redeliver: an outcome for a rung that is not (or no longer) the one in flight
            store.apply(m.Stimulus(m.OUTCOME, action="reboot" if store.loop.action != "reboot" else "reset",
                                   outcome=arg))
            continue
        if blink:
            store.apply(stimulus, blink=True)  # rolled back...
        store.apply(stimulus)                  # ...and the stimulus comes again


@settings(max_examples=600, deadline=None)
@example(steps=[("finding", "xid_critical"), ("look", False), ("remediate", m.RESET), ("redeliver", m.SUCCEEDED)],
         blinks=[True] * 40, ladder=(m.RESET,), auto=False, breaker=True, limit=2)
@example(steps=[("finding", "xid_critical"), ("look", False), ("remediate", m.RESET), ("healthy", None),
                ("finding", "xid_critical"), ("look", False), ("remediate", m.RESET)],  # CI found it (2026-12-04)
         blinks=[False] * 40, ladder=(m.RESET,), auto=False, breaker=True, limit=3)
@example(steps=[("finding", "xid_critical"), ("race", "xid_critical"), ("look", False), ("advance", None),
                ("worker_dies", None), ("run", m.SUCCEEDED), ("healthy", None)],
         blinks=[True] * 40, ladder=(m.REVALIDATE, m.RESET), auto=True, breaker=True, limit=3)
@example(steps=[("hold", None), ("look", False), ("advance", None), ("finding", "xid_critical")],
         blinks=[False] * 40, ladder=(m.RESET,), auto=True, breaker=True, limit=2)
@given(steps=st.lists(STEP, max_size=40), blinks=st.lists(st.booleans(), min_size=40, max_size=40),
       ladder=LADDERS, auto=st.booleans(), breaker=st.booleans(), limit=st.integers(1, 3))
def test_no_transition_lost_and_no_rung_run_twice(steps, blinks, ladder, auto, breaker, limit):
    start = m.Loop(ladder=ladder, auto=auto, breaker_allows=breaker, repeat_limit=limit)
    store = Store(start)
    _drive(store, steps, blinks)
    # every transition starts where the one before ended, versions one by one: none lost, none applied twice
    state = m.READY
    for i, (version, before, after) in enumerate(store.log, 1):
        assert version == i and before == state and after in m.STATES
        state = after
    assert store.loop.state == state
    # each rung ran at most once, and only one was ever in flight
    assert len(store.executed) == len(set(store.executed))
    # a rung that failed for a fault is never taken again by the loop for that fault: the ladder climbs or ends
    loop_taken = [store.rung_of[key] for key in store.executed if store.rung_of.get(key) is not None]
    assert store.retaken == [], "a failed rung taken again: %s (rungs taken: %s)" % (store.retaken, loop_taken)
    # our own failures never move a node up the ladder or to rma
    assert store.escalated_by_us == []
    # no node is left in a rung with no rung in flight (a policy changed mid-rung included)
    if store.loop.state in m.IN_RUNG:
        assert store.live is not None and store.started[store.live][1] in ("pending", "running"), "stuck"
    # an open breaker never lets the loop drain a node (an operator's word still counts)
    if not breaker:
        assert not any(b == m.SUSPECT and a in m.DRAINED | {m.RMA} for (_, b, a), kind in zip(store.log, store.kinds)
                       if kind not in (m.SEND_RMA, m.MARK_HEALTHY, m.HOLD))
    # the loop never takes a rung on a node an operator holds
    assert not any(store.rung_of.get(key) is not None and hold for key, hold in store.held_rungs), store.log
    # a rung is in flight exactly in remediating / revalidating
    assert bool(store.loop.action) == (store.loop.state in m.IN_RUNG)

    # blinks change nothing but time: the same steps without them end in the same place by the same moves
    calm = Store(start)
    _drive(calm, steps, [False] * len(blinks))
    assert [(b, a) for _, b, a in calm.log] == [(b, a) for _, b, a in store.log]


@settings(max_examples=300, deadline=None)
@given(ladder=LADDERS.filter(bool), outcomes=st.lists(st.sampled_from(m.OUTCOMES), min_size=1, max_size=8),
       blinks=st.lists(st.booleans(), min_size=40, max_size=40))
def test_the_loop_climbs_its_ladder_on_the_nodes_failures_only(ladder, outcomes, blinks):
    """One fault, the loop on its own (auto): each rung it takes ends as drawn, a look between. A rung that failed
    (or timed out on the node) is never taken again for the fault: the ladder climbs or ends in rma; a rung the node
    was busy for, or that our failure aborted, is taken again and moves nothing up."""
    store = Store(m.Loop(ladder=ladder, auto=True, repeat_limit=9))
    steps = [("finding", "xid_critical"), ("look", False)]
    for outcome in outcomes:
        steps += [("look", False), ("run", outcome)]
    _drive(store, steps + [("look", False)], blinks)
    assert store.retaken == [], store.log
    assert store.escalated_by_us == [], store.log
    assert store.loop.state in (m.QUARANTINED, m.REMEDIATING, m.REVALIDATING, m.READY, m.RMA)


@given(st.lists(st.sampled_from(SIGNATURES), min_size=1, max_size=5))
def test_only_an_operator_takes_a_node_out_of_rma(signatures):
    loop = m.Loop(state=m.RMA, root_cause="xid_critical")
    for name in signatures:
        for stimulus in (m.Stimulus(m.FINDING, signature=name), m.Stimulus(m.LOOK, clean=True),
                         m.Stimulus(m.ADVANCE), m.Stimulus(m.OUTCOME, action="reset", outcome=m.SUCCEEDED)):
            assert m.step(replace(loop, auto=True), stimulus).to is None
    assert m.step(loop, m.Stimulus(m.MARK_HEALTHY)).to == m.READY


def test_the_whole_ladder_from_a_fault_to_ready():
    loop = m.Loop(ladder=(m.RESET, m.REBOOT), auto=True)
    d = m.step(loop, m.Stimulus(m.FINDING, signature="xid_critical"))
    assert d.to == m.SUSPECT and d.effects == ()
    d = m.step(d.loop, m.Stimulus(m.LOOK, clean=True))  # an Xid is not seen twice: the next look confirms it
    assert d.to == m.QUARANTINED and d.effects == (m.DRAIN,)
    d = m.step(d.loop, m.Stimulus(m.ADVANCE))
    assert (d.to, d.action) == (m.REMEDIATING, m.RESET)
    d = m.step(d.loop, m.Stimulus(m.OUTCOME, action=m.RESET, outcome=m.SUCCEEDED))
    assert (d.to, d.action) == (m.REVALIDATING, m.REVALIDATE)
    d = m.step(d.loop, m.Stimulus(m.OUTCOME, action=m.REVALIDATE, outcome=m.SUCCEEDED))
    assert d.to == m.READY and d.effects == (m.RESUME,)


def test_a_failed_reset_goes_to_rma_with_the_bundle():
    loop = m.Loop(state=m.REMEDIATING, action=m.RESET, root_cause="xid_critical", ladder=(m.RESET,))
    d = m.step(loop, m.Stimulus(m.OUTCOME, action=m.RESET, outcome=m.FAILED))
    assert d.to == m.RMA and m.BUNDLE in d.effects


def test_the_second_remediation_of_one_cause_within_the_window_is_rma():
    loop = m.Loop(state=m.SUSPECT, root_cause="xid_critical", repeats=1, repeat_limit=2)
    d = m.step(loop, m.Stimulus(m.LOOK))
    assert d.to == m.RMA and d.effects == (m.DRAIN, m.BUNDLE)
    assert m.step(replace(loop, repeats=0), m.Stimulus(m.LOOK)).to == m.QUARANTINED


def test_a_condition_gone_at_the_next_look_clears_a_suspect_an_occurrence_does_not():
    assert m.step(m.Loop(state=m.SUSPECT, root_cause="fabric_in_progress"), m.Stimulus(m.LOOK, clean=True)).to == \
        m.READY
    assert m.step(m.Loop(state=m.SUSPECT, root_cause="nvlink_errors_growing"),
                  m.Stimulus(m.LOOK, clean=True)).to == m.QUARANTINED


def test_the_breaker_holds_a_suspect_and_says_why():
    d = m.step(m.Loop(state=m.SUSPECT, root_cause="xid_critical", breaker_allows=False), m.Stimulus(m.LOOK))
    assert d.to is None and "circuit breaker" in d.waiting
