"""The token API's operations that change the fleet, under the pages' roles (cudaweb/fleet/access.py): nodes added,
changed and deleted (admin; their routes sit in views.py, beside the GET of the same paths: ninja answers one path
from one router), a node's host key accepted with the fingerprint expected (admin), an acceptance decision on a run
(operator). Each is audited as its page is, by the same service. docs/adr/0031-host-keys-without-a-browser.md."""

from typing import Annotated, List, Literal, Optional
from uuid import UUID

from django.db import IntegrityError, transaction
from django.http import Http404
from ninja import Field, Path, Router, Schema, Status
from ninja.errors import HttpError

from cudaweb.api.schemas import Error, NodeStatus
from cudaweb.fleet import services as fleet_services
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.fleet.onboarding import decidable_run
from cudaweb.nodes import services as node_services
from cudaweb.nodes import validators
from cudaweb.nodes.models import Node, SSHCredential
from cudaweb.remote import connect, known_hosts
from cudaweb.remote.transports import ssh
from cudaweb.remote.transports.base import AuthFailed
from cudaweb.validation.models import ValidationRun

router = Router()
ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error}
# PostgreSQL refuses a NUL character: the API refuses it first
NoNul = r"^[^\x00]*$"
# The node rule's forms (cudaweb/nodes/validators.py), stated in the document; the address rule (a resolvable name
# or an IP inside CUDAWEB_ALLOWED_NETWORKS) and a key's readability no schema states: those are 400s naming the field.
Label = Annotated[str, Field(pattern=r"^%s$" % validators.LABEL.pattern, max_length=63)]
NodeName = Field(pattern=r"^%s$" % validators.NAME_FORM, max_length=validators.NAME_MAX, examples=["gpu-0042"])
Login = r"^%s$" % validators.USERNAME.pattern


class NodeIn(Schema):
    name: str = NodeName
    address: str = Field(pattern=NoNul, max_length=255, examples=["10.0.4.42"])
    port: int = Field(22, ge=1, le=65535)
    username: str = Field(pattern=Login, max_length=64, examples=["ops"])
    python_path: str = Field("python3", pattern=NoNul, min_length=1, max_length=500,
                             description="the node's interpreter that has torch")
    labels: List[Label] = Field([], max_length=validators.MAX_LABELS)
    credential: Optional[str] = Field(None, pattern=NoNul, max_length=100,
                                      description="a stored SSH credential's name (or give private_key)")
    private_key: Optional[str] = Field(None, pattern=NoNul, max_length=16384,
                                       description="an Ed25519, ECDSA or RSA private key, stored encrypted")


class NodeChange(Schema):
    address: Optional[str] = Field(None, pattern=NoNul, max_length=255)
    port: Optional[int] = Field(None, ge=1, le=65535)
    username: Optional[str] = Field(None, pattern=Login, max_length=64)
    python_path: Optional[str] = Field(None, pattern=NoNul, min_length=1, max_length=500)
    labels: Optional[List[Label]] = Field(None, max_length=validators.MAX_LABELS)


class NodeWritten(Schema):
    name: str
    id: UUID
    address: str
    port: int
    username: str
    python_path: str
    labels: List[str]
    status: NodeStatus
    host_key_accepted: bool
    changes: dict = Field({}, description="each changed field: [old, new] (PATCH)")


class NodeDeleted(Schema):
    name: str
    deleted: bool


class HostKeyAcceptIn(Schema):
    fingerprint: str = Field(pattern=r"^SHA256:[A-Za-z0-9+/]{43}$", examples=["SHA256:" + "A" * 43],
                             description="the SHA256 fingerprint you expect, as `ssh-keygen -lf` prints it")
    key: Optional[str] = Field(None, pattern=NoNul, max_length=16384,
                               description="optional: the key itself as a known_hosts or ssh-keyscan line's "
                               "`type base64` (e.g. `ssh-ed25519 AAAA...`); without it, the key a worker read from "
                               "the node (node page: Connect and show the host key) is accepted")


class HostKeyAccepted(Schema):
    node: str
    key_type: str
    fingerprint: str
    accepted_now: bool = Field(description="false: this very key was accepted already")


class DecisionIn(Schema):
    run: UUID = Field(description="the node's newest finished run with a verdict, which the decision rests on")
    decision: Literal[tuple(AcceptanceRecord.Decision.values)]
    note: str = Field("", pattern=NoNul, max_length=2000,
                      description="why; needed to accept a node whose run FAILED")


class DecisionOut(Schema):
    record: UUID
    node: str
    run: UUID
    decision: str
    digest: str


def node_written(node, changes=None):
    node.refresh_from_db()
    return {"name": node.name, "id": node.id, "address": node.address, "port": node.port,
            "username": node.username, "python_path": node.python_path, "labels": node.labels or [],
            "status": node.status, "host_key_accepted": node.host_key_accepted, "changes": changes or {}}


def _node(name, **filters):
    found = Node.objects.filter(name=name, **filters).first() if "\x00" not in name else None
    if found is None:
        raise Http404("no %snode %r" % ("SSH " if filters else "", name[:100]))
    return found


def node_create(request, body):
    """POST nodes/: the add-node page's service (connect.ssh_node_create), audited as node.created."""
    if Node.objects.filter(name=body.name).exists():
        raise HttpError(409, "a node named %r exists" % body.name)
    if bool(body.credential) == bool(body.private_key):
        raise HttpError(400, "give either credential (a stored credential's name) or private_key")
    credential = None
    if body.credential:
        credential = SSHCredential.objects.filter(name=body.credential).first()
        if credential is None:
            raise HttpError(400, "no stored credential named %r" % body.credential)
    try:
        with transaction.atomic():
            node = connect.ssh_node_create(name=body.name, address=body.address, port=body.port,
                                           username=body.username, python_path=body.python_path, labels=body.labels,
                                           private_key=body.private_key or None, credential=credential,
                                           created_by=request.auth)
    except validators.NodeFieldError as exc:
        raise HttpError(400, "%s: %s" % (exc.field, exc))
    except AuthFailed as exc:
        raise HttpError(400, "private_key: %s" % exc)
    except IntegrityError:
        raise HttpError(409, "a node named %r exists" % body.name)
    return Status(201, node_written(node))


