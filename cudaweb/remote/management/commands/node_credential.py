"""`manage.py node_credential NODE | --label L [--out-dir DIR] [--install] [--revoke] [--list]`: a node's own
credential, for its health command or watcher to post that node's reports with (the node's earlier credential is
revoked). One node: the new credential on the last line of stdout. A label: one file per node in --out-dir (for the
site's configuration management), and/or written onto each node over SSH (--install, a root-only file at
CUDAWEB_NODE_CREDENTIAL_PATH, where the health command reads it by default)."""

import os

from django.core.management.base import BaseCommand

from cudaweb.cli import InputError
from cudaweb.nodes.models import Node, NodeCredential
from cudaweb.nodes.report_credentials import credential_text, node_credential_issue, node_credential_revoke
from cudaweb.nodes.selectors import nodes_with_label
from cudaweb.remote.node_credential_install import InstallFailed, node_credential_install

BY = "manage.py node_credential"


class Command(BaseCommand):
    help = "Issue (the default), revoke or list nodes' own report credentials."

    def add_arguments(self, parser):
        parser.add_argument("node", nargs="?", help="the node's name")
        parser.add_argument("--label", help="every node with this label")
        parser.add_argument("--out-dir", help="write NODE.credential (mode 0600) here for each node")
        parser.add_argument("--install", action="store_true", help="write each credential onto its node over SSH "
                            "(CUDAWEB_NODE_CREDENTIAL_PATH; the dashboard's SSH user must be able to write it)")
        parser.add_argument("--revoke", action="store_true", help="revoke instead of issuing")
        parser.add_argument("--list", action="store_true", dest="list_them", help="list the nodes' credentials")

    def handle(self, *args, node, label, out_dir, install, revoke, list_them, **options):
        if bool(node) == bool(label):
            raise InputError("name one node, or --label LABEL")
        nodes = list(nodes_with_label(label).order_by("name")) if label else list(Node.objects.filter(name=node))
        if not nodes:
            raise InputError("no node %r" % node if node else "no node has the label %r" % label)
        if list_them:
            return self._list(nodes)
        if revoke:
            for each in nodes:
                done = node_credential_revoke(node=each, by=BY)
                self.stdout.write("%s: %s" % (each.name, "revoked" if done else "had no active credential"))
            return
        if label and not (out_dir or install):
            raise InputError("for a label, say where the credentials go: --out-dir DIR and/or --install")
        if out_dir:
            os.makedirs(out_dir, mode=0o700, exist_ok=True)
        failed = []
        for each in nodes:
            # written first, made the node's after: a node whose new credential could not be written keeps its old one
            text, where = credential_text(), []
            if install:
                try:
                    where.append("%s:%s" % (each.name, node_credential_install(node=each, text=text)))
                except InstallFailed as exc:
                    failed.append(each.name)
                    self.stderr.write("%s: %s" % (each.name, exc))
                    continue
            if out_dir:
                path = os.path.join(out_dir, "%s.credential" % each.name)
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, "w") as fh:
                    fh.write(text + "\n")
                where.append(path)
            node_credential_issue(node=each, by=BY, text=text)
            if where:
                self.stdout.write("%s: written to %s" % (each.name, ", ".join(where)))
            else:
                self.stderr.write("credential of %s (shown once; only its sha256 is kept; the earlier one is "
                                  "revoked):" % each.name)
                self.stdout.write(text)
        if failed:
            raise InputError("%d of %d node(s) not installed, their credentials unchanged: %s" % (
                len(failed), len(nodes), ", ".join(failed[:20])), returncode=1)

    def _list(self, nodes):
        for credential in NodeCredential.objects.filter(node__in=nodes).select_related("node"):
            self.stdout.write("%s\t%s…\tcreated %s by %s\tlast used %s%s\t%s" % (
                credential.node.name, credential.prefix, credential.created.isoformat(timespec="seconds"),
                credential.created_by, credential.last_used.isoformat(timespec="seconds")
                if credential.last_used else "never", " from %s" % credential.last_address
                if credential.last_address else "", "revoked" if credential.revoked else "active"))
