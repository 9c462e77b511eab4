"""manage.py validate_node (NAME... | --label L) [--mode M] [--burnin-seconds N] [--wait] [--json] [--junit FILE].
In fleet, above playbooks: the JSON names each run's root cause with its playbook; --junit writes the runs as JUnit
XML for a CI pipeline (cudaweb/validation/junit.py), whatever the exit code."""

import json
import os
import time

from django.core.management.base import BaseCommand
from django.db.models import Q

from cudaweb.cli import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_PASS, InputError, dashboard_or_exit
from cudaweb.common import dbretry
from cudaweb.nodes.models import Node
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.playbooks.root_cause import run_root_cause
from cudaweb.validation import burnin, junit
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
        parser.add_argument("--junit", metavar="FILE", help="with --wait: write the runs as JUnit XML to FILE (one "
                            "testsuite per layer, one testcase per check)")

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
        try:
            return self._handle(options)
        except dbretry.RETRYABLE as exc:  # before any run was queued, or while reading the last states: no verdict
            raise InputError("the database does not answer (%s); no verdict" % str(exc).strip()[:300],
                             returncode=EXIT_INCOMPLETE)

    def _handle(self, options):
        if options["junit"] and not options["wait"]:
            raise InputError("--junit needs --wait (the file is written once the runs have ended)")
        if options["junit"] and not os.access(os.path.dirname(os.path.abspath(options["junit"])), os.W_OK):
            raise InputError("cannot write %s: its directory is missing or not writable" % options["junit"])
        nodes = self._nodes(options)
        dashboard_or_exit(self.stderr)
        unready = [node.name for node in nodes if not node.can_validate]
        if unready:  # the page's and the API's rule (409 there): no run is created for a node we may not reach
            raise InputError("accept the host key of %s before validating %s (manage.py accept_host_key NODE "
                             "--fingerprint SHA256:..., import_nodes --known-hosts FILE, or the node page: Fetch host "
                             "key, then Accept); nothing was queued" % (", ".join(unready), "it" if len(unready) == 1
                                                                         else "them"))
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
        runs = self._wait(runs)
        results = [{"node": run.node.name, "run": str(run.id), "retry_of": str(run.retry_of_id or "") or None,
                    "status": run.status,
                    "reason": run.reason if not run.is_live else "still %s when the wait ended; is a worker "
                    "running?" % run.status, "root_cause": run_root_cause(run=run), "report": run.report}
                   for run in runs]
        if options["junit"]:
            document = junit.runs_junit(runs=runs, root_causes={run.id: result["root_cause"]
                                                                for run, result in zip(runs, results)})
            try:
                with open(options["junit"], "wb") as out:
                    out.write(document)
            except OSError as exc:
                raise InputError("cannot write %s: %s" % (options["junit"], exc.strerror or exc),
                                 returncode=EXIT_INCOMPLETE)
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

    def _wait(self, runs):
        """Follow each run to its real end and answer the runs it ended as: an INTERRUPTED run's retry is followed
        (its budget added to the wait), and a DASHBOARD_ERROR whose report a reaper is to store once the database
        takes it (report_unstored) is waited on. Rides over the database going away."""
        following = [run.id for run in runs]
        deadline = time.monotonic() + max(task_budget_s(run) for run in runs) + GRACE_S
        database_away = False
        while time.monotonic() < deadline:
            try:
                if ValidationRun.objects.filter(id__in=following).filter(
                        Q(status__in=ValidationRun.LIVE) | Q(status=ValidationRun.Status.DASHBOARD_ERROR,
                                                             report_unstored=True)).exists():
                    time.sleep(POLL_S)
                    continue
                retried = dict(ValidationRun.objects.filter(retry_of_id__in=following).values_list("retry_of_id", "id"))
            except dbretry.RETRYABLE as exc:  # the database restarting: wait on a new connection, keep the runs
                if not database_away:
                    self.stderr.write("the database does not answer (%s); still waiting" % str(exc).strip()[:200])
                database_away = True
                dbretry.connection_drop()
                time.sleep(2)
                continue
            if not retried:
                break
            following = [retried.get(run_id, run_id) for run_id in following]
            for retry in dbretry.retrying(lambda: list(ValidationRun.objects.select_related("node").filter(
                    id__in=list(retried.values())))):
                deadline = max(deadline, time.monotonic() + task_budget_s(retry) + GRACE_S)
        return dbretry.retrying(lambda: [ValidationRun.objects.select_related("node").get(id=run_id)
                                         for run_id in following], what="state of the runs")
