"""manage.py import_nodes FILE [--format csv|ansible|scontrol] [--dry-run] [--credential NAME] [--labels a,b]
[--user U]: register or update nodes from a CSV file, an Ansible INI inventory or `scontrol show nodes` output, in
one transaction (nothing is kept when a line is wrong)."""

from django.core.management.base import BaseCommand
from django.db import transaction

from cudaweb.cli import InputError
from cudaweb.nodes.models import Node, SSHCredential
from cudaweb.nodes.services import node_register_local
from cudaweb.remote.connect import ssh_node_create
from cudaweb.remote.inventory import PARSERS, InventoryError, entry_check



def guess_format(path, text):
    if text.lstrip().startswith("NodeName="):
        return "scontrol"
    return "csv" if path.lower().endswith(".csv") else "ansible"


class Command(BaseCommand):
    help = "Register or update nodes from a CSV file, an Ansible INI inventory or `scontrol show nodes` output."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the file to read; '-' reads stdin")
        parser.add_argument("--format", choices=sorted(PARSERS), help="default: guessed from the file")
        parser.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
        parser.add_argument("--credential", help="a stored SSH credential every imported node logs in with")
        parser.add_argument("--labels", default="", help="comma separated, added to every node's own labels")
        parser.add_argument("--user", default="", help="login for the nodes whose file names none")

    def handle(self, *args, **options):
        path = options["file"]
        try:
            text = self.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
        credential = None
        if options["credential"]:
            credential = SSHCredential.objects.filter(name=options["credential"]).first()
            if credential is None:
                raise InputError("no stored credential named %r" % options["credential"])
        extra = [label.strip() for label in options["labels"].split(",") if label.strip()]
        fmt = options["format"] or guess_format(path, text)
        try:
            entries = PARSERS[fmt](text)
        except InventoryError as exc:
            raise InputError("%s: %s" % (path, exc))
        errors, seen = [], {}
        for entry in entries:
            entry["user"] = entry["user"] or options["user"]
            entry["labels"] = entry["labels"] + [label for label in extra if label not in entry["labels"]]
            try:
                entry_check(entry)
            except InventoryError as exc:
                errors.append(str(exc))
            if entry["name"] in seen:
                errors.append("line %d (%s): named on line %d already" % (entry["line"], entry["name"],
                                                                          seen[entry["name"]]))
            seen.setdefault(entry["name"], entry["line"])
        if not entries:
            errors.append("no nodes found (read as %s)" % fmt)
        if errors:
            raise InputError("%s: nothing imported:\n  %s" % (path, "\n  ".join(errors)))
        with transaction.atomic():
            counts = {"created": 0, "updated": 0, "unchanged": 0}
            for entry in entries:
                outcome = self._import(entry, credential, options["dry_run"])
                counts[outcome] += 1
                self.stdout.write("%-9s %s (line %d)" % (outcome, entry["name"], entry["line"]))
            if options["dry_run"]:
                transaction.set_rollback(True)
        self.stdout.write("%s%d nodes read as %s: %d created, %d updated, %d unchanged" % (
            "dry run, nothing changed: " if options["dry_run"] else "", len(entries), fmt, counts["created"],
            counts["updated"], counts["unchanged"]))

    def _import(self, entry, credential, dry_run):
        node = Node.objects.filter(name=entry["name"]).first()
        wanted = {"address": entry["address"], "port": entry["port"], "username": entry["user"],
                  "labels": entry["labels"], "transport": entry["transport"]}
        if entry["slurm_name"]:
            wanted["slurm_name"] = entry["slurm_name"]
        if credential is not None:
            wanted["credential_id"] = credential.id
        if entry["transport"] == "local":
            wanted.update(address=node.address if node else "127.0.0.1", port=22, username="")
        if node is None:
            if not dry_run:
                if entry["transport"] == "local":
                    node = node_register_local(name=entry["name"])
                else:  # the add_node path: the same model writes, the same key checks
                    node = ssh_node_create(name=entry["name"], address=entry["address"], port=entry["port"],
                                           username=entry["user"], labels=entry["labels"], credential=credential)
                Node.objects.filter(id=node.id).update(**wanted)
            return "created"
        changed = {field: value for field, value in wanted.items() if getattr(node, field) != value}
        if not changed:
            return "unchanged"
        if not dry_run:
            Node.objects.filter(id=node.id).update(**changed)
        return "updated"
