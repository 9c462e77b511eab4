"""manage.py seed_demo --nodes N --runs-per-node M: a demo fleet with history built from real agent reports."""

import time

from django.core.management.base import BaseCommand

from cudaweb.cli import InputError
from cudaweb.drift.demo import seed
from cudaweb.nodes.models import Node


class Command(BaseCommand):
    help = "Fill the database with demo nodes and runs built from the agent's real H200 reports."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=20)
        parser.add_argument("--runs-per-node", type=int, default=30)
        parser.add_argument("--seed", type=int, default=0, help="random seed (the same seed gives the same fleet)")
        parser.add_argument("--prefix", default="demo", help="node names are PREFIX-gpu-NNNN")

    def handle(self, *args, **options):
        if options["nodes"] < 1 or options["runs_per_node"] < 1:
            raise InputError("--nodes and --runs-per-node must be at least 1")
        if Node.objects.filter(name__startswith=options["prefix"] + "-gpu-").exists():
            raise InputError("demo nodes named %s-gpu-* exist already; use another --prefix" % options["prefix"])
        started = time.monotonic()
        nodes = seed(nodes=options["nodes"], runs_per_node=options["runs_per_node"], seed=options["seed"],
                     prefix=options["prefix"], stdout=self.stdout)
        self.stdout.write("seeded %d nodes x %d runs in %.1f s" % (len(nodes), options["runs_per_node"],
                                                                 time.monotonic() - started))
