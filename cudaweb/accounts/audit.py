"""Writing the audit log: `record(action, ...)` from any app (this is the floor: every app may import it).

Who and from where come from the request being served (AuditContextMiddleware keeps it for the code it calls), so
a service deep below a page records the page's user and address without being handed the request."""

import contextvars
import ipaddress
import json

from django.conf import settings
from python_ipware import IpWare
from django.core.serializers.json import DjangoJSONEncoder

from cudaweb.accounts.models import AuditEvent

# Every action the dashboard records, for the audit page's filter. A new action is added here.
ACTIONS = {
    "login.succeeded": "logged in",
    "login.failed": "failed to log in",
    "role.changed": "role groups changed",
    "user.flags_changed": "superuser, staff or active changed",
    "validation.requested": "validation requested",
    "validation.bulk_requested": "validations requested in bulk",
    "network_test.requested": "network test requested",
    "node.accepted": "node accepted into the fleet",
    "node.quarantined": "node quarantined",
    "acceptance.bundle_exported": "evidence bundle (RMA) downloaded",
    "host_key.fetched": "host key fetched",
    "host_key.accepted": "host key accepted",
    "host_key.created": "host key added (admin)",
    "host_key.changed": "host key changed (admin)",
    "host_key.deleted": "host key deleted (admin)",
    "credential.created": "SSH credential created",
    "credential.used": "SSH credential used to log in to a node (its host key verified)",
    "credential.changed": "SSH credential changed (admin)",
    "credential.deleted": "SSH credential deleted",
    "node.created": "node added",
    "node.changed": "node changed",
    "node.deleted": "node deleted",
    "schedule.created": "schedule created",
    "schedule.deleted": "schedule deleted",
    "threshold.created": "drift threshold set",
    "threshold.changed": "drift threshold changed",
    "threshold.deleted": "drift threshold removed",
    "fabric_expectation.created": "fabric expectation set (admin)",
    "fabric_expectation.changed": "fabric expectation changed (admin)",
    "fabric_expectation.deleted": "fabric expectation removed (admin)",
    # The loop (cudaweb.health)
    "loop.transition": "node moved in the loop (ready, suspect, quarantined, remediating, revalidating, rma)",
    "loop.shadow_transition": "node would have moved in the loop (policy record, shadow mode)",
    "loop.breaker_opened": "circuit breaker opened",
    "loop.breaker_closed": "circuit breaker closed",
    "loop.bundle_downloaded": "rma evidence bundle (the loop's) downloaded",
    "loop_policy.created": "loop policy of a label created (before / after)",
    "loop_policy.changed": "loop policy of a label changed (before / after)",
    "loop_policy.deleted": "loop policy of a label deleted (its last settings)",
    "event.acknowledged": "health event acknowledged by an operator, with a note",
    # The token API (cudaweb/api): `manage.py api_token` issues and revokes.
    "token.issued": "API token issued",
    "token.revoked": "API token revoked",
    # Node credentials (cudaweb.nodes.report_credentials): what a node reports with, and what its reports did
    "node_credential.issued": "node credential issued (the earlier one revoked)",
    "node_credential.revoked": "node credential revoked",
    "node_credential.installed": "node credential written to the node over SSH",
    "node.report": "a node's own report opened or closed health events",
}

_request = contextvars.ContextVar("cudaweb_audit_request", default=None)


class AuditContextMiddleware:
    """Keeps the request being served for `record`, so services below the views know who acts and from where."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def client_address(request):
    """The client's address, for the audit log and for login lockouts (settings.AXES_CLIENT_IP_CALLABLE).

    X-Forwarded-For is believed only from the proxies named in CUDAWEB_TRUSTED_PROXIES (addresses or networks, one
    per hop, outermost first): the connection must come from the last of them, and each hop before it from the one
    before, as django-ipware's proxy list checks; the client is the entry just before the first of them. From any
    other peer the header is whatever that peer claimed and REMOTE_ADDR is the client. Never something that is not an
    IP address."""
    remote = _ip(request.META.get("REMOTE_ADDR"))
    proxies = getattr(settings, "CUDAWEB_TRUSTED_PROXIES", [])
    if not proxies or remote is None:
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")[:4000]
    if not forwarded.strip():
        return remote
    # The peer that connected to us is the last hop of the chain: ipware then checks every trusted hop, ours included.
    chain = {"HTTP_X_FORWARDED_FOR": "%s, %s" % (forwarded, remote)}
    found, _trusted_route = IpWare(precedence=("HTTP_X_FORWARDED_FOR",), proxy_list=list(proxies)).get_client_ip(chain)
    return _ip(str(found)) if found is not None else remote


def _ip(text):
    try:
        return str(ipaddress.ip_address((text or "").strip("[]")))
    except ValueError:
        return None


def _object_fields(obj):
    if obj is None:
        return {}
    return {"object_type": obj._meta.label_lower, "object_id": str(obj.pk or ""), "object_repr": str(obj)[:200]}


def record(action, *, request=None, actor=None, obj=None, **detail):
    """Append one event: `action` (a key of ACTIONS) by `actor` (default: the request's user) on `obj` (a model
    instance, or None), with `detail` as JSON. The request defaults to the one being served, if any."""
    if action not in ACTIONS:
        raise ValueError("unknown audit action %r: add it to cudaweb.accounts.audit.ACTIONS" % action)
    request = request or _request.get()
    if actor is None and request is not None and getattr(request, "user", None) is not None \
            and request.user.is_authenticated:
        actor = request.user
    address = client_address(request) if request is not None else None
    return AuditEvent.objects.create(
        action=action, actor=actor, actor_name=actor.get_username() if actor is not None else "",
        client_address=address, detail=json.loads(json.dumps(detail, cls=DjangoJSONEncoder)), **_object_fields(obj))


class AuditedAdmin:
    """A ModelAdmin mixin: additions, changes and deletions made in the admin go to the audit log as
    `<audit_name>.created / .changed / .deleted` (each must be in ACTIONS)."""

    audit_name = None

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        record("%s.%s" % (self.audit_name, "changed" if change else "created"), request=request, obj=obj,
               fields=sorted(form.changed_data), via="admin")

    def delete_model(self, request, obj):
        gone = Snapshot.of(obj)
        super().delete_model(request, obj)
        record("%s.deleted" % self.audit_name, request=request, obj=gone, via="admin")

    def delete_queryset(self, request, queryset):
        gone = [Snapshot.of(obj) for obj in queryset]
        super().delete_queryset(request, queryset)
        for snapshot in gone:
            record("%s.deleted" % self.audit_name, request=request, obj=snapshot, via="admin")


class Snapshot:
    """An object as it was (type, id, name), for `record` once it is deleted: take it before deleting."""

    def __init__(self, label, pk, text):
        self.pk, self._text = pk, text
        self._meta = type("Meta", (), {"label_lower": label})

    @classmethod
    def of(cls, obj):
        return cls(obj._meta.label_lower, obj.pk, str(obj))

    def __str__(self):
        return self._text
