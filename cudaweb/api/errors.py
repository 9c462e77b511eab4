"""Every error of the API as JSON, {"error": code, "detail": text}: from the API's own handlers, and, through
JsonErrorsMiddleware, from whatever Django answers under /api/ on its own (an unknown URL, a 405, a 500)."""

import json

from django.http import JsonResponse

API_PREFIX = "/api/"
CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type", 500: "server_error",
         503: "service_unavailable"}


def error_response(status, detail, *, headers=None):
    response = JsonResponse({"error": CODES.get(status, "error"), "detail": detail}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class JsonErrorsMiddleware:
    """Under /api/, an error response that is not JSON (Django's 404 and 500 pages, a bare 405, a 400 for a bad
    Host header) becomes a JSON error with the same status and headers: an API client never gets HTML."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path_info.startswith(API_PREFIX) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        replaced = error_response(response.status_code, response.reason_phrase or "error")
        for name in ("Allow", "WWW-Authenticate", "Retry-After"):
            if response.has_header(name):
                replaced[name] = response[name]
        return replaced


def json_detail(errors):
    """pydantic's errors, as one line a person can read: 'body.mode: Input should be ...; ...'."""
    parts = []
    for error in errors[:10]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        parts.append("%s: %s" % (where, error.get("msg", "invalid")) if where else error.get("msg", "invalid"))
    return "; ".join(parts) or json.dumps(errors)[:500]
