"""manage.py rotate_credential_key: re-encrypt every stored SSH private key with the newest credential key (the first
of CUDAWEB_CREDENTIAL_KEYS), in one transaction. Afterwards the older keys may be dropped from the list."""

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand
from django.db import transaction

from cudaweb.cli import InputError
from cudaweb.nodes.services import credentials_rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored SSH private key with the newest key of CUDAWEB_CREDENTIAL_KEYS."

    def handle(self, *args, **options):
        try:
            with transaction.atomic():
                count = credentials_rotate()
        except ImproperlyConfigured as exc:
            raise InputError("%s; nothing was changed" % exc)
        self.stdout.write("%d stored keys re-encrypted with the newest credential key" % count)
