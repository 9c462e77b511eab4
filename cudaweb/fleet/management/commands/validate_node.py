"""manage.py validate_node (NAME... | --label L) [--mode M] [--burnin-seconds N] [--wait] [--json]. In fleet,
above playbooks: the JSON names each run's root cause with its playbook."""

import json
import time

from django.core.management.base import BaseCommand

from cudaweb.cli import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_PASS, InputError, dashboard_or_exit
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.validation import burnin, dbretry
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.queue import BrokerUnavailable
from cudaweb.validation.services import run_request, task_budget_s

GRACE_S = 180  # queueing and transport on top of the agent's own budget
POLL_S = 0.05  # --wait reads the runs' states this often: one small query, the reports only once at the end


class Command(BaseCommand):
    requires_system_checks = []  # a request, not a deployment step: Django's checks would add 0.3-0.4 s to each
    help = ("Validate nodes through the worker. Without --wait print the run ids (a node with a live run answers "
            "with that run). With --wait: exit 0 all passed, 1 a warning or failure, 3 a run could not complete; "
            "2 a usage or input error (an unknown node).")

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="*", metavar="NAME", help="node names")
        parser.add_argument("--label", help="every node with this label")
        parser.add_argument("--mode", choices=ValidationRun.Mode.values, default=ValidationRun.Mode.QUICK)
        parser.add_argument("--burnin-seconds", type=int, help="burn-in mode: the sustained load's length (300)")
        parser.add_argument("--wait", action="store_true", help="wait for the runs to end")
        parser.add_argument("--json", action="store_true", help="print the stored reports (or failures) as JSON")

    def _nodes(self, options):
        if not options["nodes"] and not options["label"]:
            raise InputError("which nodes? name them (validate_node NAME...) or give --label LABEL")
        if options["nodes"] and options["label"]:
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
        dashboard_or_exit(self.stderr)
        unready = [node.name for node in nodes if not node.can_validate]
        if unready:  # the page's and the API's rule (409 there): no run is created for a node we may not reach
            raise InputError("accept the host key of %s before validating %s (node page: Fetch host key, then "
                             "Accept); nothing was queued" % (", ".join(unready), "it" if len(unready) == 1 else
                                                             "them"))
        seconds = options["burnin_seconds"]
        if seconds is not None and not burnin.MIN_SECONDS <= seconds <= burnin.MAX_SECONDS:
            raise InputError("--burnin-seconds must be between %d and %d" % (burnin.MIN_SECONDS, burnin.MAX_SECONDS))
        runs = []
        for node in nodes:
            try:
                runs.append(run_request(node=node, mode=options["mode"], burnin_seconds=options["burnin_seconds"]))
            except BrokerUnavailable as exc:
                # Not an input error (CommandError would print "InputError:" before it): the message alone, exit 3.
                self.stderr.write("%s; %s" % (exc, "nothing was queued" if not runs else "queued: %s" % ", ".join(
                    str(r.id) for r in runs)))
                raise SystemExit(EXIT_INCOMPLETE)
        if not options["wait"]:
            for run in runs:
                self.stdout.write(str(run.id))
            return
        deadline = time.monotonic() + max(task_budget_s(run) for run in runs) + GRACE_S
        ids = [run.id for run in runs]
        database_away = False
        while time.monotonic() < deadline:
            try:
                if not ValidationRun.objects.filter(id__in=ids, status__in=ValidationRun.LIVE).exists():
                    break
            except dbretry.RETRYABLE as exc:  # the database restarting: wait on a new connection, keep the runs
                if not database_away:
                    self.stderr.write("the database does not answer (%s); still waiting" % str(exc).strip()[:200])
                database_away = True
                dbretry.connection_drop()
                time.sleep(2)
                continue
            time.sleep(POLL_S)
        for run in runs:
            dbretry.retrying(run.refresh_from_db, what="state of run %s" % run.id)
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
