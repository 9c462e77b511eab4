"""The watch's cadence and its sessions: which nodes are due (claimed by one conditional UPDATE each, so two beat
ticks or two workers never look at one node twice for one slot), and one SSH session kept per node in each worker
process (keepalive), reused look after look instead of one connection a poll."""

import json
import logging
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from cudaweb.health.ingest import ReportRefused, report_ingest
from cudaweb.health.models import LoopPolicy, NodeLoop
from cudaweb.health.policy import policy_of
from cudaweb.nodes.models import Node
from cudaweb.remote import bundle
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.reports import parse_report

log = logging.getLogger(__name__)
WATCH_ARGS = ["--mode", "watch", "--json"]
# The agent dates a kernel-log line from the boot time (/proc/stat btime, whole seconds) plus the line's stamp: a
# line this close to the previous look's start may be seen by two looks (its event grows) rather than by none.
SINCE_MARGIN_S = 2
MAX_SLOWER = 8  # a failing host's looks: at most this many intervals apart
LEASE_MARGIN_S = 10  # a look's lease outlives its timeout by this much (the report's ingest after the agent ends)


class Sessions:
    """Connected transports of this worker process, by node, with the agent already on the host. A session is
    keyed by what it was opened with (address, port, user, credential, accepted host key): a change opens a new
    one. An error closes it; the next look connects again."""

    def __init__(self, opener=transport_for):
        self.opener = opener
        self.open = {}  # node id -> (key, transport, agent path, last used)
        self.connects = 0

    @staticmethod
    def _key(node):
        host_key = getattr(node, "host_key", None)
        return (node.address, node.port, node.username, node.credential_id, node.transport,
                host_key.key_base64 if host_key is not None and host_key.accepted_at else None)

    def get(self, node):
        key = self._key(node)
        held = self.open.get(node.id)
        if held and held[0] == key and self._alive(held[1]):
            self.open[node.id] = held[:3] + (time.monotonic(),)
            return held[1], held[2]
        self.drop(node.id)
        transport = self.opener(node, purpose="watch")
        transport.connect() if hasattr(transport, "connect") else None
        client = getattr(transport, "client", None)
        if client is not None and settings.CUDAWEB_WATCH_KEEPALIVE_S:
            client.get_transport().set_keepalive(settings.CUDAWEB_WATCH_KEEPALIVE_S)
        payload, digest = bundle.build()
        agent_path = transport.upload_agent(payload, digest)
        self.connects += 1
        self.open[node.id] = (key, transport, agent_path, time.monotonic())
        return transport, agent_path

    @staticmethod
    def _alive(transport):
        """An SSH session whose connection is gone (the host rebooted, the keepalive found no answer) is opened
        again before the look, not failed by it."""
        client = getattr(transport, "client", None)
        if client is None:
            return not hasattr(transport, "client")  # a local transport has no connection to lose
        connection = client.get_transport()
        return connection is not None and connection.is_active()

    def drop(self, node_id):
        held = self.open.pop(node_id, None)
        if held:
            try:
                held[1].close()
            except Exception:  # closing a dead session: nothing more to free
                pass

    def reap(self, idle_s):
        cutoff = time.monotonic() - idle_s
        for node_id in [n for n, held in self.open.items() if held[3] < cutoff]:
            self.drop(node_id)


SESSIONS = Sessions()


def nodes_due(now=None, limit=2000):
    """Claim the nodes whose look is due: each claimed row's next_watch_at moves one interval on from when it was
    due (so the cadence does not drift with the queue), or from now for a node more than an interval late. The due
    rows are locked (SKIP LOCKED: a second tick at once claims others) and moved by a few UPDATEs, one per interval
    and kind, not one per node. Returns [(node id, due at)]."""
    now = now or timezone.now()
    for node_id in Node.objects.filter(loop__isnull=True).values_list("id", flat=True)[:limit]:
        NodeLoop.objects.get_or_create(node_id=node_id, defaults={"next_watch_at": now})
    policies = list(LoopPolicy.objects.all())
    reachable = Q(node__transport=Node.Transport.LOCAL) | Q(node__credential__isnull=False)
    # a next look further ahead than any cadence allows was set by a clock that has since stepped back: due now
    # (else no node would be looked at until the clock caught up again)
    longest = max([settings.CUDAWEB_WATCH_INTERVAL_S] + [p.interval_s or 0 for p in policies]) * MAX_SLOWER
    stepped_back = Q(next_watch_at__gt=now + timedelta(seconds=longest + 60))
    with transaction.atomic():
        rows = list(NodeLoop.objects.select_for_update(skip_locked=True, of=("self",)).select_related("node")
                    .filter(reachable).filter(Q(next_watch_at__lte=now) | Q(next_watch_at__isnull=True) | stepped_back)
                    .order_by("next_watch_at")[:limit])
        moves = defaultdict(list)
        for row in rows:
            # a host whose looks keep failing (hung, away) is looked at less often: 2, 4, ... up to 8 intervals
            slower = min(MAX_SLOWER, 2 ** row.watch_failures) if row.watch_failures else 1
            interval = timedelta(seconds=policy_of(row.node, policies).interval_s * slower)
            late = row.next_watch_at is None or row.next_watch_at + interval <= now or row.next_watch_at > now
            moves[(interval, late)].append(row.node_id)
        for (interval, late), node_ids in moves.items():
            step = now + interval if late else F("next_watch_at") + interval
            NodeLoop.objects.filter(node_id__in=node_ids).update(next_watch_at=step)
    claimed = [(row.node_id, row.next_watch_at or now) for row in rows]
    return claimed


