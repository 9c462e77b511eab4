"""manage.py add_node NAME --transport local|ssh [--python PATH] [--address A --port P --user U --key-file F]
[--labels a,b] [--dcgm r1|r2|r3]: register a node from the command line (the host key is read later, from a worker)."""

import re
import sys

from django.core.management.base import BaseCommand
from django.db import IntegrityError

from cudaweb.cli import InputError
from cudaweb.nodes import validators
from cudaweb.nodes.models import Node
from cudaweb.nodes.services import node_register_local
from cudaweb.remote.connect import ssh_node_create
from cudaweb.remote.transports.base import AuthFailed


class Command(BaseCommand):
    help = "Register a node: this host (--transport local) or an SSH host with its private key."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--transport", choices=("local", "ssh"), required=True)
        parser.add_argument("--python", help="interpreter on the node that has torch (local: this one)")
        parser.add_argument("--address")
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user")
        parser.add_argument("--key-file", help="private key (read now and stored encrypted)")
        parser.add_argument("--labels", default="", help="comma separated")
        parser.add_argument("--visible-devices", default="",
                            help="the host's GPUs that are this node (CUDA_VISIBLE_DEVICES, e.g. 0 or 2,3)")
        parser.add_argument("--dcgm", choices=("r1", "r2", "r3"), help="also run DCGM's diagnostic at this level in "
                            "each validation (the node must have DCGM: dcgmi and nv-hostengine)")

    def handle(self, *args, **options):
        devices = options["visible_devices"].strip()
        if not re.fullmatch(r"[A-Za-z0-9,:-]*", devices):
            raise InputError("--visible-devices takes GPU indexes or UUIDs, comma separated")
        try:  # the node rule of the add-node page (cudaweb.nodes.validators)
            validators.name_check(options["name"])
            labels = validators.labels_clean(options["labels"].split(","))
            if options["transport"] == "ssh":
                missing = [flag for flag in ("address", "user", "key_file") if not options[flag]]
                if missing:
                    raise InputError("--transport ssh needs %s" % ", ".join("--" + m.replace("_", "-")
                                                                            for m in missing))
                options["address"] = validators.ssh_node_check(
                    name=options["name"], address=options["address"], port=options["port"],
                    username=options["user"])["address"]
        except validators.NodeFieldError as exc:
            shown = {"name": "NAME", "username": "--user", "port": "--port", "address": "--address",
                     "labels": "--labels"}[exc.field]
            raise InputError("%s: %s" % (shown, exc)) from None
        if Node.objects.filter(name=options["name"]).exists():
            raise InputError("a node named %r exists" % options["name"])
        if options["transport"] == "local":
            node = node_register_local(name=options["name"], python_path=options["python"] or sys.executable)
            Node.objects.filter(id=node.id).update(labels=labels or node.labels)
        else:
            try:
                with open(options["key_file"]) as fh:
                    key = fh.read(65536)
            except OSError as exc:
                raise InputError("cannot read the key file: %s" % (exc.strerror or exc))
            try:
                node = ssh_node_create(name=options["name"], address=options["address"], port=options["port"],
                                       username=options["user"], python_path=options["python"] or "python3",
                                       labels=labels, private_key=key)
            except AuthFailed as exc:
                raise InputError(str(exc))
            except IntegrityError:
                raise InputError("a node named %r exists" % options["name"])
        if devices:
            Node.objects.filter(id=node.id).update(visible_devices=devices)
        if options["dcgm"]:
            Node.objects.filter(id=node.id).update(dcgm_level=options["dcgm"])
        self.stdout.write("%s %s" % (node.name, node.id))
