"""manage.py prune_runs [--older-than-days N] [--keep-last M]: drop old runs and their check rows."""

from django.conf import settings
from django.core.management.base import BaseCommand

from cudaweb.validation.services import runs_prune


class Command(BaseCommand):
    help = ("Delete finished runs older than N days, keeping each node's M newest runs, its baseline, its last run "
            "and every run an acceptance record rests on (beat runs this daily with CUDAWEB_PRUNE_* settings).")

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=int, default=settings.CUDAWEB_PRUNE_DAYS)
        parser.add_argument("--keep-last", type=int, default=settings.CUDAWEB_PRUNE_KEEP_LAST)

    def handle(self, *args, **options):
        count = runs_prune(older_than_days=options["older_than_days"], keep_last=options["keep_last"])
        self.stdout.write("deleted %d run(s)" % count)
