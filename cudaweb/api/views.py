"""The token API, /api/v1/: nodes, validation, runs, triage, the audit log and network tests. Each operation's role
is in cudaweb/api/access.py; the OpenAPI document (/api/v1/openapi.json) is generated from the type hints here and
in schemas.py."""

import json
import logging
import uuid

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse
from ninja import NinjaAPI, Path, Query, Status
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from cudaweb.accounts.roles import has_role
from cudaweb.api import access, selectors
from cudaweb.api.errors import error_response, json_detail
from cudaweb.api.schemas import (AcknowledgeIn, AuditFilters, AuditList, Error, EventFilters, EventList,
                                 HealthEventDetail, HealthEventOut, NetworkTestAccepted,
                                 NetworkTestIn, NetworkTestOut, NodeCredentialIssued, NodeCredentialRevoked, NodeDetail,
                                 NodeFilters, NodeList, RunAccepted, RunOut, TriageIn, TriageOut, ValidateIn,
                                 WatchReportAccepted)
from cudaweb.api.services import token_user
from cudaweb.health.ingest import ReportRefused, report_ingest
from cudaweb.health.models import HealthEvent
from cudaweb.health.services import event_acknowledge as event_acknowledge_service
from cudaweb.health.services import loop_of
from cudaweb.network.models import NetworkTest
from cudaweb.network.services import network_test_request
from cudaweb.accounts.audit import client_address
from cudaweb.nodes import report_credentials
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.playbooks.matcher import triage as triage_text
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.validation import junit
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.reports import ReportError, parse_report
from cudaweb.validation.services import run_request

log = logging.getLogger(__name__)
READ = {401: Error, 403: Error}
WITH_INPUT = {400: Error, 401: Error, 403: Error}


class BearerToken(HttpBearer):
    """A token from `manage.py api_token`; the request then acts as the token's user, with that user's role, which
    must be the one access.RULES names for this URL and method."""

    def authenticate(self, request, token):
        user = token_user(token)
        if user is None:
            return None
        name = request.resolver_match.view_name if request.resolver_match else None
        role = access.role_needed(name, request.method)
        if role == access.NODE:
            raise AuthorizationError(message="a node's report is posted with that node's own credential "
                                     "(manage.py node_credential NODE), not a user's token")
        if role is None:
            log.error("no API rule for %s %s (cudaweb/api/access.py): refused", request.method, name)
            raise AuthorizationError(message="no access rule for this URL")
        if role != access.PUBLIC and not has_role(user, role):
            raise AuthorizationError(message="this needs the %s role" % role)
        request.user = user  # the audit log's actor for what this request does
        return user


class NodeCredentialAuth(HttpBearer):
    """A node's own credential (cudaweb.nodes.report_credentials): it speaks for the node the URL names only, and
    for posting that node's reports only (access.NODE). A user's token is refused here, whatever its role."""

    def authenticate(self, request, token):
        credential = report_credentials.node_credential_find(token)
        if credential is None:
            if token_user(token) is not None:
                raise AuthorizationError(message="a node's report is posted with that node's own credential "
                                         "(manage.py node_credential NODE), not a user's token")
            return None
        named = (request.resolver_match.kwargs or {}).get("name") if request.resolver_match else None
        if named != credential.node.name:
            log.warning("node %s's credential (%s…) posted for node %r: refused", credential.node.name,
                        credential.prefix, (named or "")[:100])
            raise AuthorizationError(message="this credential speaks for node %s only" % credential.node.name)
        request.node_credential = credential
        return credential


class ObjectBodies(Parser):
    """A body is a JSON object: ninja's schemas would read a list or a number as an object with no fields."""

    def parse_body(self, request):
        data = json.loads(request.body)
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        return data


class Api(NinjaAPI):
    def get_openapi_operation_id(self, operation):
        return operation.view_func.__name__  # nodes, node_validate, ...: the names access.RULES uses


api = Api(title="cudaweb", version="1", description="The cudaweb dashboard's token API. Send "
               "`Authorization: Bearer <token>` (`manage.py api_token USER`); a token acts with its user's role.",
               urls_namespace="api", openapi_url="/openapi.json", docs_url=None, auth=BearerToken(), parser=ObjectBodies())


@api.exception_handler(ValidationError)
def _invalid(request, exc):
    return error_response(400, json_detail(exc.errors))


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    if request.headers.get("Authorization"):
        return error_response(401, "the token is unknown or revoked, or its user is inactive",
                              headers={"WWW-Authenticate": 'Bearer realm="cudaweb", error="invalid_token"'})
    return error_response(401, "send Authorization: Bearer <token> (manage.py api_token USER)",
                          headers={"WWW-Authenticate": 'Bearer realm="cudaweb"'})


