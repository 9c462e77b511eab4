"""The node state machine of the loop, as one pure function: (where the node is, what happened) -> what to do.

    ready -> suspect -> quarantined -> remediating -> revalidating -> ready | rma

No database, no clock, no I/O: the services read a `Loop` from the rows, call `step`, and apply the `Decision` with
one conditional UPDATE (docs/adr/0025-the-loop-state-machine-and-breaker.md). tests/health/test_machine.py drives it
with hypothesis over sequences of stimuli, worker and database blinks."""

from dataclasses import dataclass, replace

from cudaweb.health.signatures import CONDITIONS

READY, SUSPECT, QUARANTINED, REMEDIATING, REVALIDATING, RMA = (
    "ready", "suspect", "quarantined", "remediating", "revalidating", "rma")
STATES = (READY, SUSPECT, QUARANTINED, REMEDIATING, REVALIDATING, RMA)
# Taken out of the scheduler's hands (drained / cordoned): what the circuit breaker counts.
DRAINED = frozenset({QUARANTINED, REMEDIATING, REVALIDATING})
# A rung is in flight exactly in these.
IN_RUNG = frozenset({REMEDIATING, REVALIDATING})

# The ladder's rungs. Re-validation is both a rung (the first step of a ladder may be "look again, harder") and what
# follows every other rung.
REVALIDATE, REVALIDATE_BURNIN, RESET, REBOOT = "revalidate", "revalidate_burnin", "reset", "reboot"
REVALIDATIONS = frozenset({REVALIDATE, REVALIDATE_BURNIN})
RUNGS = (REVALIDATE, REVALIDATE_BURNIN, RESET, REBOOT)
# Side effects that go with a transition (made in the transition's own transaction: hooks deliveries, the bundle).
DRAIN, RESUME, BUNDLE = "drain", "resume", "bundle"

# Named outcomes of a rung. BUSY: the node could not take it now (a process holds a GPU, its drain is not
# delivered); ABORTED: the dashboard failed (a worker lost, the database away, a run that ended by our own failure):
# neither says anything of the node, so neither moves it up the ladder; the rung is taken again.
# SKIPPED: the rung does not apply to the fault (a reset with no GPU named): the ladder's next rung.
SUCCEEDED, FAILED, TIMED_OUT, BUSY, ABORTED, SKIPPED = "succeeded", "failed", "timed_out", "busy", "aborted", "skipped"
OUTCOMES = (SUCCEEDED, FAILED, TIMED_OUT, BUSY, ABORTED, SKIPPED)
NOT_THE_NODES = frozenset({BUSY, ABORTED})

# Stimuli
FINDING = "finding"          # a watch look found a hardware fault (signature)
LOOK = "look"                # a watch look came back (clean: no hardware fault in it)
ADVANCE = "advance"          # the loop may take the ladder's next rung on its own (policy auto)
REMEDIATE = "remediate"      # an operator's click: take this rung
OUTCOME = "outcome"          # a rung ended (action, outcome)
MARK_HEALTHY = "mark_healthy"
SEND_RMA = "send_rma"
HOLD = "hold"                # an operator quarantined the node (onboarding): the loop's quarantine too, no rung
RELEASE = "release"          # an operator accepted a node held so: ready, its resume made by the acceptance
OPERATOR_HOLD = "operator_hold"  # the root cause of a node an operator holds: the ladder is never taken for it


@dataclass(frozen=True)
class Loop:
    """What the machine needs to know of a node: its state and what the services read for it."""

    state: str = READY
    root_cause: str = ""       # the hardware signature the node is held for
    rung: int = 0              # the index in the ladder of the rung taken last (or to take next from quarantined)
    action: str = ""           # the rung in flight (remediating / revalidating), "" when none
    ladder: tuple = (REVALIDATE,)
    auto: bool = False         # the loop climbs the ladder on its own (else an operator clicks)
    breaker_allows: bool = True
    repeats: int = 0           # earlier remediations of this root cause within the window
    repeat_limit: int = 2      # the n-th remediation of one root cause within the window sends to rma
    retry_wait: str = ""       # why the rung a busy node (or our failure) held back is not taken again yet
    flaps: int = 0             # times this condition cleared at the next look within the flap window
    flap_limit: int = 3        # the n-th time it comes back, it is confirmed, not cleared again


@dataclass(frozen=True)
class Stimulus:
    kind: str
    signature: str = ""
    action: str = ""
    outcome: str = ""
    clean: bool = False        # LOOK: no hardware fault seen in it


@dataclass(frozen=True)
class Decision:
    """`to` is None when nothing changes (then `waiting` may say why the machine holds)."""

    to: str = None
    why: str = ""
    effects: tuple = ()        # DRAIN, RESUME, BUNDLE
    action: str = ""           # the rung to start (a remediation or a re-validation), "" for none
    loop: Loop = None          # the loop after the decision
    waiting: str = ""


NOTHING = Decision()


def _go(loop, to, why, *, effects=(), action="", **changes):
    return Decision(to=to, why=why, effects=tuple(effects), action=action,
                    loop=replace(loop, state=to, action=action, **changes))


def _rung(loop, index, why):
    """Take rung `index` of the ladder: a re-validation goes straight to revalidating, anything else remediates."""
    if index >= len(loop.ladder):
        return _go(loop, RMA, "%s; the ladder (%s) is spent" % (why, ", ".join(loop.ladder) or "empty"),
                   effects=(BUNDLE,), rung=index)
    action = loop.ladder[index]
    to = REVALIDATING if action in REVALIDATIONS else REMEDIATING
    return _go(loop, to, "%s: %s" % (why, action), action=action, rung=index)


