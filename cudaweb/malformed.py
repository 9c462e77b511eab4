"""Requests no page can read are answered 400 here, before any page, the session or the CSRF check reads them:
what would otherwise end in a server error (issue 29).

- A form (urlencoded or multipart) is UTF-8: every page's form says so (`<meta charset>`), and Django's parser would
  decode another charset's bytes as UTF-8 and fail (latin-1, utf-16, ascii, the alias UTF8, a name that is no
  codec). A charset other than utf-8, or a urlencoded body that is not UTF-8, is refused.
- A NUL character in the path, the query or a cookie: PostgreSQL's text refuses it (`/runs/<id>/evidence/%00.txt`,
  a sessionid cookie, an admin list filter), and no name, id or filter of ours holds one.
- A Content-Length that is no number (Django reads it with int())."""

import re

from django.http import HttpResponseBadRequest

from cudaweb.common import numbers

FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")
CHARSET = re.compile(r";\s*charset\s*=\s*\"?([^\";\s]*)", re.IGNORECASE)


def _refusal(request):
    length = request.META.get("CONTENT_LENGTH", "")
    if length and numbers.integer(length) is None:  # "²".isdigit() is true, and Django's int() then raises
        return "Content-Length %r is not a number" % length[:40]
    if "\x00" in request.path or "\x00" in request.META.get("QUERY_STRING", "") or "\x00" in request.path_info:
        return "a NUL character in the URL"
    if any("\x00" in name or "\x00" in value for name, value in request.COOKIES.items()):
        return "a NUL character in a cookie"
    if any("\x00" in value for values in request.GET.lists() for value in [values[0]] + values[1]):
        return "a NUL character in the query"
    content_type = request.META.get("CONTENT_TYPE", "")
    if content_type.split(";", 1)[0].strip().lower() in FORMS:
        found = CHARSET.search(content_type)
        if found and found.group(1).lower() != "utf-8":
            return "forms are sent as UTF-8, not %r" % found.group(1)[:40]
        if content_type.lower().startswith(FORMS[0]):
            try:
                request.body.decode("utf-8")
            except UnicodeDecodeError:
                return "this form is not UTF-8"
    return None


class MalformedRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = _refusal(request)
        if refusal is not None:
            return HttpResponseBadRequest("Bad request: %s.\n" % refusal, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