@api.exception_handler(HttpError)
def _http_error(request, exc):
    return error_response(exc.status_code, exc.message)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(404, str(exc) or "not found")


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return error_response(413, "the request body is too large")


def _broker_down(exc):
    return error_response(503, "%s; nothing was queued, try again once Redis is back" % exc,
                          headers={"Retry-After": "30"})


@api.get("/nodes/", response={200: NodeList, **WITH_INPUT}, url_name="nodes", summary="List nodes")
def nodes(request, filters: Query[NodeFilters]):
    _known_query_only(request, NodeFilters)
    return selectors.node_list(**filters.dict())


@api.get("/nodes/{name}/", response={200: NodeDetail, 404: Error, **WITH_INPUT}, url_name="node",
         summary="A node, with its newest runs")
def node(request, name: str = Path(..., example="gpu-0042")):
    found = selectors.node_detail(name=_name(name))
    if found is None:
        raise Http404("no node %r" % name)
    return found


@api.post("/nodes/{name}/validate/", response={202: RunAccepted, 404: Error, 409: Error, 503: Error, **WITH_INPUT},
          url_name="node_validate", summary="Validate a node (operator)",
          description="Queues a run, or answers with the node's live run. 409: the node's host key is not accepted. "
                      "503: the task queue (Redis) does not answer; nothing is kept.")
def node_validate(request, body: ValidateIn, name: str = Path(..., example="gpu-0042")):
    target = Node.objects.select_related("host_key").filter(name=_name(name)).first()
    if target is None:
        raise Http404("no node %r" % name)
    if not target.can_validate:
        raise HttpError(409, "accept the node's host key before validating it")
    try:
        run = run_request(node=target, mode=body.mode, requested_by=request.auth, burnin_seconds=body.burnin_seconds)
    except BrokerUnavailable as exc:
        return _broker_down(exc)
    return Status(202, {"run": run.id, "status": run.status, "node": target.name})


@api.get("/runs/{run_id}/", response={200: RunOut, 404: Error, **WITH_INPUT}, url_name="run",
         summary="A run: its state, reason and report")
def run(request, run_id: str):
    found = selectors.run_detail(run_id=_uuid(run_id))
    if found is None:
        raise Http404("no run %s" % run_id)
    return found


@api.get("/runs/{run_id}/junit.xml", response={404: Error, **WITH_INPUT}, url_name="run_junit",
         summary="A run as JUnit XML, for CI pipelines",
         description="One testsuite per layer, one testcase per check (time: its duration; failure, error or skipped "
                     "with its summary); the run's root cause is each suite's first property. Valid against the "
                     "common JUnit format that Jenkins, GitLab and Azure DevOps read.",
         openapi_extra={"responses": {200: {"description": "the JUnit XML document", "content": {
             "application/xml": {"schema": {"type": "string"}}}}}})
def run_junit(request, run_id: str):
    found = ValidationRun.objects.select_related("node").filter(id=_uuid(run_id)).defer(
        "raw_output", "progress", "report").first()
    if found is None:
        raise Http404("no run %s" % run_id)
    return HttpResponse(junit.run_junit(run=found, root_cause=run_root_cause(run=found)),
                        content_type="application/xml; charset=utf-8")


@api.post("/triage/", response={200: TriageOut, 413: Error, **WITH_INPUT}, url_name="triage",
          summary="Rank the playbooks for a log",
          description="The same ranked JSON as `manage.py triage_log --json` gives per input. 413: the text is over "
                      "CUDAWEB_TRIAGE_CAP bytes.")
def triage(request, body: TriageIn):
    size = len(body.text.encode("utf-8", "surrogatepass"))
    if size > settings.CUDAWEB_TRIAGE_CAP:
        raise HttpError(413, "the text is %d bytes; the limit is %d bytes" % (size, settings.CUDAWEB_TRIAGE_CAP))
    return triage_text(body.text).as_dict()


@api.get("/audit/", response={200: AuditList, **WITH_INPUT}, url_name="audit", summary="The audit log (admin)",
         description="Newest first; the audit page's filters.")
def audit(request, filters: Query[AuditFilters]):
    _known_query_only(request, AuditFilters)
    return selectors.audit_page(**filters.dict())


@api.post("/network-tests/", response={202: NetworkTestAccepted, 404: Error, 409: Error, 503: Error, **WITH_INPUT},
          url_name="network_tests", summary="Test the network between nodes (operator)",
          description="Nodes by name and/or a label. 404: a named node does not exist. 409: fewer than two nodes, or "
                      "fewer than two that can be reached (host key accepted). 503: the task queue does not answer; "
                      "nothing is kept.")