def _quarantine(loop, signature, why):
    if not loop.breaker_allows:
        return Decision(waiting="the circuit breaker is open: %s stays %s" % (signature or loop.root_cause,
                                                                                loop.state))
    cause = signature or loop.root_cause
    if loop.repeats + 1 >= loop.repeat_limit:
        return _go(loop, RMA, "%s again: remediation number %d of %s within the window (limit %d)" % (
            cause, loop.repeats + 1, cause, loop.repeat_limit), effects=(DRAIN, BUNDLE), root_cause=cause, rung=0)
    return _go(loop, QUARANTINED, why, effects=(DRAIN,), root_cause=cause, rung=0)


def step(loop, stimulus):
    """The one transition function. Returns a Decision; NOTHING (to None) when the stimulus changes nothing here
    (a stale outcome, an application Xid, a finding on a node already held)."""
    state, kind = loop.state, stimulus.kind
    if kind == MARK_HEALTHY:
        if state == READY:
            return NOTHING
        return _go(loop, READY, "marked healthy by an operator", effects=(RESUME,) if state in DRAINED | {RMA} else (),
                   root_cause="", rung=0)
    if kind == SEND_RMA:
        if state == RMA:
            return NOTHING
        return _go(loop, RMA, "sent to RMA by an operator",
                   effects=(BUNDLE,) if state in DRAINED else (DRAIN, BUNDLE))
    if kind == HOLD:
        if state in IN_RUNG | {QUARANTINED, RMA}:
            return NOTHING  # held already (drained), or in a rung that ends on its own; the operator's drain is made
        return _go(loop, QUARANTINED, "quarantined by an operator", root_cause=OPERATOR_HOLD, rung=0)
    if kind == RELEASE:
        if state != QUARANTINED or loop.root_cause != OPERATOR_HOLD:
            return NOTHING
        return _go(loop, READY, "accepted by an operator", root_cause="", rung=0)
    if state == READY:
        if kind == FINDING and stimulus.signature:
            return _go(loop, SUSPECT, "%s seen" % stimulus.signature, root_cause=stimulus.signature, rung=0)
        return NOTHING
    if state == SUSPECT:
        if kind == FINDING:
            return _quarantine(loop, loop.root_cause, "%s seen again (now %s)" % (loop.root_cause,
                                                                                 stimulus.signature))
        if kind == LOOK:
            if stimulus.clean and loop.root_cause in CONDITIONS and loop.flaps + 1 < loop.flap_limit:
                return _go(loop, READY, "%s gone at the next look" % loop.root_cause, root_cause="", rung=0)
            if stimulus.clean and loop.root_cause in CONDITIONS:
                return _quarantine(loop, loop.root_cause, "%s came and went %d times within the flap window: "
                                   "confirmed" % (loop.root_cause, loop.flaps + 1))
            return _quarantine(loop, loop.root_cause, "%s confirmed at the next look" % loop.root_cause)
        return NOTHING
    if state == QUARANTINED:
        # on its own: once when quarantined, then at each look (a reset refused while a process held the GPU)
        if kind in (ADVANCE, LOOK, FINDING) and loop.auto:
            if loop.root_cause == OPERATOR_HOLD:
                return Decision(waiting="quarantined by an operator: no rung until an operator decides")
            if loop.retry_wait:
                return Decision(waiting=loop.retry_wait)
            return _rung(loop, loop.rung, "the ladder's rung %d" % (loop.rung + 1))
        if kind == REMEDIATE and stimulus.action in RUNGS:
            return _go(loop, REVALIDATING if stimulus.action in REVALIDATIONS else REMEDIATING,
                       "an operator asked for %s" % stimulus.action, action=stimulus.action)
        return NOTHING
    if state in IN_RUNG:
        if kind != OUTCOME or stimulus.action != loop.action:
            return NOTHING  # a stale or repeated outcome: the rung it speaks of is no longer in flight
        if stimulus.outcome in NOT_THE_NODES:
            # back to quarantined on the same rung: taken again (auto: at the next look), never the next one
            return _go(loop, QUARANTINED, "%s not done (%s): taken again, not counted against the node" % (
                loop.action, "the node is busy" if stimulus.outcome == BUSY else "the dashboard failed"))
        if stimulus.outcome == SKIPPED:
            return _rung(loop, loop.rung + 1, "%s does not apply to %s; the ladder's rung %d" % (
                loop.action, loop.root_cause or "the fault", loop.rung + 2))
        if state == REMEDIATING:
            if stimulus.outcome == SUCCEEDED:
                return _go(loop, REVALIDATING, "%s succeeded: re-validate" % loop.action, action=REVALIDATE)
            return _go(loop, RMA, "%s %s" % (loop.action, stimulus.outcome.replace("_", " ")), effects=(BUNDLE,))
        if stimulus.outcome == SUCCEEDED:
            return _go(loop, READY, "re-validation passed", effects=(RESUME,), root_cause="", rung=0,
                       repeats=loop.repeats + 1)
        return _rung(loop, loop.rung + 1, "re-validation %s" % stimulus.outcome.replace("_", " "))
    return NOTHING  # RMA: only an operator moves it (MARK_HEALTHY above)
