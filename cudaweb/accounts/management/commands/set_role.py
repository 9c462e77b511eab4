"""`manage.py set_role USER viewer|operator|admin|none [--create]`: put a user in exactly one role group; --create
makes the user first (no password: `manage.py changepassword USER` sets one)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from cudaweb.accounts.roles import ROLES, role_of, role_set
from cudaweb.cli import InputError


class Command(BaseCommand):
    help = "Give USER one role (viewer, operator or admin), or none."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=ROLES + ("none",))
        parser.add_argument("--create", action="store_true",
                            help="create USER first, without a password (set one with manage.py changepassword USER)")

    def handle(self, *args, username, role, create=False, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None and not create:
            raise InputError("no user %r (--create makes one)" % username)
        if user is None:
            user = User.objects.create_user(username=username)  # no password given: an unusable one, no login yet
            self.stdout.write("created user %s; set a password with: python manage.py changepassword %s"
                              % (username, username))
        role_set(user=user, role=None if role == "none" else role)
        note = " (a superuser: admin whatever the groups say)" if user.is_superuser else ""
        self.stdout.write("%s: %s%s" % (username, role_of(user) or "no role", note))