def node_change(request, name, body):
    """PATCH nodes/<name>/: the edit page's service (node_services.node_edit): a new address or port drops the
    pinned host key, as there."""
    target = _node(name, transport=Node.Transport.SSH)
    values = body.dict(exclude_unset=True)
    values = {field: value for field, value in values.items() if value is not None}
    if not values:
        raise HttpError(400, "nothing to change: give address, port, username, python_path or labels")
    try:
        target, changes = node_services.node_edit(node=target, changed_by=request.auth, **values)
    except validators.NodeFieldError as exc:
        raise HttpError(400, "%s: %s" % (exc.field, exc))
    return node_written(target, changes)


def node_delete(request, name):
    """DELETE nodes/<name>/: audited as node.deleted (as the admin's delete is). 409 while a run is live, or once
    an acceptance decision was recorded on the node (that record is evidence and outlives nothing it rests on)."""
    target = _node(name)
    try:
        node_services.node_delete(node=target, deleted_by=request.auth, via="api")
    except node_services.NodeInUse as exc:
        raise HttpError(409, str(exc))
    return {"name": target.name, "deleted": True}


@router.post("/nodes/{name}/host-key/accept/", response={200: HostKeyAccepted, **ERRORS},
             url_name="node_host_key_accept", summary="Accept a node's host key, with the fingerprint expected (admin)",
             description="Accepts the key a worker read from the node (the node page's Connect and show the host "
                         "key), or the `key` given (a known_hosts or ssh-keyscan line's type and base64), only if "
                         "its SHA256 fingerprint is `fingerprint`; audited as host_key.accepted, as on the page. "
                         "404: no such SSH node. 409: no key read yet, the key has another fingerprint, or another key "
                         "is accepted already (nothing changes).")
def node_host_key_accept(request, body: HostKeyAcceptIn, name: str = Path(..., example="gpu-0042")):
    target = _node(name, transport=Node.Transport.SSH)
    if body.key:
        try:
            parts = body.key.split()
            if parts and not parts[0].startswith(known_hosts.KEY_TYPE_STARTS):  # a known_hosts line: names first
                parts = parts[1:]
            if len(parts) < 2:
                raise known_hosts.KnownHostsError("key: give `type base64`, e.g. `ssh-ed25519 AAAA...`")
            host_keys = known_hosts.known_hosts_read("%s %s %s" % (
                ssh.known_hosts_name(target.address, target.port), parts[0], parts[1]))
            host_key, pinned = known_hosts.host_key_pin_from_file(
                node=target, host_keys=host_keys, fingerprints={body.fingerprint}, user=request.auth, via="api")
        except known_hosts.KnownHostsError as exc:
            raise HttpError(409 if "refused" in str(exc) else 400, str(exc))
        except node_services.HostKeyConflict as exc:
            raise HttpError(409, str(exc))
    else:
        stored = target.host_key if hasattr(target, "host_key") else None
        if stored is None:
            raise HttpError(409, "no host key was read from %s yet: fetch it (node page), or send `key`" % target.name)
        if stored.accepted:
            if stored.fingerprint_sha256 != body.fingerprint:
                raise HttpError(409, "node %s has another accepted host key (%s %s): nothing was changed" % (
                    target.name, stored.key_type, stored.fingerprint_sha256))
            host_key, pinned = stored, False
        else:
            try:
                host_key = node_services.host_key_accept(node=target, user=request.auth, fingerprint=body.fingerprint,
                                                         via="api")
            except node_services.HostKeyChanged:
                raise HttpError(409, "the host key read from %s is %s %s, not %s: nothing was accepted" % (
                    target.name, stored.key_type, stored.fingerprint_sha256, body.fingerprint))
            pinned = True
    return {"node": target.name, "key_type": host_key.key_type, "fingerprint": host_key.fingerprint_sha256,
            "accepted_now": pinned}


@router.post("/nodes/{name}/decision/", response={201: DecisionOut, **ERRORS}, url_name="node_decision",
             summary="Accept or quarantine a node on a run (operator)",
             description="The onboarding page's decision (fleet.services.acceptance_decide): it rests on the node's "
                         "newest finished run with a verdict, keeps a snapshot of the evidence with its digest, and is "
                         "audited as node.accepted or node.quarantined. 404: no such node, or the run is not one of "
                         "its. 409: a newer run has finished, or the run has no verdict, or a FAILED run accepted "
                         "without a note.")
def node_decision(request, body: DecisionIn, name: str = Path(..., example="gpu-0042")):
    target = _node(name)
    run = ValidationRun.objects.filter(id=body.run, node=target).first()
    if run is None:
        raise Http404("run %s is not one of %s's" % (body.run, target.name))
    newest = decidable_run(node=target)
    if newest is not None and newest.id != run.id:
        raise HttpError(409, "a newer run of %s has finished: the decision rests on it (run %s)" % (
            target.name, newest.id))
    try:
        record = fleet_services.acceptance_decide(node=target, run=run, decision=body.decision, user=request.auth,
                                                  note=body.note)
    except ValueError as exc:
        raise HttpError(409, str(exc))
    return Status(201, {"record": record.id, "node": target.name, "run": run.id, "decision": record.decision,
                        "digest": record.digest})

