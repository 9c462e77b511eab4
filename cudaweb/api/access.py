"""Who may call what in the token API: the role each API URL needs, per method (the API's own rule table, beside
the pages' cudaweb/fleet/access.py and with the same roles). tests/api/test_access.py walks the API's URL conf and
fails on an API URL without a rule here.

A token acts with its user's role. A method a rule does not name is answered 405 before any token is looked at:
the OpenAPI document, which anyone may read, says the same."""

from cudaweb.accounts.roles import ROLES

VIEWER, OPERATOR, ADMIN = ROLES
PUBLIC = "public"  # no token needed
NODE = "node"  # a node's own credential (cudaweb.nodes.report_credentials), for its own node only; no user's token

RULES = {
    "api:api-root": {"GET": PUBLIC},  # django-ninja's mark of where the API starts: 404 to every method
    "api:openapi-json": {"GET": PUBLIC},
    "api:nodes": {"GET": VIEWER, "POST": ADMIN},  # POST: add a node, as the add-node page (fleet_ops.py)
    "api:node": {"GET": VIEWER, "PATCH": ADMIN, "DELETE": ADMIN},  # change or delete: an admin's, as the pages
    "api:node_validate": {"POST": OPERATOR},
    "api:node_host_key_accept": {"POST": ADMIN},  # fleet:host_key_accept's role
    "api:node_decision": {"POST": OPERATOR},  # fleet:onboard_decide's role
    "api:run": {"GET": VIEWER},
    "api:run_junit": {"GET": VIEWER},
    "api:triage": {"POST": VIEWER},
    "api:audit": {"GET": ADMIN},
    "api:network_tests": {"POST": OPERATOR},
    "api:network_test": {"GET": VIEWER},
    "api:events": {"GET": VIEWER},
    "api:event": {"GET": VIEWER},
    "api:event_acknowledge": {"POST": OPERATOR},
    "api:node_watch_report": {"POST": NODE},  # the node-local health command, with the node's own credential
    "api:node_credential": {"POST": ADMIN, "DELETE": ADMIN},
}


def role_needed(view_name, method):
    """The role an API request needs, PUBLIC, or None (no rule: nobody may)."""
    rule = RULES.get(view_name)
    if rule is None:
        return None
    return rule.get("GET" if method == "HEAD" else method)
