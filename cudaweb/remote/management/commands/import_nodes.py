"""manage.py import_nodes FILE [--format csv|ansible|scontrol] [--dry-run] [--credential NAME [--key-file KEY]]
[--labels a,b] [--user U] [--python PATH] [--known-hosts FILE [--fingerprint FP]... [--fingerprints FILE]] [--as USER]:
register or update nodes from a CSV file, an Ansible INI inventory or `scontrol show nodes` output, in one transaction
(nothing is kept when a line is wrong); with --known-hosts, pin each SSH node's host key from a known_hosts file or
ssh-keyscan output (only keys with a fingerprint given, when any is), in the same transaction."""

from django.core.management.base import BaseCommand
from django.db import transaction

from cudaweb.cli import InputError, acting_user
from cudaweb.nodes.models import Node, SSHCredential
from cudaweb.nodes.services import HostKeyConflict, node_register_local, ssh_credential_store
from cudaweb.remote import known_hosts
from cudaweb.remote.connect import private_key_check, ssh_node_create
from cudaweb.remote.transports import ssh
from cudaweb.remote.transports.base import AuthFailed
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
        parser.add_argument("--credential", help="a stored SSH credential every imported node logs in with (with "
                            "--key-file: the name that key is stored under)")
        parser.add_argument("--key-file", help="a private key every imported SSH node logs in with: read now, checked "
                            "and stored encrypted as the credential --credential names")
        parser.add_argument("--labels", default="", help="comma separated, added to every node's own labels")
        parser.add_argument("--user", default="", help="login for the nodes whose file names none")
        parser.add_argument("--python", default="", help="the nodes' interpreter that has torch (new nodes: default "
                            "python3)")
        parser.add_argument("--known-hosts", help="pin each SSH node's host key from this known_hosts file or "
                            "ssh-keyscan output (matched by address, [address]:port off port 22, hashed names too)")
        parser.add_argument("--fingerprint", action="append", default=[], help="with --known-hosts: accept only keys "
                            "with this SHA256 fingerprint (repeat it; or --fingerprints FILE)")
        parser.add_argument("--fingerprints", help="with --known-hosts: a file of SHA256 fingerprints, one a line "
                            "(`ssh-keygen -lf` output is read too)")
        parser.add_argument("--as", dest="as_user", help="the admin accepting the keys of --known-hosts and storing "
                            "--key-file (recorded on each and in the audit log); default: the command only")

    def handle(self, *args, **options):
        path = options["file"]
        try:
            text = self.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
        credential, key = None, None
        if options["key_file"]:
            if not options["credential"]:
                raise InputError("--key-file needs --credential NAME: the name the key is stored under")
            key = self._read(options["key_file"])
            try:
                private_key_check(key)
            except AuthFailed as exc:
                raise InputError("%s: %s" % (options["key_file"], exc)) from None
        elif options["credential"]:
            credential = SSHCredential.objects.filter(name=options["credential"]).first()
            if credential is None:
                raise InputError("no stored credential named %r" % options["credential"])
        extra = [label.strip() for label in options["labels"].split(",") if label.strip()]
        host_keys, fingerprints = self._host_keys(options)
        accepter = acting_user(options["as_user"], "admin")  # accepting host keys, storing keys: an admin's
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
            if key is not None:
                try:
                    credential = ssh_credential_store(name=options["credential"], private_key=key,
                                                      created_by=accepter, via="manage.py import_nodes --key-file")
                except ValueError as exc:
                    raise InputError(str(exc)) from None
            for entry in entries:
                outcome = self._import(entry, credential, options["dry_run"], options["python"])
                counts[outcome] += 1
                self.stdout.write("%-9s %s (line %d)" % (outcome, entry["name"], entry["line"]))
            if host_keys is not None:
                self._pin(entries, host_keys, fingerprints, accepter, options)
            if options["dry_run"]:
                transaction.set_rollback(True)
        self.stdout.write("%s%d nodes read as %s: %d created, %d updated, %d unchanged" % (
            "dry run, nothing changed: " if options["dry_run"] else "", len(entries), fmt, counts["created"],
            counts["updated"], counts["unchanged"]))

    def _host_keys(self, options):
        """The known_hosts file's keys and the fingerprints given (None without --known-hosts); every error here is
        the command's input's."""
        if not options["known_hosts"]:
            if options["fingerprint"] or options["fingerprints"]:
                raise InputError("--fingerprint and --fingerprints check the keys of --known-hosts FILE: give it")
            return None, None
        try:
            host_keys = known_hosts.known_hosts_read(self._read(options["known_hosts"]))
            fingerprints = None
            if options["fingerprint"] or options["fingerprints"]:
                fingerprints = {known_hosts.fingerprint_check(text) for text in options["fingerprint"]}
                if options["fingerprints"]:
                    fingerprints |= known_hosts.fingerprints_read(self._read(options["fingerprints"]))
            return host_keys, fingerprints
        except known_hosts.KnownHostsError as exc:
            raise InputError(str(exc)) from None

    def _read(self, path):
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)) from None

    def _pin(self, entries, host_keys, fingerprints, accepter, options):
        """Pin every imported SSH node's key from the file, or nothing at all: a node without a key there, or whose
        keys have none of the fingerprints given, is named and the whole import rolled back."""
        errors, lines = [], []
        for entry in entries:
            if entry["transport"] != "ssh":
                continue
            if options["dry_run"] and not Node.objects.filter(name=entry["name"]).exists():
                probe = Node(name=entry["name"], address=entry["address"], port=entry["port"])
                try:
                    key = known_hosts.node_key_choose(host_keys, probe, fingerprints)
                    lines.append("host key  %s %s %s (would be accepted)" % (
                        entry["name"], key.get_name(), ssh.fingerprint(key)))
                except known_hosts.KnownHostsError as exc:
                    errors.append("line %d: %s" % (entry["line"], exc))
                continue
            node = Node.objects.get(name=entry["name"])
            try:
                host_key, pinned = known_hosts.host_key_pin_from_file(
                    node=node, host_keys=host_keys, fingerprints=fingerprints, user=accepter,
                    via="manage.py import_nodes --known-hosts")
            except (known_hosts.KnownHostsError, HostKeyConflict) as exc:
                errors.append("line %d: %s" % (entry["line"], exc))
                continue
            lines.append("host key  %s %s %s (%s)" % (node.name, host_key.key_type, host_key.fingerprint_sha256,
                                                      "accepted" if pinned else "accepted already"))
        if errors:
            raise InputError("%s: nothing imported, no host key accepted:\n  %s" % (
                options["known_hosts"], "\n  ".join(errors)))
        for line in lines:
            self.stdout.write(line)

    def _import(self, entry, credential, dry_run, python=""):
        node = Node.objects.filter(name=entry["name"]).first()
        wanted = {"address": entry["address"], "port": entry["port"], "username": entry["user"],
                  "labels": entry["labels"], "transport": entry["transport"]}
        if python and entry["transport"] == "ssh":
            wanted["python_path"] = python
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
