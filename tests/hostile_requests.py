"""Every URL of the dashboard with real ids, and the hostile ways of asking for it that once ended in a server error
(issue 29): a form in another charset, a NUL in the path, the query or the session cookie, a Content-Length that is
no number. Shared by tests/properties/test_hostile_requests.py (hypothesis, SQLite and PostgreSQL) and
bench/fuzz_5xx.py (>= 5,000 requests per database)."""

import uuid

from django.contrib import admin
from django.urls import URLResolver, get_resolver

CHARSETS = ["latin-1", "utf-16", "ascii", "UTF8", "iso-8859-15", "no-such-codec"]
QUERY_KEYS = ["q", "label", "status", "layer", "mode", "o", "p", "actor", "action", "since", "node", "gpu_model",
              "fragment", "all", "status__exact", "transport__exact", "drifted__exact"]


def seed():
    """One of each thing a URL can name; returns {parameter name: value}."""
    from django.contrib.auth import get_user_model

    from cudaweb.accounts.roles import role_set
    from cudaweb.fleet.services import acceptance_decide
    from cudaweb.network.models import NetworkTest
    from cudaweb.nodes.models import Node
    from cudaweb.playbooks import library
    from tests.drift.helpers import real_report, stored_run

    user = get_user_model().objects.create_user("fuzz-admin", password="fuzz-password-1")
    role_set(user=user, role="admin")
    node = Node.objects.create(name="gpu-fuzz", transport=Node.Transport.LOCAL, labels=["rack-07"])
    run = stored_run(node, real_report())
    record = acceptance_decide(node=node, run=run, decision="accepted", user=user, note="fuzz")
    test = NetworkTest.objects.create(plan=NetworkTest.Plan.MATRIX)
    test.nodes.add(node)
    from cudaweb.validation.models import CheckResult
    check = CheckResult.objects.filter(run=run).exclude(evidence="").first() or CheckResult.objects.filter(
        run=run).first()
    return {"user": user, "node_id": node.id, "name": node.name, "run_id": run.id, "run_a": run.id, "run_b": run.id,
            "record_id": record.id, "test_id": test.id, "check_id": check.check_id if check else "x",
            "playbook_id": next(iter(library.load())), "schedule_id": 1,
            "object_id": node.id}


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if str(pattern.pattern).startswith("admin/"):
                continue  # the admin's own URLs come from its registry (below)
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern)


def every_url(values):
    """Each route with its parameters filled from `values`, and each admin model's list, add and change page."""
    import re

    urls = []
    for route in _walk(get_resolver().url_patterns):
        route = route.lstrip("^").rstrip("$")
        filled = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values.get(m.group(1), uuid.uuid4())), route)
        urls.append("/" + filled.replace("\\", ""))
    for model, model_admin in admin.site._registry.items():
        base = "/admin/%s/%s/" % (model._meta.app_label, model._meta.model_name)
        first = model._default_manager.values_list("pk", flat=True).first()
        urls += [base, base + "add/"] + ([base + "%s/change/" % first] if first is not None else [])
    return sorted(set(urls))


def hostile(kind, url, text="é"):
    """(method, path, Django test client kwargs) of one hostile request for `url`."""
    if kind == "plain":
        return "get", url, {}
    if kind == "nul_path":
        return "get", url.rstrip("/") + "/%00" + ("/" if url.endswith("/") else ""), {}
    if kind == "nul_evidence":
        return "get", url + "%00.txt" if url.endswith("/") else url, {}
    if kind == "nul_query":
        from urllib.parse import quote
        return "get", url, {"QUERY_STRING": "&".join("%s=a%%00%s" % (key, quote(text)) for key in QUERY_KEYS)}
    if kind == "nul_cookie":
        return "get", url, {"HTTP_COOKIE": "sessionid=abc\x00def; csrftoken=x\x00"}
    if kind == "text_query":
        from urllib.parse import quote
        return "get", url, {"QUERY_STRING": "&".join("%s=%s" % (key, quote(text)) for key in QUERY_KEYS)}
    if kind.startswith("charset:"):
        charset = kind.split(":", 1)[1]
        body = ("text=%s&username=x&password=y&name=n&labels=%s" % (text, text)).encode("utf-16" if "16" in charset
                                                                                         else "latin-1", "replace")
        return "post", url, {"data": body, "content_type": "application/x-www-form-urlencoded; charset=%s" % charset}
    if kind == "bad_length":
        return "post", url, {"data": b"{}", "content_type": "application/json", "CONTENT_LENGTH": "abc"}
    if kind == "not_utf8_form":
        return "post", url, {"data": b"text=\xff\xfe\xfa", "content_type": "application/x-www-form-urlencoded"}
    raise ValueError(kind)


KINDS = ["plain", "nul_path", "nul_evidence", "nul_query", "nul_cookie", "text_query", "bad_length",
         "not_utf8_form"] + ["charset:%s" % c for c in CHARSETS]


def ask(client, kind, url, text="é", token=None):
    method, path, kwargs = hostile(kind, url, text)
    if token and path.startswith("/api/"):
        kwargs["HTTP_AUTHORIZATION"] = "Bearer %s" % token
    # generic(): the body goes as these bytes (post() would re-encode them in the charset the request names)
    return client.generic(method.upper(), path, kwargs.pop("data", b""), kwargs.pop("content_type", ""), **kwargs)
