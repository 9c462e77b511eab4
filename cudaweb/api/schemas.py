"""The API's request and response shapes; the OpenAPI document is generated from them (django-ninja, pydantic)."""

from datetime import date, datetime, timezone
from typing import Annotated, Any, Dict, List, Literal, Optional
from uuid import UUID

from ninja import Field, Schema
from pydantic import AfterValidator, BeforeValidator, ConfigDict, model_validator

from cudaweb.accounts.audit import ACTIONS
from cudaweb.health import machine
from cudaweb.network.models import CollectiveResult, NetworkTest, PairResult
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun

NodeStatus = Literal[tuple(Node.Status.values)]
RunStatus = Literal[tuple(ValidationRun.Status.values)]
RunMode = Literal[tuple(ValidationRun.Mode.values)]
Action = Literal[tuple(sorted(ACTIONS))]
# What the database compares with: PostgreSQL refuses a NUL character in a query, so the API refuses it first.
Text = Annotated[str, Field(pattern=r"^[^\x00]*$", max_length=200)]


def _iso_day(value):
    """A day as YYYY-MM-DD only (pydantic would also read a number as a Unix time)."""
    if isinstance(value, str) and len(value) == 10 and value[4] == value[7] == "-":
        return value
    raise ValueError("a day as YYYY-MM-DD")


Day = Annotated[date, BeforeValidator(_iso_day)]


def _iso_moment(value):
    """A moment as ISO 8601 text only (pydantic would also read a number as a Unix time)."""
    if isinstance(value, str) and len(value) >= 10 and value[4] == value[7] == "-":
        return value
    raise ValueError("a moment as ISO 8601, e.g. 2026-12-01T08:00:00Z")


