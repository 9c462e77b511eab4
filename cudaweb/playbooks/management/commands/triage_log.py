"""manage.py triage_log FILE [FILE ...] [--json]: rank the playbooks for each log ('-' reads stdin)."""

import json
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from cudaweb.cli import InputError
from cudaweb.playbooks.matcher import triage


class Command(BaseCommand):
    help = "Match logs or tracebacks against the playbook library."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help="log files; '-' reads standard input")
        parser.add_argument("--json", action="store_true", help="print a JSON list, one object per input")

    def _read(self, name):
        cap = settings.CUDAWEB_TRIAGE_CAP
        try:
            if name == "-":
                return sys.stdin.buffer.read(cap).decode("utf-8", "replace")
            with open(name, "rb") as fh:
                return fh.read(cap).decode("utf-8", "replace")
        except OSError as exc:
            raise InputError("cannot read %s: %s" % (name, exc.strerror or exc))

    def handle(self, *args, **options):
        results = [{"input": name, **triage(self._read(name)).as_dict()} for name in options["files"]]
        if options["json"]:
            self.stdout.write(json.dumps(results, indent=2))
            return
        for result in results:
            self.stdout.write("== %s" % result["input"])
            if not any(m["basis"] == "rules" for m in result["playbooks"]):
                self.stdout.write("  no match%s" % ("; below, a guess" if result["playbooks"] else ""))
            for match in result["playbooks"]:
                how = "then " if match["then"] else \
                    {"partial": "partial ", "similar": "similar "}.get(match["basis"], "")
                self.stdout.write("  %.2f  %s%-24s %s" % (match["score"], how, match["id"], match["title"]))
                if match["similar_to"]:
                    self.stdout.write("        similar to %s" % match["similar_to"]["source"])
                for hit in match["knowledge"][:3]:
                    self.stdout.write("        %s (%s): %s" % (hit["name"], hit["table"], hit["meaning"][:100]))
                for line in match["evidence"][:3]:
                    self.stdout.write("        | %s" % line)
            if result["facts"]:
                self.stdout.write("  facts: %s" % ", ".join("%s=%s" % kv for kv in sorted(result["facts"].items())))
            for kind in [k for k in result["oom_kinds"] if k["shown"]][:3]:
                self.stdout.write("  OOM kind %s: %s" % (kind["kind"], kind["reason"]))