def watch_args(node, loop):
    """The agent's arguments for a look: what is new since the previous look (its start, less SINCE_MARGIN_S;
    before a node's first look, since its latest validation) is a finding, what came before is history; the
    previous look's fabric counters, so that one that grew between two looks is named."""
    args = list(WATCH_ARGS)
    since = loop.last_watch_at if loop is not None else None
    if since is not None:
        since -= timedelta(seconds=SINCE_MARGIN_S)
    else:
        since = (ValidationRun.objects.filter(node=node, status__in=ValidationRun.VERDICT_STATUSES)
                 .order_by("-finished").values_list("finished", flat=True).first())
    if since is not None:
        args += ["--since", since.isoformat()]
    if loop is not None and loop.watch_counters:
        args += ["--fabric-previous", json.dumps(loop.watch_counters, sort_keys=True, separators=(",", ":"))]
    return args


def look(node_id, sessions=SESSIONS):
    """One look at a node: the agent's watch over the node's session, its report ingested (dated when the look
    began). Returns the Ingested, or None when the look failed (the reason is kept on the node's loop row)."""
    node = Node.objects.select_related("credential", "host_key", "loop").get(id=node_id)
    try:
        transport, agent_path = sessions.get(node)
        started = timezone.now()
        result = transport.run_agent(node.python_path, agent_path, watch_args(node, getattr(node, "loop", None)),
                                     settings.CUDAWEB_WATCH_TIMEOUT_S, env=node.agent_env())
        report = parse_report(result.stdout)
        ingested = report_ingest(node, report, now=started)
        NodeLoop.objects.filter(node=node).exclude(watch_failures=0).update(watch_failures=0)
        return ingested
    except (TransportError, ReportRefused, ValueError, json.JSONDecodeError) as exc:
        sessions.drop(node.id)
        NodeLoop.objects.filter(node=node).update(watch_error=("%s: %s" % (type(exc).__name__, exc))[:500],
                                                  watch_failures=F("watch_failures") + 1)
        log.warning("watch of %s failed: %s", node.name, exc)
        return None


_pool = None
_pool_lock = threading.Lock()
# The nodes this worker process is looking at now: a look that outlasts its interval (a slow host, a short interval
# set by a policy, a queue that held the batch) must not get a second look beside it on the same session.
_in_flight = set()
_in_flight_lock = threading.Lock()


def _lease(node_id):
    """Take the node's look lease (one conditional UPDATE): the time it ends, or None when a look of the node runs
    already, in this worker process or another one."""
    now = timezone.now()
    until = now + timedelta(seconds=settings.CUDAWEB_WATCH_TIMEOUT_S + LEASE_MARGIN_S)
    taken = NodeLoop.objects.filter(Q(looking_until__isnull=True) | Q(looking_until__lt=now),
                                    node_id=node_id).update(looking_until=until)
    return until if taken else None


def _look_in_thread(node_id):
    with _in_flight_lock:
        if node_id in _in_flight:
            log.warning("watch of node %s skipped: its previous look is still running", node_id)
            NodeLoop.objects.filter(node_id=node_id).update(
                watch_error="a look was skipped: the previous look was still running (a slow host or a short interval)")
            return None
        _in_flight.add(node_id)
    close_old_connections()  # each thread keeps its own connection; one the database dropped is opened again
    until = None
    try:
        until = _lease(node_id)
        if until is None:
            log.warning("watch of node %s skipped: its previous look is still running", node_id)
            NodeLoop.objects.filter(node_id=node_id).update(
                watch_error="a look was skipped: the previous look was still running (a slow host or a short interval)")
            return None
        return look(node_id)
    except Exception:  # one node's bug must not end the batch: logged, the next slot looks again
        log.exception("watch of node %s failed", node_id)
        return None
    finally:
        if until is not None:
            NodeLoop.objects.filter(node_id=node_id, looking_until=until).update(looking_until=None)
        with _in_flight_lock:
            _in_flight.discard(node_id)


def look_many(node_ids):
    """The looks of a batch at once, on CUDAWEB_WATCH_THREADS threads of this worker process: a look is mostly
    waiting on its host (the agent's 1 to 2 s), so one worker keeps many hosts' looks in flight."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.CUDAWEB_WATCH_THREADS, thread_name_prefix="watch")
    return list(_pool.map(_look_in_thread, node_ids))
