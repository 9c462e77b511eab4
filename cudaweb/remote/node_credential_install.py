"""A node's credential written onto the node over the dashboard's own SSH connection (pinned host key), as a
root-only file where the node-local health command reads it by default (CUDAWEB_NODE_CREDENTIAL_PATH): enrolment
at fleet scale with no click and no copy per node. The credential travels on the command's stdin, never on a
command line; the path is the site's setting, passed as an argument to a fixed script, never spliced into it."""

import posixpath

from django.conf import settings

from cudaweb.accounts import audit
from cudaweb.remote.connect import transport_for
from cudaweb.remote.transports.base import TransportError

# $1 the folder, $2 the file: made by the user the dashboard logs in as, readable by it alone (umask 077); the file
# replaced whole (a reader never sees half a credential)
WRITE = 'umask 077 && mkdir -p "$1" && cat > "$2.part" && mv -f "$2.part" "$2"'


class InstallFailed(Exception):
    """The credential could not be written on the node; the reason says why, in words."""


def node_credential_install(*, node, text, path=None):
    """Write `text` (the node's new credential) to `path` on `node`. Raises InstallFailed."""
    path = path or settings.CUDAWEB_NODE_CREDENTIAL_PATH
    if not node.can_validate:
        raise InstallFailed("the dashboard does not reach %s yet (accept its host key first)" % node.name)
    try:
        with transport_for(node, purpose="node credential") as connected:
            done = connected.run_command(["sh", "-c", WRITE, "sh", posixpath.dirname(path), path], timeout_s=30,
                                         stdin=(text + "\n").encode())
    except TransportError as exc:
        raise InstallFailed("could not reach %s: %s" % (node.name, exc)) from None
    if done.exit_status != 0:
        raise InstallFailed("could not write %s on %s as %s: %s (the folder must be writable by that user, e.g. "
                            "root; or write the file with your configuration management: node_credential --out-dir)"
                            % (path, node.name, node.username or "the dashboard's user",
                               " ".join((done.stderr or done.stdout).split())[:200] or "exit %d" % done.exit_status))
    audit.record("node_credential.installed", obj=node, node=node.name, path=path)
    return path
