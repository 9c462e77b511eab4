"""manage.py validate_node (NAME... | --label L) [--mode M] [--wait] [--json]. In fleet, above playbooks: the JSON
names each run's root cause with its playbook."""

import json
import time

from django.core.management.base import BaseCommand

from cudaweb.cli import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_PASS, InputError
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.services import agent_budget_s, run_request

GRACE_S = 180  # queueing and transport on top of the agent's own budget


class Command(BaseCommand):
    help = ("Validate nodes through the worker. Without --wait print the run ids (a node with a live run answers "
            "with that run). With --wait: exit 0 all passed, 1 a warning or failure, 3 a run could not complete; "
            "2 a usage or input error (an unknown node).")

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="*", metavar="NAME", help="node names")
        parser.add_argument("--label", help="every node with this label")
        parser.add_argument("--mode", choices=ValidationRun.Mode.values, default=ValidationRun.Mode.QUICK)
        parser.add_argument("--wait", action="store_true", help="wait for the runs to end")
        parser.add_argument("--json", action="store_true", help="print the stored reports (or failures) as JSON")

    def _nodes(self, options):
        if bool(options["nodes"]) == bool(options["label"]):
            raise InputError("name nodes or give --label, not both")
        if options["label"]:
            nodes = list(nodes_with_label(options["label"]).order_by("name"))
            if not nodes:
                raise InputError("no node has the label %r" % options["label"])
            return nodes
        found = {n.name: n for n in Node.objects.filter(name__in=options["nodes"])}
        missing = [name for name in options["nodes"] if name not in found]
        if missing:
            raise InputError("no node named %s" % ", ".join(map(repr, missing)))
        return [found[name] for name in dict.fromkeys(options["nodes"])]

    def handle(self, *args, **options):
        nodes = self._nodes(options)
        runs = []
        for node in nodes:
            try:
                runs.append(run_request(node=node, mode=options["mode"]))
            except BrokerUnavailable as exc:
                raise InputError("%s; %s" % (exc, "nothing was queued" if not runs else "queued: %s" % ", ".join(
                    str(r.id) for r in runs)), returncode=EXIT_INCOMPLETE)
        if not options["wait"]:
            for run in runs:
                self.stdout.write(str(run.id))
            return
        deadline = time.monotonic() + max(agent_budget_s(n, options["mode"]) for n in nodes) + GRACE_S
        while any(run.is_live for run in runs) and time.monotonic() < deadline:
            time.sleep(0.5)
            for run in runs:
                if run.is_live:
                    run.refresh_from_db()
        results = [{"node": run.node.name, "run": str(run.id), "status": run.status,
                    "reason": run.reason if not run.is_live else "still %s when the wait ended; is a worker "
                    "running?" % run.status, "root_cause": run_root_cause(run=run), "report": run.report}
                   for run in runs]
        if options["json"]:
            self.stdout.write(json.dumps(results[0] if len(results) == 1 and options["nodes"] and
                                         len(options["nodes"]) == 1 else results, indent=1))
        else:
            for result in results:
                self.stdout.write("%s %s: %s" % (result["node"], result["status"], result["reason"]))
        statuses = [run.status for run in runs]
        if any(run.is_live for run in runs) or any(s not in ValidationRun.VERDICT_STATUSES for s in statuses):
            raise SystemExit(EXIT_INCOMPLETE)
        raise SystemExit(EXIT_PASS if all(s == ValidationRun.Status.PASSED for s in statuses) else EXIT_FINDINGS)
