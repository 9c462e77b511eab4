"""Who may do what: the role each URL needs, per method. The one source of truth for the pages (`guarded` enforces
it) and for the templates (`may` hides what a role cannot use); tests/fleet/test_access.py walks the URL conf and
fails on a URL without a rule here.

A method a rule does not name (GET on a POST-only action, OPTIONS, ...) needs the rule's lowest role and is then
answered by the view (405 for a POST-only one). HEAD is GET."""

import logging
from functools import wraps

from django.core.exceptions import PermissionDenied

from cudaweb.accounts.roles import ROLES, has_role, role_enforce

log = logging.getLogger(__name__)

VIEWER, OPERATOR, ADMIN = ROLES

RULES = {
    # Fleet and nodes
    "fleet:node_list": {"GET": VIEWER},
    "fleet:nodes_validate": {"POST": OPERATOR},
    "fleet:node_add": {"GET": ADMIN, "POST": ADMIN},  # a node and its SSH credential
    "fleet:node_detail": {"GET": VIEWER},
    "fleet:node_edit": {"GET": ADMIN, "POST": ADMIN},  # where the worker connects: an admin's, like adding a node
    "fleet:node_validate": {"POST": OPERATOR},
    "fleet:node_baseline": {"POST": OPERATOR},
    "fleet:host_key_fetch": {"POST": ADMIN},
    "fleet:host_key_accept": {"POST": ADMIN},
    "fleet:node_credential": {"POST": ADMIN},  # a node's own report credential: issued (shown once) or revoked
    # The loop (cudaweb.health): an operator's word on a node, the breaker an admin closes, an rma bundle
    "fleet:node_loop_decide": {"POST": OPERATOR},
    "fleet:breaker_close": {"POST": ADMIN},
    "fleet:rma_bundle": {"GET": OPERATOR},
    "fleet:loop_policies": {"GET": ADMIN, "POST": ADMIN},  # the loop's policies per label: what it may do to nodes
    "fleet:loop_policy_edit": {"GET": ADMIN, "POST": ADMIN},
    "fleet:loop_policy_delete": {"POST": ADMIN},
    "fleet:events": {"GET": VIEWER},
    "fleet:event_detail": {"GET": VIEWER},
    "fleet:event_acknowledge": {"POST": OPERATOR},
    # Onboarding: everyone may follow it; validating and deciding are an operator's
    "fleet:node_onboard": {"GET": VIEWER},
    "fleet:onboard_validate": {"POST": OPERATOR},
    "fleet:onboard_decide": {"POST": OPERATOR},
    "fleet:acceptance_detail": {"GET": OPERATOR},
    "fleet:acceptance_json": {"GET": OPERATOR},
    "fleet:acceptance_bundle": {"GET": OPERATOR},  # the RMA evidence zip: as much as the record's JSON, and more
    # Runs
    "runs:run_detail": {"GET": VIEWER},
    "runs:run_fragment": {"GET": VIEWER},
    "runs:check_evidence": {"GET": VIEWER},
    "runs:batch": {"GET": VIEWER},
    "runs:batch_fragment": {"GET": VIEWER},
    "runs:compare": {"GET": VIEWER},
    "runs:compare_pick": {"GET": VIEWER},
    "runs:schedules": {"GET": VIEWER, "POST": ADMIN},
    "runs:schedule_delete": {"POST": ADMIN},
    # Playbooks and triage
    "playbooks:list": {"GET": VIEWER},
    "playbooks:detail": {"GET": VIEWER},
    "playbooks:triage": {"GET": VIEWER, "POST": VIEWER},
    "playbooks:vote": {"POST": OPERATOR},
    # Network tests
    "network:list": {"GET": VIEWER},
    "network:start": {"POST": OPERATOR},
    "network:detail": {"GET": VIEWER},
    # The audit log
    "audit:list": {"GET": ADMIN},
    "audit:export_csv": {"GET": ADMIN},
    "audit:export_json": {"GET": ADMIN},
}

# URLs outside this table, by URL name or namespace, each with who checks it instead; tests/fleet/test_access.py
# skips them and fails on an entry that names no URL.
EXEMPT = {
    "api": "the token API (/api/v1/) checks Bearer tokens and roles itself: cudaweb/api/access.py, walked by "
           "tests/api/test_access.py",
    "metrics": "a Bearer token of any role or CUDAWEB_METRICS_TOKEN (cudaweb/api/metrics.py, tests/api/test_metrics.py)",
    "healthz": "open to all: it tells only whether the database, the broker and a worker work (tests/api/test_health.py)",
}


def role_needed(view_name, method):
    """The role a request needs; None when the URL has no rule (then nobody may)."""
    rule = RULES.get(view_name)
    if rule is None:
        return None
    method = "GET" if method == "HEAD" else method
    return rule.get(method) or min(rule.values(), key=ROLES.index)


def may(user, view_name, method="POST"):
    """Whether `user` may send `method` to the URL named `view_name` (the templates hide what they may not)."""
    role = role_needed(view_name, method)
    return role is not None and has_role(user, role)


def guarded(view):
    """Every page's decorator: the rule of the URL the request resolved to, login first (anonymous -> the login
    page), then the role (else 403). A URL without a rule is refused to everyone."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        name = request.resolver_match.view_name if request.resolver_match else None
        role = role_needed(name, request.method)
        if role is None:
            log.error("no access rule for %s %s (cudaweb/fleet/access.py): refused", request.method, name)
            denied = role_enforce(request, ROLES[0])
            if denied:
                return denied
            raise PermissionDenied("no access rule for this page")
        return role_enforce(request, role) or view(request, *args, **kwargs)
    return wrapped
