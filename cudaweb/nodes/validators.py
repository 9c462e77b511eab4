"""The one rule for a node's name, login, port and address: the add-node page, `add_node`, `import_nodes` and the
service that creates a node all apply it (a value that is refused here is refused everywhere)."""

import ipaddress
import re

from cudaweb.nodes.addresses import AddressRefused, address_check

NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")  # a slug: it is part of URLs, file names and Slurm / Kubernetes names
USERNAME = re.compile(r"[a-z_][a-z0-9_.-]{0,63}")  # a POSIX login (useradd's default rule)


class NodeFieldError(ValueError):
    """A value a node cannot have; `field` names which (name, username, port, address)."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def name_check(name):
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise NodeFieldError("name", "%r is not a node name: letters, digits, - and _ (at most 100)" % _shown(name))
    return name


def username_check(username):
    if not isinstance(username, str) or not USERNAME.fullmatch(username):
        raise NodeFieldError("username", "%r is not a user name: a lower-case letter or _, then lower-case letters, "
                                         "digits, _ . - (at most 64)" % _shown(username))
    return username


def port_check(port):
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise NodeFieldError("port", "port %r is not 1-65535" % _shown(port))
    return port


def address_clean(address):
    """A host name or an IP address the settings allow; an IP literal in brackets ([::1], [127.0.0.1]) loses them.
    No user@, no spaces, no shell."""
    text = address if isinstance(address, str) else ""
    if text.startswith("[") and text.endswith("]"):
        try:
            text = str(ipaddress.ip_address(text[1:-1]))
        except ValueError:
            raise NodeFieldError("address", "%r: brackets hold an IP address only" % _shown(address)) from None
    if text != text.strip():
        raise NodeFieldError("address", "%r has spaces around it" % _shown(address))
    try:
        return address_check(text)
    except AddressRefused as exc:
        raise NodeFieldError("address", str(exc)) from None


def ssh_node_check(*, name, address, port, username):
    """The values an SSH node is stored with, checked; raises NodeFieldError naming the first wrong field."""
    return {"name": name_check(name), "address": address_clean(address), "port": port_check(port),
            "username": username_check(username)}


def _shown(value):
    return value[:100] if isinstance(value, str) else value