def _in_utc(value):
    """The moment in UTC (a naive one read as UTC): PostgreSQL refuses offsets beyond +-15:59, and a moment that leaves
    the calendar once in UTC (year 1 with a positive offset) is refused here rather than by the database."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError("a moment between years 1 and 9999 in UTC") from None


Moment = Annotated[datetime, BeforeValidator(_iso_moment), AfterValidator(_in_utc)]


class Error(Schema):
    error: str = Field(description="a short code: bad_request, unauthorized, forbidden, not_found, ...")
    detail: str = Field(description="what went wrong, for a person")


class RunBrief(Schema):
    id: UUID
    status: RunStatus
    mode: RunMode
    verdict: str = Field(description="the agent's verdict (pass, warn, fail), empty when there is no report")
    created: datetime
    finished: Optional[datetime]


class Flaky(Schema):
    runs: int = Field(description="runs with a flaky check (failed or warned on a figure, then passed) in the window")
    days: int = Field(description="the window (CUDAWEB_FLAKY_DAYS)")
    limit: int = Field(description="runs in the window from which the node is flagged (CUDAWEB_FLAKY_LIMIT)")
    flagged: bool


class PlaybookBrief(Schema):
    id: str
    title: str
    first_fix: str = Field(description="the playbook's first fix")


class RootCause(Schema):
    check: Optional[str] = Field(description="the lowest failing check (else the lowest warning); null for a run "
                                             "that never reached a verdict")
    layer: Optional[str] = Field(description="its layer, L0-L7 or advisory")
    status: str = Field(description="the check's status (fail, error, warn), or the run's state when it has no "
                                    "check (UNREACHABLE, AUTH_FAILED, TIMED_OUT, AGENT_ERROR, ...)")
    summary: str = Field(description="the check's summary, or the run's reason (which names what to do)")
    signatures: List[str]
    playbook: Optional[PlaybookBrief] = Field(description="the playbook the rules choose for it, if any")


class NodeOut(Schema):
    name: str
    status: NodeStatus = Field(description="the stored status; `state` reads it with whether a run judged the node")
    state: str = Field(description="the node's state, the word the fleet page uses (cudaweb.nodes.states): "
                       "key_to_accept, not_validated, ready, passing, warning, failing, unreachable, quarantined")
    state_label: str = Field(description="the state as the pages show it, e.g. 'Not validated'")
    transport: str
    address: str
    labels: List[str]
    gpu_model: str
    gpu_count: Optional[int]
    layer_status: Dict[str, str] = Field(description="worst check status per layer L0-L7 of the last report")
    metrics: Dict[str, float] = Field(description="latest value of each headline metric (worst GPU)")
    drifted: bool
    attention: str
    can_validate: bool = Field(description="the node's host key is accepted (or it is this host)")
    last_run: Optional[RunBrief]
    live_run: Optional[RunBrief] = Field(description="the run in progress, if any")
    flaky: Flaky
    root_cause: Optional[RootCause] = Field(description="the root cause of the last run; null when it passed")


class NodeList(Schema):
    count: int = Field(description="nodes the filters select, before limit and offset")
    nodes: List[NodeOut]


class NodeDetail(NodeOut):
    baseline: Optional[UUID] = Field(description="the run new runs are compared with")
    runs: List[RunBrief] = Field(description="the newest runs, newest first")


class ValidateIn(Schema):
    mode: RunMode = "quick"
    burnin_seconds: Optional[int] = Field(None, ge=60, le=24 * 3600,
                                          description="burn-in mode: the sustained load's length (default 300)")


class RunAccepted(Schema):
    run: UUID
    status: RunStatus
    node: str


class DashboardStep(Schema):
    step: str
    at: datetime
    since_queued_s: float = Field(description="seconds from the run's queueing to this step")
    gap_s: Optional[float] = Field(description="seconds since the step before it (null for the first)")
    what: str = Field(description="what the gap before this step was spent on")


class RunOut(Schema):
    id: UUID
    node: str
    status: RunStatus
    mode: RunMode
    trigger: str
    verdict: str
    reason: str = Field(description="why the run ended where it did")
    created: datetime
    started: Optional[datetime]
    finished: Optional[datetime]
    agent_version: str
    retry_of: Optional[UUID]
    metrics: Dict[str, float]
    drifted: bool
    drift: Dict[str, Any] = Field(description="against the baseline and the fleet peers")
    report: Optional[Dict[str, Any]] = Field(description="the agent's report, null until the run has one")
    burnin_seconds: Optional[int] = Field(description="burn-in mode: the sustained load's length")
    retry: Dict[str, Any] = Field(description="the second attempt of the checks that failed or warned on a figure: "
                                  "checks, outcomes (flaky, hard, unconfirmed, rerun), summary, error; {} if none")
    root_cause: Optional[RootCause] = Field(description="what the failure comes down to; null when the run passed "
                                                        "or is live")
    dashboard_timing: List[DashboardStep] = Field(description="the dashboard's own steps the run has reached, in "
                                                  "order: queued, claimed, transport_up, agent_started, "
                                                  "report_received, stored")


class TriageIn(Schema):
    text: str = Field(description="a log or traceback, up to CUDAWEB_TRIAGE_CAP bytes (UTF-8)")


class KnowledgeHitOut(Schema):
    table: str = Field(description="the knowledge table (cuda_runtime, nccl, xid, ...)")
    name: str
    number: Optional[int] = None
    category: Optional[str] = None
    meaning: str
    source: str
    how: str = Field(description="name, message, number, file or pattern: how the text named it")


class SimilarOut(Schema):
    id: str
    source: str = Field(description="the labelled real text this one resembles")
    similarity: float = Field(description="its BM25 score")


class MatchOut(Schema):
    id: str
    category: str
    title: str
    severity: str
    score: float
    basis: str = Field(description="rules (0.6 and above), partial (a near-miss rule) or similar (the fallback)")
    confident: bool = Field(description="a rule answer at 1.0 or above")
    then: bool = Field(description="a failure that followed the one ranked first (its consequence)")
    evidence: List[str]
    signatures: List[str]
    metrics: List[str]
    knowledge: List[KnowledgeHitOut]
    similar_to: Optional[SimilarOut] = None
    first_fix: str = Field("", description="the playbook's fix for what selected it (a signature, the OOM kind its "
                                            "numbers show, the wording matched): the one to try first")


class TriageOut(Schema):
    playbooks: List[MatchOut] = Field(description="the answer, best first: the cause, then what followed; below "
                                                  "0.6 only a guess (partial or similar)")
    candidates: List[MatchOut] = Field(description="below the match score: the closest, never the answer")
    facts: Dict[str, Any]
    oom_kinds: List[Dict[str, Any]]


class AuditEventOut(Schema):
    when: datetime
    actor: str
    action: str
    object_type: str
    object_id: str
    object_repr: str
    client_address: str
    detail: Dict[str, Any]


class AuditList(Schema):
    count: int
    events: List[AuditEventOut]


class AuditFilters(Schema):
    actor: Text = Field("", description="username (as it was)")
    action: Optional[Action] = None
    object_type: Text = Field("", description="app_label.model, e.g. nodes.node")
    since: Optional[Day] = Field(None, description="from this day (UTC), included")
    until: Optional[Day] = Field(None, description="to this day (UTC), included")
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=10**9)


class NodeFilters(Schema):
    label: Text = ""
    status: Optional[NodeStatus] = None
    gpu_model: Text = ""
    limit: int = Field(1000, ge=1, le=5000)
    offset: int = Field(0, ge=0, le=10**9)


class NetworkTestIn(Schema):
    """Nodes by name, or a label, or both (their union)."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["nodes"]}, {"required": ["label"]}]})
    nodes: List[Text] = Field(default_factory=list, min_length=2, max_length=5000, description="node names",
                              examples=[["gpu-0042", "gpu-0043"]])
    # Absent means none; the document states no default, since "" would break the field's own minLength.
    label: Text = Field("", min_length=1, description="every node with this label", examples=["rack-07"],
                        json_schema_extra=lambda schema: schema.pop("default", None))
    plan: Optional[Literal["matrix", "ring", "allreduce"]] = Field(
        None, description="matrix / ring: pair tests (default: matrix up to 8 nodes, else ring); allreduce: one "
        "all-reduce over all the nodes, bisected to the slow node or link when slow")

    @model_validator(mode="after")
    def _nodes_or_label(self):
        if not self.nodes and not self.label:
            raise ValueError("name two nodes or more, or a label")
        return self


