"""`manage.py api_token USER [--name N] [--revoke ID] [--list]`: issue (the default), revoke or list a user's tokens."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from cudaweb.accounts.roles import role_of
from cudaweb.api.models import ApiToken
from cudaweb.api.services import token_issue, token_revoke
from cudaweb.cli import InputError


class Command(BaseCommand):
    help = "Issue an API token for USER (printed once), or revoke or list USER's tokens."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for (e.g. ci, prometheus)")
        parser.add_argument("--revoke", type=int, metavar="ID", help="revoke the token with this id")
        parser.add_argument("--list", action="store_true", dest="list_tokens", help="list the user's tokens")

    def handle(self, *args, username, name, revoke, list_tokens, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise InputError("no user %r" % username)
        if revoke is not None:
            token = ApiToken.objects.filter(id=revoke, user=user).first()
            if token is None:
                raise InputError("%s has no token %d" % (username, revoke))
            done = token_revoke(token=token)
            self.stdout.write("token %d %s" % (token.id, "revoked" if done else "was already revoked"))
            return
        if list_tokens:
            for token in ApiToken.objects.filter(user=user):
                self.stdout.write("%d\t%s…\t%s\tcreated %s\tlast used %s\t%s" % (
                    token.id, token.prefix, token.name or "-", token.created.isoformat(timespec="seconds"),
                    token.last_used.isoformat(timespec="seconds") if token.last_used else "never",
                    "revoked" if token.revoked else "active"))
            return
        token, text = token_issue(user=user, name=name)
        role = role_of(user)
        self.stderr.write("token %d for %s (role: %s). Shown once; only its sha256 is kept." % (
            token.id, username, role or "none: every API call will be refused until set_role"))
        self.stdout.write(text)
