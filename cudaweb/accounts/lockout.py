"""How many failed logins lock a user name out (settings.AXES_FAILURE_LIMIT names `failure_limit`).

django-axes counts the failures of each of its AXES_LOCKOUT_PARAMETERS (the user name from this address; the user
name from any) and compares the largest count with one limit. The name's own count is never the smaller, so one
fixed limit would lock the name for everyone as soon as one address reached it: the limit given depends instead on
what this address has done."""

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.db.models import Sum

PAIR = ["username", "ip_address"]


def failure_limit(request, credentials):
    """CUDAWEB_LOGIN_FAILURE_LIMIT once this address has failed that often for the name (the pair is locked out),
    else CUDAWEB_LOGIN_USER_FAILURE_LIMIT, which the failures from every address together reach."""
    attempts = AxesProxyHandler.get_implementation().get_user_attempts(request, credentials)
    from_here = attempts[settings.AXES_LOCKOUT_PARAMETERS.index(PAIR)]
    failures = from_here.aggregate(total=Sum("failures_since_start"))["total"] or 0
    if failures >= settings.CUDAWEB_LOGIN_FAILURE_LIMIT:
        return settings.CUDAWEB_LOGIN_FAILURE_LIMIT
    return settings.CUDAWEB_LOGIN_USER_FAILURE_LIMIT