def network_tests(request, body: NetworkTestIn):
    chosen = {n.name: n for n in Node.objects.select_related("host_key").filter(name__in=set(body.nodes))}
    unknown = sorted(set(body.nodes) - set(chosen))
    if unknown:
        raise Http404("no node(s) named %s" % ", ".join(repr(name) for name in unknown[:20]))
    if body.label:
        chosen.update({n.name: n for n in nodes_with_label(body.label).select_related("host_key")})
    if len(chosen) < 2:
        raise HttpError(409, "a network test needs two nodes or more; the fleet has %d of those named" % len(chosen))
    usable = [chosen[name] for name in sorted(chosen) if chosen[name].can_validate]
    if len(usable) < 2:
        raise HttpError(409, "a network test needs two nodes or more that can be reached (host key accepted)")
    try:
        test = network_test_request(nodes=usable, requested_by=request.auth, plan=body.plan)
    except BrokerUnavailable as exc:
        return _broker_down(exc)
    return Status(202, {"network_test": test.id, "status": test.status, "plan": test.plan,
                 "nodes": [node.name for node in usable]})


@api.get("/network-tests/{test_id}/", response={200: NetworkTestOut, 404: Error, **WITH_INPUT},
         url_name="network_test", summary="A network test: its pairs and suspects")
def network_test(request, test_id: str):
    test = NetworkTest.objects.filter(id=_uuid(test_id)).first()
    if test is None:
        raise Http404("no network test %s" % test_id)
    return selectors.network_test_detail(test)


@api.get("/events/", response={200: EventList, **WITH_INPUT}, url_name="events", summary="Health events",
         description="What the watch saw between validations, newest first: `node` (a name), `since` (ISO 8601), "
                     "`state` (open, acknowledged, closed) and `klass` (hardware, application, observation) select. "
                     "An unknown node gives an empty list.")
def events(request, filters: Query[EventFilters]):
    _known_query_only(request, EventFilters)
    return selectors.health_events(node_name=filters.node, since=filters.since, state=filters.state,
                                   klass=filters.klass, limit=filters.limit)


EventId = Path(..., ge=1, le=2**63 - 1, example=1)


@api.get("/events/{event_id}/", response={200: HealthEventDetail, 404: Error, **WITH_INPUT}, url_name="event",
         summary="A health event: its evidence, acknowledgement, node state, newest run and playbook")
def event(request, event_id: int = EventId):
    found = selectors.health_event_detail(event_id=event_id)
    if found is None:
        raise Http404("no event %s" % event_id)
    return found


@api.post("/events/{event_id}/acknowledge/", response={200: HealthEventOut, 404: Error, 409: Error, **WITH_INPUT},
          url_name="event_acknowledge", summary="Acknowledge a health event, with a note (operator)",
          description="An operator says someone works the fault; the note is required. 409: acknowledged already "
                      "(the first acknowledgement is kept).")
def event_acknowledge(request, body: AcknowledgeIn, event_id: int = EventId):
    found = HealthEvent.objects.select_related("node").filter(id=event_id).first()
    if found is None:
        raise Http404("no event %s" % event_id)
    if not " ".join(body.note.split()):
        raise HttpError(400, "body.note: say what is being done about it")
    try:
        found = event_acknowledge_service(event=found, user=request.auth, note=body.note)
    except ValueError as exc:
        raise HttpError(409, str(exc))
    return selectors.health_event_out(found)


WATCH_REPORT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "a report of `python -m agents.cudaprobe --mode watch --json` "
    "(agents/cudaprobe/schema.json, \"mode\": \"watch\")", "required": ["schema", "mode", "checks"],
    "properties": {"schema": {"const": "cudaprobe/1"}, "mode": {"const": "watch"},
                   "checks": {"type": "array", "items": {"type": "object"}}}}}}}}


@api.post("/nodes/{name}/watch-report/",
          response={202: WatchReportAccepted, 404: Error, 413: Error, 429: Error, **WITH_INPUT},
          url_name="node_watch_report", summary="A node's watch report (the node's own credential)",
          openapi_extra=WATCH_REPORT_BODY, auth=NodeCredentialAuth(),
          description="The node-local health command posts what `--mode watch --json` printed, with the node's own "
                      "credential (`manage.py node_credential NODE`), for that node only: a user's token, or another "
                      "node's credential, is refused (403). Its findings become health events and move the node in "
                      "the loop, as a look by the dashboard does. 400: not a watch report of the agent's schema; "
                      "nothing is kept. 429: more than CUDAWEB_NODE_REPORTS_PER_MINUTE reports this minute.")
