import json
import time

from django.core.management.base import BaseCommand, CommandError

from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import agent_budget_s, run_request

EXIT_PASS, EXIT_FINDINGS, EXIT_INCOMPLETE = 0, 1, 2


class Command(BaseCommand):
    help = "Validate a node through the worker; exit 0 pass, 1 warn or fail, 2 when the run could not complete."

    def add_arguments(self, parser):
        parser.add_argument("node", help="node name")
        parser.add_argument("--mode", choices=ValidationRun.Mode.values, default=ValidationRun.Mode.QUICK)
        parser.add_argument("--wait", action="store_true", help="wait for the run to end")
        parser.add_argument("--json", action="store_true", help="print the stored report (or the failure) as JSON")

    def handle(self, *args, **options):
        node = Node.objects.filter(name=options["node"]).first()
        if node is None:
            raise CommandError("no node named %r" % options["node"])
        run = run_request(node=node, mode=options["mode"])
        if not options["wait"]:
            self.stdout.write(str(run.id))
            return
        deadline = time.monotonic() + agent_budget_s(node, run.mode) + 180
        while run.is_live:
            if time.monotonic() > deadline:
                raise CommandError("run %s is still %s; is a worker running?" % (run.id, run.status))
            time.sleep(0.5)
            run.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps({
                "run": str(run.id), "node": node.name, "status": run.status, "reason": run.reason,
                "report": run.report}, indent=1))
        else:
            self.stdout.write("%s %s: %s" % (node.name, run.status, run.reason))
        if run.status == ValidationRun.Status.PASSED:
            raise SystemExit(EXIT_PASS)
        raise SystemExit(EXIT_FINDINGS if run.status in ValidationRun.VERDICT_STATUSES else EXIT_INCOMPLETE)
