"""manage.py delete_node NAME [--as USER]: delete a node with its runs (cudaweb.nodes.services.node_delete), audited as
node.deleted; refused (exit 2) while a run is live or once an acceptance record names it (kept evidence)."""

from django.core.management.base import BaseCommand

from cudaweb.cli import InputError, acting_user
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import NodeInUse, node_delete


class Command(BaseCommand):
    requires_system_checks = []
    help = "Delete a node with its runs (refused while a run is live or once an acceptance decision names it)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--as", dest="as_user", help="the admin deleting it (in the audit log)")

    def handle(self, *args, **options):
        node = Node.objects.filter(name=options["name"]).first()
        if node is None:
            raise InputError("no node named %r" % options["name"])
        user = acting_user(options["as_user"], "admin")  # adding and deleting nodes: an admin's
        try:
            node_delete(node=node, deleted_by=user, via="manage.py delete_node")
        except NodeInUse as exc:
            raise InputError(str(exc)) from None
        self.stdout.write("%s deleted" % options["name"])