class NetworkTestAccepted(Schema):
    network_test: UUID
    status: Literal[tuple(NetworkTest.Status.values)]
    plan: Literal[tuple(NetworkTest.Plan.values)]
    nodes: List[str]


class PairOut(Schema):
    round: int
    node_a: str
    node_b: str
    status: Literal[tuple(PairResult.Status.values)]
    failure: str
    reason: str
    gloo_latency_us: Optional[float]
    gloo_busbw_gbs: Optional[float]
    nccl_busbw_gbs: Optional[float]
    transport: str
    duration_s: Optional[float]


class CollectiveOut(Schema):
    round: int
    members: List[str] = Field(description="node names, rank 0 first")
    role: str
    status: Literal[tuple(CollectiveResult.Status.values)]
    failure: str
    reason: str
    backend: str
    busbw_gbs: Optional[float]
    latency_us: Optional[float]
    expected_gbs: Optional[float] = Field(description="what the slowest link allows")
    duration_s: Optional[float]


class NetworkTestOut(Schema):
    id: UUID
    status: Literal[tuple(NetworkTest.Status.values)]
    plan: Literal[tuple(NetworkTest.Plan.values)]
    created: datetime
    finished: Optional[datetime]
    summary: str
    suspects: List[str] = Field(description="nodes that fail with every partner; allreduce: the slow node(s), or "
                                "the link 'a-b'")
    nodes: List[str]
    pairs: List[PairOut]
    collectives: List[CollectiveOut] = Field(default_factory=list, description="allreduce: every round's all-reduces")


# The loop (cudaweb.health)
LoopState = Literal[tuple(machine.STATES)]


class EventFilters(Schema):
    node: Text = Field("", description="a node's name")
    since: Optional[Moment] = Field(None, description="events seen at or after this moment (ISO 8601)")
    state: Optional[Literal["open", "acknowledged", "closed"]] = Field(
        None, description="open: still seen and nobody acknowledged it; acknowledged: still seen, an operator works "
        "it; closed: no longer seen")
    klass: Optional[Literal["hardware", "application", "observation"]] = Field(None, description="the event's class")
    limit: int = Field(100, ge=1, le=500)


class HealthEventOut(Schema):
    id: int
    node: str
    gpu_uuid: str = Field(description="the GPU's UUID; empty when the event is about the node as a whole")
    check: str
    signature: str
    severity: Literal["fail", "warn", "info"]
    event_class: Literal["hardware", "application", "observation"] = Field(
        description="hardware moves the node in the loop; application (Xid 13, 31, 43) never quarantines by itself")
    first_seen: datetime
    last_seen: datetime
    count: int = Field(description="looks that saw it (a counter that keeps growing is one event that grows)")
    open: bool = Field(description="still seen at the latest look")
    summary: str
    evidence: str
    acknowledged_at: Optional[datetime] = Field(description="when an operator acknowledged it; null: not yet")
    acknowledged_by: str = Field(description="who acknowledged it (the user's name as it was); empty: nobody")
    ack_note: str = Field(description="the acknowledgement's note")


class EventPlaybook(Schema):
    id: str
    title: str


class HealthEventDetail(HealthEventOut):
    node_state: LoopState = Field(description="the node's state in the loop now")
    latest_run: Optional[UUID] = Field(description="the node's newest validation run")
    playbook: Optional[EventPlaybook] = Field(description="the playbook the rules choose for the signature, if any")


class AcknowledgeIn(Schema):
    note: str = Field(min_length=1, max_length=1000, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$",
                      description="what is being done about it")


class EventList(Schema):
    count: int = Field(description="events returned (newest first, at most limit)")
    events: List[HealthEventOut]


class WatchReportAccepted(Schema):
    node: str
    state: LoopState = Field(description="the node's state in the loop after this report")
    events_new: int
    events_grown: int
    events_closed: int
    findings_dropped: int = Field(description="findings past CUDAWEB_NODE_REPORT_MAX_FINDINGS, or new events past "
                                  "the node's CUDAWEB_NODE_NEW_EVENTS_PER_DAY: not stored")


class NodeCredentialIssued(Schema):
    node: str
    credential: str = Field(description="shown once: only its digest is kept")
    prefix: str
    revoked_earlier: bool = Field(description="the node had an active credential, now revoked")


class NodeCredentialRevoked(Schema):
    node: str
    revoked: bool
