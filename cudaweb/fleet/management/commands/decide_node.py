"""manage.py decide_node NAME --accept|--quarantine [--note TEXT] [--run ID] [--as USER]: an operator's acceptance
decision, as on the onboarding page (cudaweb.fleet.services.acceptance_decide): it rests on the node's newest finished
run with a verdict (--run, when given, must be that run), keeps the evidence with its digest, and is audited as
node.accepted or node.quarantined. Prints the record's id. Exit 2 when there is no such run or the decision is refused
(a FAILED run accepted without a note)."""

import uuid

from django.core.management.base import BaseCommand

from cudaweb.cli import InputError, acting_user
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.fleet.onboarding import decidable_run
from cudaweb.fleet.services import acceptance_decide
from cudaweb.nodes.models import Node


class Command(BaseCommand):
    requires_system_checks = []
    help = "Accept a node into the fleet or quarantine it, on its newest finished run (as the onboarding page does)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        choice = parser.add_mutually_exclusive_group(required=True)
        choice.add_argument("--accept", dest="decision", action="store_const", const=AcceptanceRecord.Decision.ACCEPTED)
        choice.add_argument("--quarantine", dest="decision", action="store_const",
                            const=AcceptanceRecord.Decision.QUARANTINED)
        parser.add_argument("--note", default="", help="why (needed to accept a node whose run FAILED)")
        parser.add_argument("--run", help="the run it rests on; it must be the node's newest finished run")
        parser.add_argument("--as", dest="as_user", help="the operator deciding (on the record and in the audit log)")

    def handle(self, *args, **options):
        node = Node.objects.filter(name=options["name"]).first()
        if node is None:
            raise InputError("no node named %r" % options["name"])
        user = acting_user(options["as_user"], "operator")  # the onboarding page's rule
        if user is None:
            raise InputError("--as USER: a decision names who made it (the record keeps the operator)")
        run = decidable_run(node=node)
        if run is None:
            raise InputError("%s has no finished run with a verdict to decide on; validate it first" % node.name)
        if options["run"] and str(run.id) != _uuid(options["run"]):
            raise InputError("the decision rests on %s's newest finished run, %s, not %s" % (
                node.name, run.id, options["run"]))
        try:
            record = acceptance_decide(node=node, run=run, decision=options["decision"], user=user,
                                       note=options["note"])
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.stdout.write("%s %s on run %s (%s): record %s" % (node.name, record.decision, run.id, run.status,
                                                              record.id))


def _uuid(text):
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise InputError("--run: %r is not a run id" % text[:100]) from None
