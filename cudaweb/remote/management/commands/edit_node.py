"""manage.py edit_node NAME [--address A] [--port P] [--user U] [--python PATH] [--labels a,b] [--as USER]: change an
SSH node as its edit page does (cudaweb.nodes.services.node_edit): a new address or port drops the pinned host key
(accept the new one before any run), audited as node.changed with each old and new value."""

from django.core.management.base import BaseCommand

from cudaweb.cli import InputError, acting_user
from cudaweb.nodes import validators
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_edit


class Command(BaseCommand):
    requires_system_checks = []
    help = "Change an SSH node's address, port, user, Python or labels (as its edit page does)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--address")
        parser.add_argument("--port", type=int)
        parser.add_argument("--user", dest="username")
        parser.add_argument("--python", dest="python_path")
        parser.add_argument("--labels", help="comma separated: the node's labels from now on")
        parser.add_argument("--as", dest="as_user", help="the admin making the change (in the audit log)")

    def handle(self, *args, **options):
        node = Node.objects.filter(name=options["name"], transport=Node.Transport.SSH).first()
        if node is None:
            raise InputError("no SSH node named %r" % options["name"])
        user = acting_user(options["as_user"], "admin")  # the edit page's rule
        values = {field: options[field] for field in ("address", "port", "username", "python_path")
                  if options[field] is not None}
        if options["labels"] is not None:
            values["labels"] = [label.strip() for label in options["labels"].split(",") if label.strip()]
        if not values:
            raise InputError("nothing to change: give --address, --port, --user, --python or --labels")
        try:
            node, changes = node_edit(node=node, changed_by=user, **values)
        except validators.NodeFieldError as exc:
            raise InputError("%s: %s" % ({"username": "--user"}.get(exc.field, "--" + exc.field), exc)) from None
        for field, (old, new) in changes.items():
            self.stdout.write("%s %s: %s -> %s" % (node.name, field, old, new))
        if "address" in changes or "port" in changes:
            self.stdout.write("%s: host key dropped; accept the new one (accept_host_key %s --fingerprint ...)" % (
                node.name, node.name))
        if not changes:
            self.stdout.write("%s: nothing changed" % node.name)
