"""manage.py accept_host_key NODE --fingerprint SHA256:... [--as USER]: read the host key NODE presents now (as the
node page's "Connect and show the host key" does, here synchronously) and accept it only if it has the fingerprint
given (from the host's console, its image build, your inventory). Exit 0 accepted (or that key was accepted already),
2 another key presented or accepted, an unknown node, a bad fingerprint; 3 the node could not be reached."""

from django.core.management.base import BaseCommand

from cudaweb.cli import EXIT_INCOMPLETE, InputError, acting_user
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import HostKeyConflict
from cudaweb.remote.known_hosts import KnownHostsError, host_key_accept_presented
from cudaweb.remote.transports.base import TransportError

VIA = "manage.py accept_host_key"


class Command(BaseCommand):
    requires_system_checks = []
    help = "Accept the SSH host key a node presents, only if it has the fingerprint you give."

    def add_arguments(self, parser):
        parser.add_argument("node", help="the node's name")
        parser.add_argument("--fingerprint", required=True, help="the key's SHA256 fingerprint, as `ssh-keygen -lf` "
                            "prints it on the host (SHA256:...)")
        parser.add_argument("--as", dest="as_user", help="the admin accepting it (recorded on the key and in the "
                            "audit log); default: the command only")

    def handle(self, *args, **options):
        node = Node.objects.filter(name=options["node"], transport=Node.Transport.SSH).first()
        if node is None:
            raise InputError("no SSH node named %r" % options["node"])
        user = acting_user(options["as_user"], "admin")  # the page's rule: accepting host keys is an admin's
        try:
            host_key, pinned = host_key_accept_presented(node=node, fingerprint=options["fingerprint"], user=user,
                                                         via=VIA)
        except (KnownHostsError, HostKeyConflict) as exc:
            raise InputError(str(exc)) from None
        except TransportError as exc:
            raise InputError(str(exc), returncode=EXIT_INCOMPLETE) from None
        self.stdout.write("%s %s %s %s" % (node.name, "accepted" if pinned else "already accepted",
                                           host_key.key_type, host_key.fingerprint_sha256))
