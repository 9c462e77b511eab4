"""What every management command exits with: 0 pass, 1 a warning or failure verdict, 2 a usage or input error,
3 a run that could not complete (README, "Exit codes")."""

from django.core.management.base import CommandError

EXIT_PASS, EXIT_FINDINGS, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


NO_DASHBOARD = ("no dashboard is running here: `make run` is stopped (var/runtime.env is gone) and REDIS_URL is not "
                "set, so nothing was queued. Start `make run`, or set REDIS_URL to the dashboard's Redis")


def dashboard_or_exit(stderr, code=EXIT_INCOMPLETE):
    """Exit 3 saying no dashboard runs, when no Redis is named (cudaweb.settings.CUDAWEB_NO_DASHBOARD): the default
    127.0.0.1:6379 may be someone else's Redis, which would take the runs and never run them."""
    from django.conf import settings

    if getattr(settings, "CUDAWEB_NO_DASHBOARD", False):
        stderr.write(NO_DASHBOARD)
        raise SystemExit(code)


class InputError(CommandError):
    """A usage or input error: exits 2 (Django's CommandError exits 1, which is a failure verdict here)."""

    def __init__(self, *args, returncode=EXIT_USAGE, **kwargs):
        super().__init__(*args, returncode=returncode, **kwargs)


def acting_user(username, role):
    """The user a command acts as (`--as USER`): an active user with `role`, as the page doing the same asks
    (cudaweb/fleet/access.py); None without a name (the audit row then names the command only)."""
    if not username:
        return None
    from django.contrib.auth import get_user_model

    from cudaweb.accounts.roles import has_role

    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise InputError("--as: no active user named %r" % username)
    if not has_role(user, role):
        raise InputError("--as: %s does not have the %s role this needs" % (username, role))
    return user
