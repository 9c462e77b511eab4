"""Roles: three Django groups, each allowing what the one below it does and more. Superusers count as admin.

viewer reads pages, reports and playbooks and triages logs; operator also validates, tests the network, votes and
accepts or quarantines nodes; admin also manages nodes, credentials, host keys, schedules, thresholds, users and
tokens. A user in no role group reaches the login and logout pages only."""

from functools import wraps

from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import transaction

ROLES = ("viewer", "operator", "admin")  # lowest first


def _rank(role):
    if role not in ROLES:
        raise ValueError("unknown role %r (one of %s)" % (role, ", ".join(ROLES)))
    return ROLES.index(role)


def role_of(user):
    """The highest role `user` holds, or None (anonymous, inactive, or in no role group)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return "admin"
    if not hasattr(user, "_cudaweb_role"):  # once per request: a page asks for each button it shows
        names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        user._cudaweb_role = next((role for role in reversed(ROLES) if role in names), None)
    return user._cudaweb_role


def has_role(user, role):
    """Whether `user` holds `role` or a higher one."""
    held = role_of(user)
    return held is not None and _rank(held) >= _rank(role)


def role_enforce(request, role):
    """None when the request's user holds `role`; a redirect to the login page when nobody is logged in; raises
    PermissionDenied (the 403 page) otherwise."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not has_role(request.user, role):
        raise PermissionDenied("this needs the %s role" % role)
    return None


def role_required(role):
    """Decorator for function views: login first, then `role` (or higher), else 403."""
    _rank(role)

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            return role_enforce(request, role) or view(request, *args, **kwargs)
        return wrapped
    return decorator


@transaction.atomic
def role_set(*, user, role):
    """Put `user` in exactly the group of `role`, or in none when `role` is None."""
    if role is not None:
        _rank(role)
    # Only the groups the user is in: a remove signal names every group it is given (the audit log would lie).
    user.groups.remove(*user.groups.filter(name__in=[r for r in ROLES if r != role]))
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role)[0])  # a flushed test database has none
    try:
        del user._cudaweb_role
    except AttributeError:
        pass
