"""manage.py test_network (NAME... | --label L) [--plan matrix|ring|allreduce] [--wait] [--json]."""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from cudaweb.cli import dashboard_or_exit
from cudaweb.network.models import NetworkTest
from cudaweb.network.selectors import network_test_export
from cudaweb.network.services import network_test_request
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.validation.queue import BrokerUnavailable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCOMPLETE = 0, 1, 2
WAIT_S = 1800


class Command(BaseCommand):
    help = ("Test the network between nodes through the worker, as the network page does. Without --wait print the "
            "test's id. With --wait: exit 0 nothing found, 1 a pair failed, the all-reduce over every node failed "
            "or was slow, or a slow node or link was named, 2 the test could not complete.")

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="*", metavar="NAME", help="node names")
        parser.add_argument("--label", help="every node with this label")
        parser.add_argument("--plan", choices=NetworkTest.Plan.values, help="matrix / ring (pair tests; default: "
                            "matrix up to 8 nodes, else ring) or allreduce (one all-reduce over all, bisected)")
        parser.add_argument("--wait", action="store_true", help="wait for the test to end")
        parser.add_argument("--json", action="store_true", help="print the test as the API shows it")

    def _nodes(self, options):
        if bool(options["nodes"]) == bool(options["label"]):
            raise CommandError("name nodes or give --label, not both")
        if options["label"]:
            nodes = list(nodes_with_label(options["label"]).order_by("name"))
        else:
            found = {n.name: n for n in Node.objects.filter(name__in=options["nodes"])}
            missing = [name for name in options["nodes"] if name not in found]
            if missing:
                raise CommandError("no node named %s" % ", ".join(map(repr, missing)))
            nodes = [found[name] for name in dict.fromkeys(options["nodes"])]
        usable = [node for node in nodes if node.can_validate]
        if len(usable) < 2:
            raise CommandError("a network test needs two nodes or more that can be reached (host key accepted); "
                               "%d of those named" % len(usable))
        return usable

    def handle(self, *args, **options):
        nodes = self._nodes(options)
        dashboard_or_exit(self.stderr, EXIT_INCOMPLETE)
        try:
            test = network_test_request(nodes=nodes, plan=options["plan"])
        except BrokerUnavailable as exc:
            raise CommandError("%s; nothing was queued" % exc, returncode=EXIT_INCOMPLETE)
        if not options["wait"]:
            self.stdout.write(str(test.id))
            return
        deadline = time.monotonic() + WAIT_S
        while test.status in (NetworkTest.Status.PENDING, NetworkTest.Status.RUNNING) and time.monotonic() < deadline:
            time.sleep(0.5)
            test.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps(network_test_export(test), indent=1, default=str))
        else:
            self.stdout.write("%s %s: %s" % (test.id, test.status, test.summary))
            for collective in test.collectives.all():
                self.stdout.write("  round %d %s [%s]: %s %s" % (collective.round, collective.role, ",".join(
                    collective.members), collective.status, collective.failure or collective.busbw_gbs))
        raise SystemExit(exit_code(test))


def exit_code(test):
    """0 nothing found; 1 a finding: a failed pair, the all-reduce over every node failed (status FAILED) or slow,
    a suspect named; 2 the test did not end (still live at the wait's end, or our own error)."""
    if test.status == NetworkTest.Status.FAILED:
        return EXIT_FINDINGS
    if test.status != NetworkTest.Status.DONE:
        return EXIT_INCOMPLETE
    failed = (test.suspects or test.pairs.filter(status="fail").exists()
              or test.collectives.filter(round=0).exclude(status="pass").exists())
    return EXIT_FINDINGS if failed else EXIT_CLEAN
