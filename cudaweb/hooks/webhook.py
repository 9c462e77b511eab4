"""POST a JSON document to a webhook (Slack-compatible) with the standard library."""

import json
import socket
import urllib.error
import urllib.parse
import urllib.request

from cudaweb.hooks.errors import Permanent, Transient


def shown(url):
    """A webhook URL as errors and logs may show it: scheme and host only (the path is the secret)."""
    parts = urllib.parse.urlsplit(url)
    return "%s://%s/..." % (parts.scheme, parts.hostname or "?")


def post_json(url, payload, timeout_s=10):
    """POST `payload` as JSON; return the status. 5xx, 429 and network failures are Transient, other 4xx Permanent."""
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "cudaweb-hooks"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        body = exc.read(300).decode("utf-8", "replace")
        error = Transient if exc.code >= 500 or exc.code == 429 else Permanent
        raise error("%s answered %s: %s" % (shown(url), exc.code, body))
    except (urllib.error.URLError, socket.timeout, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Transient("%s: %s" % (shown(url), reason))