def node_watch_report(request, name: str = Path(..., example="gpu-0042")):
    credential = request.node_credential
    if not report_credentials.node_report_admit(credential, address=client_address(request)):
        return error_response(429, "node %s has posted %d reports this minute: the limit "
                              "(CUDAWEB_NODE_REPORTS_PER_MINUTE); try again next minute" % (
                                  credential.node.name, settings.CUDAWEB_NODE_REPORTS_PER_MINUTE),
                              headers={"Retry-After": "60"})
    target = credential.node
    try:
        result = report_ingest(target, parse_report(request.body.decode("utf-8", "replace")), source="node")
    except (ReportError, ReportRefused) as exc:
        raise HttpError(400, str(exc))
    return Status(202, {"node": target.name, "state": loop_of(target).state, "events_new": len(result.new),
                        "events_grown": len(result.grown), "events_closed": result.closed,
                        "findings_dropped": result.dropped})


@api.post("/nodes/{name}/credential/", response={201: NodeCredentialIssued, 404: Error, **WITH_INPUT},
          url_name="node_credential", summary="Issue a node's credential (admin)",
          description="A new credential for the node, for its health command or watcher to post its own reports "
                      "with; the node's earlier credential is revoked. The credential is in this answer only.")
def node_credential(request, name: str = Path(..., example="gpu-0042")):
    target = Node.objects.filter(name=_name(name)).first()
    if target is None:
        raise Http404("no node %r" % name)
    earlier = report_credentials.node_credential_active(target) is not None
    credential, text = report_credentials.node_credential_issue(node=target, by=request.auth.get_username())
    return Status(201, {"node": target.name, "credential": text, "prefix": credential.prefix,
                        "revoked_earlier": earlier})


@api.delete("/nodes/{name}/credential/", response={200: NodeCredentialRevoked, 404: Error, **WITH_INPUT},
            url_name="node_credential", summary="Revoke a node's credential (admin)")
def node_credential_revoke(request, name: str = Path(..., example="gpu-0042")):
    target = Node.objects.filter(name=_name(name)).first()
    if target is None:
        raise Http404("no node %r" % name)
    return {"node": target.name, "revoked": report_credentials.node_credential_revoke(
        node=target, by=request.auth.get_username())}


def _known_query_only(request, schema):
    """A misspelt filter is an error, not a silent "everything"."""
    unknown = sorted(set(request.GET) - set(schema.model_fields))
    if unknown:
        raise HttpError(400, "unknown query parameter(s): %s (known: %s)" % (
            ", ".join(name[:50] for name in unknown[:10]), ", ".join(schema.model_fields)))


def _name(text):
    """A node name from a path, or 404 (PostgreSQL refuses a NUL character in a query; no name holds one)."""
    if "\x00" in text:
        raise Http404("no node %r" % text[:100])
    return text


def _uuid(text):
    """A UUID from a path, or 404: a malformed id names nothing (it is not a bad request)."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Http404("no such id %r" % text[:100])



# Nodes added, changed and deleted (admin), a host key accepted, a decision (cudaweb/api/fleet_ops.py). The node
# routes are here, beside the GETs of their paths: ninja answers one path from one router.
from cudaweb.api import fleet_ops  # noqa: E402


@api.post("/nodes/", response={201: fleet_ops.NodeWritten, **fleet_ops.ERRORS}, url_name="nodes",
          summary="Add an SSH node (admin)",
          description="The add-node page's service: the node rule applies (400 names the field), with a stored "
                      "credential's name or a private key (stored encrypted); audited as node.created. 409: the name "
                      "is taken. Accept its host key next (nodes/<name>/host-key/accept/).")
def node_create(request, body: fleet_ops.NodeIn):
    return fleet_ops.node_create(request, body)


@api.patch("/nodes/{name}/", response={200: fleet_ops.NodeWritten, **fleet_ops.ERRORS}, url_name="node",
           summary="Change an SSH node (admin)",
           description="The edit page's service: address, port, username, python_path, labels; audited as "
                       "node.changed with each old and new value. A new address or port drops the pinned host key "
                       "(the node is new again), as on the page.")
def node_change(request, body: fleet_ops.NodeChange, name: str = Path(..., example="gpu-0042")):
    return fleet_ops.node_change(request, name, body)


@api.delete("/nodes/{name}/", response={200: fleet_ops.NodeDeleted, **fleet_ops.ERRORS}, url_name="node",
            summary="Delete a node (admin)",
            description="Audited as node.deleted. 409: a run in progress, or acceptance records kept for it.")
def node_delete(request, name: str = Path(..., example="gpu-0042")):
    return fleet_ops.node_delete(request, name)


api.add_router("", fleet_ops.router)
