"""The one rule for a node's name, login, port, address and labels: the add-node and edit-node pages, `add_node`,
`import_nodes` (CSV, Ansible, scontrol records) and the service that creates a node all apply it (a value that is
refused here is refused everywhere)."""

import ipaddress
import re

from django.core.validators import RegexValidator

from cudaweb.nodes.addresses import AddressRefused, address_check

# A name is part of URLs, file names and Slurm / Kubernetes names, and an argument of scontrol and kubectl-like calls:
# its first character is a letter or a digit, so that it never reads as an option ("--force"), a hidden file or "..".
NAME_FORM = r"[A-Za-z0-9][A-Za-z0-9._-]*"
NAME_MAX = 100
NAME_RULE = "a letter or a digit first, then letters, digits, . _ -"
# The model's fields (name, slurm_name, kubernetes_name), and so the admin; each field's max_length bounds the length.
node_name_validator = RegexValidator(r"\A%s\Z" % NAME_FORM, "not a node name: " + NAME_RULE)
USERNAME = re.compile(r"[a-z_][a-z0-9_.-]{0,63}")  # a POSIX login (useradd's default rule)
# A label is a word a filter, a URL and a Prometheus series carry (rack-07, h200, a Slurm partition): a Kubernetes
# label value's shape. A node has a few, not thousands: one scontrol record once gave 100,001 and the fleet page 3.6 MB.
LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
MAX_LABELS = 32


class NodeFieldError(ValueError):
    """A value a node cannot have; `field` names which (name, username, port, address)."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def name_check(name):
    if not isinstance(name, str) or len(name) > NAME_MAX or not re.fullmatch(NAME_FORM, name):
        raise NodeFieldError("name", "%r is not a node name: %s (at most %d)" % (_shown(name), NAME_RULE, NAME_MAX))
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


def labels_clean(labels):
    """A node's labels: each as LABEL says (at most 63 characters), at most MAX_LABELS, a repeat dropped."""
    if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
        raise NodeFieldError("labels", "labels are a list of words")
    cleaned = list(dict.fromkeys(label.strip() for label in labels if label.strip()))
    if len(cleaned) > MAX_LABELS:
        raise NodeFieldError("labels", "%d labels: a node has at most %d" % (len(cleaned), MAX_LABELS))
    for label in cleaned:
        if not LABEL.fullmatch(label):
            raise NodeFieldError("labels", "%r is not a label: letters, digits, . _ - inside (at most 63)"
                                 % _shown(label)[:70])
    return cleaned


def ssh_node_check(*, name, address, port, username):
    """The values an SSH node is stored with, checked; raises NodeFieldError naming the first wrong field."""
    return {"name": name_check(name), "address": address_clean(address), "port": port_check(port),
            "username": username_check(username)}


def _shown(value):
    return value[:100] if isinstance(value, str) else value
