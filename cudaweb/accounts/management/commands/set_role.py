"""`manage.py set_role USER viewer|operator|admin|none`: put a user in exactly one role group."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from cudaweb.accounts.roles import ROLES, role_of, role_set
from cudaweb.cli import InputError


class Command(BaseCommand):
    help = "Give USER one role (viewer, operator or admin), or none."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=ROLES + ("none",))

    def handle(self, *args, username, role, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise InputError("no user %r" % username)
        role_set(user=user, role=None if role == "none" else role)
        note = " (a superuser: admin whatever the groups say)" if user.is_superuser else ""
        self.stdout.write("%s: %s%s" % (username, role_of(user) or "no role", note))
