"""Startup checks (Django's system checks: `manage.py check`, `check --deploy`, runserver, migrate) for what the
login lockout and the audit log can tell apart: behind a proxy that is not named, every client is one address."""

import os

from django.conf import settings
from django.core import checks

RETIRED = ("CUDAWEB_TRUST_X_FORWARDED_FOR", "CUDAWEB_PROXY_COUNT")


@checks.register(checks.Tags.security)
def lockout_sees_every_client(app_configs=None, **kwargs):
    found = []
    if getattr(settings, "CUDAWEB_HTTPS", False) and not getattr(settings, "CUDAWEB_TRUSTED_PROXIES", []):
        found.append(checks.Warning(
            "CUDAWEB_HTTPS=1 says a proxy is in front, but CUDAWEB_TRUSTED_PROXIES names none: every client then has "
            "the proxy's address, so ten bad passwords from anyone lock that user out for everyone for %d minutes, "
            "and the audit log records the proxy, not the client." % (settings.AXES_COOLOFF_TIME.total_seconds() // 60),
            hint="Set CUDAWEB_TRUSTED_PROXIES to the proxy's address as the web server sees it (an address or "
                 "network, one per hop, outermost first); X-Forwarded-For is then believed from it alone.",
            id="cudaweb.W001"))
    for name in RETIRED:
        if name in os.environ:
            found.append(checks.Warning(
                "%s is no longer read: X-Forwarded-For is believed only from the proxies in "
                "CUDAWEB_TRUSTED_PROXIES." % name, hint="Name the proxy in CUDAWEB_TRUSTED_PROXIES.",
                id="cudaweb.W002"))
    return found
