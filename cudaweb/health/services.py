"""Writes of the loop: a stimulus applied to a node (the machine decides, one conditional UPDATE applies), the
circuit breaker, and an operator's decisions. Every transition goes to Transition and to the audit log."""

import logging
from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cudaweb.accounts import audit
from cudaweb.health import actions, machine
from cudaweb.health.models import Breaker, LoopAction, NodeLoop, Transition
from cudaweb.health.signatures import CONDITIONS
from cudaweb.health.policy import policy_of
from cudaweb.health.signals import node_sent_to_rma
from cudaweb.hooks import services as hooks
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label

log = logging.getLogger(__name__)
LOOP = "loop"
ACCEPTANCE = "acceptance"  # an operator's accept / quarantine decision at onboarding, told by nodes.signals


def loop_of(node):
    row, _ = NodeLoop.objects.get_or_create(node=node)
    return row


def _repeats(node, cause, days, now):
    """Remediations of `cause` on `node` that ended ready within the window."""
    if not cause:
        return 0
    return Transition.objects.filter(node=node, shadow=False, from_state=machine.REVALIDATING, to_state=machine.READY,
                                     root_cause=cause, at__gte=now - timedelta(days=days)).count()


AUTO_STIMULI = (machine.ADVANCE, machine.LOOK, machine.FINDING)


def _flaps(node, cause, shadow, now):
    """Times `cause` cleared at the next look (suspect -> ready) within the flap window."""
    since = now - timedelta(seconds=settings.CUDAWEB_LOOP_FLAP_WINDOW_S)
    return Transition.objects.filter(node=node, shadow=shadow, from_state=machine.SUSPECT, to_state=machine.READY,
                                     root_cause=cause, at__gte=since).count()


def _retry_wait(node, now):
    """Why the loop does not take a quarantined node's rung again yet, or "": its rungs were busy or aborted n times
    in a row (taken again after CUDAWEB_LOOP_RETRY_S doubled n-1 times, at most CUDAWEB_LOOP_RETRY_MAX_S), or a
    scheduler's drain failed for good (an operator must look: retrying cannot deliver it)."""
    from cudaweb.hooks.models import HookDelivery

    failed = HookDelivery.objects.filter(node=node, kind__in=(HookDelivery.Kind.SLURM_DRAIN,
                                                              HookDelivery.Kind.K8S_CORDON)).order_by("-created", "-id")
    newest = failed.first()
    if newest is not None and newest.status == HookDelivery.Status.FAILED:
        return "the node's %s failed for good (%s): an operator must look; no rung until then" % (
            newest.kind.replace("_", " "), (newest.last_error or "no reason kept")[:120])
    held = (LoopAction.Status.BUSY, LoopAction.Status.ABORTED)
    recent = list(LoopAction.objects.filter(node=node).exclude(status=LoopAction.Status.CANCELLED)
                  .order_by("-created", "-id").values_list("status", "finished", "outcome")[:12])
    in_a_row = 0
    for status, _, _ in recent:
        if status not in held:
            break
        in_a_row += 1
    if not in_a_row or recent[0][1] is None:
        return ""
    wait = min(settings.CUDAWEB_LOOP_RETRY_MAX_S, settings.CUDAWEB_LOOP_RETRY_S * 2 ** (in_a_row - 1))
    again = recent[0][1] + timedelta(seconds=wait)
    if now >= again:
        return ""
    return "the rung was %s %d time%s in a row (%s): taken again at %s" % (
        recent[0][0], in_a_row, "" if in_a_row == 1 else "s", (recent[0][2] or "")[:120],
        timezone.localtime(again).strftime("%H:%M:%S"))


# ---------------------------------------------------------------------------------------------------- the breaker

def breaker_row(lock=False):
    rows = Breaker.objects.select_for_update() if lock else Breaker.objects
    row = rows.filter(id=1).first()
    if row is None:
        Breaker.objects.get_or_create(id=1)
        row = rows.get(id=1)
    return row


def _held_nodes(now, since=None):
    """Nodes drained by the loop now, or quarantined by it within the window: what the breaker counts. The window
    starts again at `since` (an admin closed the breaker then): quarantines before it are not counted again, or the
    breaker would open again at once."""
    window = now - timedelta(seconds=settings.CUDAWEB_BREAKER_WINDOW_S)
    if since is not None and since > window:
        window = since
    # (a node an operator quarantined is theirs, not the loop's: it takes no place under the limits)
    held = set(NodeLoop.objects.filter(state__in=machine.DRAINED).exclude(root_cause=machine.OPERATOR_HOLD)
               .values_list("node_id", flat=True))
    # the loop's drains within the window: to quarantine, and straight to rma (a repeated cause) as well
    held |= set(Transition.objects.filter(shadow=False, from_state=machine.SUSPECT,
                                          to_state__in=(machine.QUARANTINED, machine.RMA), at__gte=window)
                .values_list("node_id", flat=True))
    return held


def breaker_verdict(node, now, since=None):
    """(allows, why not): whether draining `node` keeps the fleet within the limits, counting from `since` (when
    the breaker was last closed) at the earliest. Call inside the transaction that holds the breaker's row lock
    (breaker_row(lock=True))."""
    held = _held_nodes(now, since) - {node.id}
    limit = settings.CUDAWEB_BREAKER_MAX_NODES
    if len(held) + 1 > limit:
        return False, "%d nodes are quarantined or remediating within %d s; the limit is %d " \
            "(CUDAWEB_BREAKER_MAX_NODES)" % (len(held), settings.CUDAWEB_BREAKER_WINDOW_S, limit)
    labels_of = dict(Node.objects.filter(id__in=held).values_list("id", "labels"))
    pct = settings.CUDAWEB_BREAKER_MAX_PCT
    for label in sorted(set(node.labels or ())):
        total = nodes_with_label(label).count()
        in_label = sum(1 for labels in labels_of.values() if label in (labels or ()))
        allowed = max(1, total * pct // 100)
        if in_label + 1 > allowed:
            return False, "%d of the %d nodes labelled %s are quarantined or remediating; the limit is %d%% (%d)" % (
                in_label, total, label, pct, allowed)
    return True, ""


def _breaker_trip(breaker, why, node, now):
    if breaker.is_open:
        return
    Breaker.objects.filter(id=1).update(is_open=True, reason=why[:500], opened_at=now, closed_by="", closed_at=None)
    audit.record("loop.breaker_opened", obj=node, reason=why)
    hooks.loop_webhook(event="breaker_open", node=node, headline="opened the circuit breaker",
                       cause="%s; %s waits. An admin closes it on the fleet page" % (why, node.name))


def breaker_close(*, user):
    """An admin closes the breaker; the nodes it held are looked at again (the limits still hold: the next one
    over them opens it again)."""
    with transaction.atomic():
        breaker = breaker_row(lock=True)
        if not breaker.is_open:
            return 0
        Breaker.objects.filter(id=1).update(is_open=False, closed_by=user.get_username(), closed_at=timezone.now())
        audit.record("loop.breaker_closed", actor=user, reason=breaker.reason)
    waiting = list(NodeLoop.objects.filter(state=machine.SUSPECT).exclude(waiting="").select_related("node"))
    for row in waiting:
        apply(row.node, machine.Stimulus(machine.LOOK))
    return len(waiting)


def breaker_expire(now=None):
    """Beat (with the rungs' sweep): a breaker open longer than its window closes itself and the nodes it held are
    looked at again, under the same limits (still over them: it opens again, for another window). Returns how many
    nodes were looked at again, or None when it stays as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        breaker = breaker_row(lock=True)
        if not breaker.is_open or breaker.opened_at is None or \
                now - breaker.opened_at < timedelta(seconds=settings.CUDAWEB_BREAKER_WINDOW_S):
            return None
        Breaker.objects.filter(id=1).update(is_open=False, closed_by=LOOP, closed_at=now)
        audit.record("loop.breaker_closed", reason=breaker.reason, by="the loop: its window (%d s) passed" %
                     settings.CUDAWEB_BREAKER_WINDOW_S)
    waiting = list(NodeLoop.objects.filter(state=machine.SUSPECT).exclude(waiting="").select_related("node"))
    for row in waiting:
        apply(row.node, machine.Stimulus(machine.LOOK), now=now)
    return len(waiting)


# ---------------------------------------------------------------------------------------------- one stimulus

class RungRunning(ValueError):
    """An operator's decision while a rung runs on the node: decide once it has ended."""


def apply(node, stimulus, *, by=LOOP, actor=None, event=None, run=None, now=None, refuse_running=False,
          why_note=""):
    """Apply `stimulus` to `node` under its policy. Returns the Transition made, or None (nothing changes, the
    breaker holds the node, or another worker moved it first). Policy off: nothing moves; record: the shadow state
    moves and nothing is done (no drain, no rung). A rung's end is the node's whatever the policy says now: the rung
    was started under a policy that acted, and its node must not stay in it (the policy changed, or its label).
    `refuse_running`: raise RungRunning when a rung is running on the node, checked under the node's row lock, the
    lock a worker's claim of a rung takes too."""
    now = now or timezone.now()
    policy = policy_of(node)
    operator = by != LOOP
    ending = stimulus.kind == machine.OUTCOME
    if policy.mode == "off" and not operator and not ending:
        return None
    shadow = policy.mode == "record" and not operator and not ending
    with transaction.atomic():
        row = NodeLoop.objects.select_for_update().filter(node=node).first() or _created_locked(node)
        if refuse_running:
            running = LoopAction.objects.filter(node=node, status=LoopAction.Status.RUNNING).first()
            if running is not None:
                raise RungRunning("a %s is running on the node (since %s): decide once it has ended" % (
                    running.kind, running.started.strftime("%Y-%m-%d %H:%M:%S") if running.started else "now"))
        state = row.shadow_state if shadow else row.state
        cause = row.shadow_root_cause if shadow else row.root_cause
        loop = machine.Loop(state=state, root_cause=cause, rung=row.rung, action="" if shadow else row.action,
                            ladder=policy.ladder, auto=policy.auto, repeat_limit=policy.repeat_limit,
                            repeats=_repeats(node, cause, policy.repeat_window_days, now),
                            flap_limit=settings.CUDAWEB_LOOP_FLAP_LIMIT)
        if state == machine.SUSPECT and stimulus.kind == machine.LOOK and cause in CONDITIONS:
            loop = replace(loop, flaps=_flaps(node, cause, shadow, now))
        if state == machine.QUARANTINED and policy.auto and not shadow and stimulus.kind in AUTO_STIMULI:
            loop = replace(loop, retry_wait=_retry_wait(node, now))
        breaker = None
        if state == machine.SUSPECT and not shadow:
            breaker = breaker_row(lock=True)  # the lock serialises every decision that may drain a node
            allows, why_not = (False, breaker.reason) if breaker.is_open else \
                breaker_verdict(node, now, breaker.closed_at)
            loop = replace(loop, breaker_allows=allows)
        decision = machine.step(loop, stimulus)
        if decision.to is None:
            if decision.waiting and breaker is not None:
                _breaker_trip(breaker, why_not, node, now)
                NodeLoop.objects.filter(node=node).update(waiting=("breaker open: %s" % why_not)[:300])
            elif decision.waiting and loop.retry_wait:
                NodeLoop.objects.filter(node=node).update(waiting=decision.waiting[:300])
            return None
        if why_note:
            decision = replace(decision, why=("%s: %s" % (decision.why, " ".join(why_note.split())))[:500])
        return _transition(node, row, decision, shadow=shadow, by=by, actor=actor, event=event, run=run, now=now,
                           from_state=state)


def _created_locked(node):
    NodeLoop.objects.get_or_create(node=node)
    return NodeLoop.objects.select_for_update().get(node=node)


def _transition(node, row, decision, *, shadow, by, actor, event, run, now, from_state):
    new = decision.loop
    if shadow:
        version = row.shadow_version + 1
        moved = NodeLoop.objects.filter(node=node, shadow_version=row.shadow_version).update(
            shadow_state=new.state, shadow_root_cause=new.root_cause, shadow_version=version)
    else:
        version = row.version + 1
        moved = NodeLoop.objects.filter(node=node, version=row.version).update(
            state=new.state, root_cause=new.root_cause, rung=new.rung, action=new.action, version=version,
            since=now, waiting="")
    if not moved:
        return None  # another decision took this version first: it is the one that counts
    effects = list(decision.effects) + ([decision.action] if decision.action else [])
    transition = Transition.objects.create(
        node=node, version=version, shadow=shadow, from_state=from_state, to_state=new.state, by=by, actor=actor,
        why=decision.why[:500], event=event, run=run, effects=effects,
        root_cause=new.root_cause or (row.shadow_root_cause if shadow else row.root_cause),
        at=now)
    audit.record("loop.shadow_transition" if shadow else "loop.transition", actor=actor, obj=node,
                 from_state=from_state, to_state=new.state, why=decision.why, by=by, effects=effects,
                 event=event.id if event else None, run=str(run.id) if run else None)
    if shadow:
        return transition
    cause = "%s: %s" % (new.root_cause or row.root_cause or "operator", decision.why)
    if from_state in machine.IN_RUNG and new.state not in machine.IN_RUNG:
        # the node left the ladder other than by its rung's end (an operator marked it healthy or sent it to rma):
        # a rung no worker took yet never starts (it would reset or reboot a node back in service); one running
        # cannot be here (operator_decide waits for it), and one that ended is no longer pending
        LoopAction.objects.filter(node=node, status=LoopAction.Status.PENDING).update(
            status=LoopAction.Status.CANCELLED, outcome=("cancelled: %s" % decision.why)[:500], finished=now)
    if machine.DRAIN in decision.effects:
        Node.objects.filter(id=node.id).update(status=Node.Status.QUARANTINED)
        hooks.node_drain(node=node, cause=cause)
    if machine.RESUME in decision.effects:
        Node.objects.filter(id=node.id).update(status=Node.Status.READY)
        hooks.node_resume(node=node)
    if new.state in machine.DRAINED and machine.DRAIN not in decision.effects:
        Node.objects.filter(id=node.id).update(status=Node.Status.QUARANTINED)
    if machine.BUNDLE in decision.effects:
        transaction.on_commit(lambda: node_sent_to_rma.send(sender=NodeLoop, node_id=node.id,
                                                            transition_id=transition.id), robust=True)
    if decision.action:
        actions.action_start(node=node, kind=decision.action, key="%s:%d" % (node.id, version), by=by,
                     gpu_uuid=_gpu_of(node, new.root_cause or row.root_cause), now=now)
    if new.state != from_state and by != ACCEPTANCE:  # an acceptance decision has its own webhook
        hooks.loop_webhook(event="node_state", node=node, headline="is %s (was %s)" % (new.state, from_state),
                           cause=cause)
    if new.state == machine.QUARANTINED and from_state == machine.SUSPECT:
        transaction.on_commit(lambda: apply(node, machine.Stimulus(machine.ADVANCE)), robust=True)
    return transition


def _gpu_of(node, cause):
    """The GPU a rung acts on: the newest hardware event of the root cause that names one (an occurrence, an Xid line,
    is closed by the next clean look, before the rung starts; the reset still needs nvidia-smi to list it)."""
    from cudaweb.health.models import HealthEvent

    return (HealthEvent.objects.filter(node=node, signature=cause).exclude(gpu_uuid="").order_by("-last_seen")
            .values_list("gpu_uuid", flat=True).first() or "")


# ------------------------------------------------------------------------------------------- operators' words

def operator_decide(*, node, user, verdict, reason, action=""):
    """An operator marks a node healthy, sends it to RMA, or takes a rung (verdict "remediate", `action`), with a
    reason. Raises ValueError for a reason left empty or a rung the machine cannot take now."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise ValueError("say why (the reason goes to the audit log and the node's timeline)")
    kinds = {"healthy": machine.MARK_HEALTHY, "rma": machine.SEND_RMA, "remediate": machine.REMEDIATE}
    if verdict not in kinds:
        raise ValueError("unknown decision %r" % verdict)
    transition = apply(node, machine.Stimulus(kinds[verdict], action=action), by=user.get_username(), actor=user,
                       refuse_running=verdict in ("healthy", "rma"))
    if transition is None:
        raise ValueError("nothing to do: the node is %s" % loop_of(node).state)
    Transition.objects.filter(id=transition.id).update(why=("%s: %s" % (transition.why, reason))[:500])
    return transition


def on_node_quarantined(sender, node_id, note="", **kwargs):
    """Receiver of nodes.signals.node_quarantined: an operator's quarantine is the loop's too (one node, one
    quarantine: the loop neither takes a rung on it nor resumes it; the acceptance's own hooks drained it)."""
    node = Node.objects.get(id=node_id)
    apply(node, machine.Stimulus(machine.HOLD), by=ACCEPTANCE, why_note=note)


def on_node_accepted(sender, node_id, note="", **kwargs):
    """Receiver of nodes.signals.node_accepted: a node an operator held is released (its resume is the
    acceptance's)."""
    apply(Node.objects.get(id=node_id), machine.Stimulus(machine.RELEASE), by=ACCEPTANCE, why_note=note)


def action_live(node):
    return LoopAction.objects.filter(node=node, status__in=LoopAction.LIVE).first()


def bundle_attach(*, transition, name, data):
    """Keep the rma bundle of `transition` (made by cudaweb.fleet.evidence); a second one for it is not kept."""
    import hashlib

    from cudaweb.health.models import RmaBundle

    bundle, _ = RmaBundle.objects.get_or_create(transition=transition, defaults={
        "name": name, "data": data, "sha256": hashlib.sha256(data).hexdigest(), "made": timezone.now()})
    return bundle


# ------------------------------------------------------------------------------- events and policies, by people

def event_acknowledge(*, event, user, note):
    """An operator acknowledges a health event (someone works it; the note says what). Raises ValueError for an
    empty note or an event acknowledged already (its first acknowledgement is kept)."""
    from cudaweb.health.models import HealthEvent

    note = " ".join((note or "").replace("\x00", "").split())[:1000]
    if not note:
        raise ValueError("say what is being done about it (the note goes to the event and the audit log)")
    now = timezone.now()
    done = HealthEvent.objects.filter(id=event.id, acknowledged_at__isnull=True).update(
        acknowledged_at=now, acknowledged_by=user, acknowledged_by_name=user.get_username(), ack_note=note)
    if not done:
        event.refresh_from_db()
        raise ValueError("acknowledged already by %s at %s" % (
            event.acknowledged_by_name or "someone", timezone.localtime(event.acknowledged_at).strftime(
                "%Y-%m-%d %H:%M:%S") if event.acknowledged_at else "?"))
    event.refresh_from_db()
    audit.record("event.acknowledged", actor=user, obj=event.node, event=event.id, signature=event.signature,
                 gpu_uuid=event.gpu_uuid, event_class=event.klass, note=note)
    return event


POLICY_FIELDS = ("label", "priority", "mode", "ladder", "auto", "interval_s", "repeat_limit", "repeat_window_days",
                 "no_scheduler")


def loop_policy_snapshot(policy):
    """A LoopPolicy's settings as JSON, for the audit log's before / after."""
    return {name: list(getattr(policy, name)) if name == "ladder" else getattr(policy, name) for name in POLICY_FIELDS}


def loop_policy_save(*, user, policy=None, **fields):
    """An admin creates (policy None) or changes a label's LoopPolicy; the ladder is checked (ladder_check raises
    ValueError), and the change goes to the audit log with the settings before and after. Returns the policy."""
    from cudaweb.health.models import LoopPolicy
    from cudaweb.health.policy import ladder_check

    unknown = set(fields) - set(POLICY_FIELDS)
    if unknown:
        raise ValueError("unknown field(s) %s" % ", ".join(sorted(unknown)))
    if "ladder" in fields:
        fields["ladder"] = list(ladder_check(fields["ladder"]))
    with transaction.atomic():
        if policy is None:
            policy = LoopPolicy.objects.create(**fields)
            audit.record("loop_policy.created", actor=user, obj=policy, before=None,
                         after=loop_policy_snapshot(policy))
            return policy
        policy = LoopPolicy.objects.select_for_update().get(id=policy.id)
        before = loop_policy_snapshot(policy)
        for name, value in fields.items():
            setattr(policy, name, value)
        policy.save()
        after = loop_policy_snapshot(policy)
        if after != before:
            audit.record("loop_policy.changed", actor=user, obj=policy, before=before, after=after,
                         fields=sorted(name for name in POLICY_FIELDS if before[name] != after[name]))
    return policy


def loop_policy_delete(*, user, policy):
    """An admin deletes a label's LoopPolicy (its nodes fall back to the next label's policy or the defaults)."""
    from cudaweb.accounts.audit import Snapshot

    before, gone = loop_policy_snapshot(policy), Snapshot.of(policy)
    with transaction.atomic():
        policy.delete()
        audit.record("loop_policy.deleted", actor=user, obj=gone, before=before, after=None)
