"""Host keys an operator gives in a file: an OpenSSH known_hosts file (hashed names too) or ssh-keyscan output,
read by paramiko's HostKeys, optionally checked against SHA256 fingerprints the operator gives; and the key a node
presents, accepted only when it has the fingerprint the operator gives (docs/adr/0031-host-keys-without-a-browser.md).

A key from a file is as trusted as the operator who gives it: it is pinned exactly as accepting it on the node page
pins it (cudaweb.nodes.services.host_key_pin), recorded as accepted by them, audited as host_key.accepted."""

import re

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from cudaweb.nodes import services as node_services
from cudaweb.nodes.models import HostKey
from cudaweb.remote import connect
from cudaweb.remote.transports import ssh

KEY_TYPE_STARTS = ("ssh-", "ecdsa-", "sk-")
FINGERPRINT = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}\Z")
# The key type pinned when a host offers several: the strongest first (OpenSSH's own order of preference)
PREFERENCE = ("ssh-ed25519", "ecdsa-sha2-nistp521", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp256", "ssh-rsa")
CERT_AUTHORITY_REFUSED = (
    "a @cert-authority line (a site's SSH host CA) cannot be used: paramiko 5.1, the SSH library the workers use, "
    "compares the host's plain key with the pinned one and does not verify host certificates against a CA; give the "
    "hosts' own keys (ssh-keyscan output checked with --fingerprint) instead (docs/adr/0031)")


class KnownHostsError(Exception):
    """The file, a fingerprint or a node's key in it cannot be used; the message names the line or the node."""


def fingerprint_check(text):
    """`SHA256:<43 base64 characters>` as ssh-keygen -lf prints it, or KnownHostsError."""
    text = (text or "").strip()
    if not FINGERPRINT.match(text):
        raise KnownHostsError("%r is not a SHA256 fingerprint (SHA256: and 43 base64 characters, as `ssh-keygen -lf` "
                              "prints it)" % text[:80])
    return text


def fingerprints_read(text):
    """The fingerprints of a file, one per line (`ssh-keygen -lf` lines are taken too: their SHA256:... field);
    blank lines and # comments skipped. KnownHostsError names a line that holds none."""
    found = set()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        field = next((part for part in line.split() if part.startswith("SHA256:")), line.split()[0])
        try:
            found.add(fingerprint_check(field))
        except KnownHostsError as exc:
            raise KnownHostsError("line %d: %s" % (number, exc)) from None
    return found


def known_hosts_read(text):
    """A paramiko HostKeys of the file's keys. Each line goes through paramiko's own parser (HostKeyEntry), so a
    line it cannot read is an error naming the line rather than skipped silently, as HostKeys.load would; @revoked
    and @cert-authority lines are refused (paramiko does not understand markers)."""
    keys = paramiko.HostKeys()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@cert-authority"):
            raise KnownHostsError("line %d: %s" % (number, CERT_AUTHORITY_REFUSED))
        if line.startswith("@"):
            raise KnownHostsError("line %d: the marker %s is not supported (only plain host key lines are)" % (
                number, line.split()[0][:40]))
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (InvalidHostKey, paramiko.SSHException, ValueError) as exc:
            raise KnownHostsError("line %d: not a host key line (%s)" % (number, type(exc).__name__)) from None
        if entry is None:
            raise KnownHostsError("line %d: not a host key line of a type paramiko reads (names, type, base64 key)"
                                  % number)
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)
    return keys


def node_keys(host_keys, node):
    """The keys the file gives for `node`, by its address as OpenSSH writes it (`addr`, or `[addr]:port` off port
    22; hashed names match too): {key type: PKey}."""
    found = host_keys.lookup(ssh.known_hosts_name(node.address, node.port))
    return dict(found) if found else {}


def node_key_choose(host_keys, node, fingerprints=None):
    """The key to pin for `node`: among its keys in the file (only those whose fingerprint is in `fingerprints`, when
    given), the strongest type. KnownHostsError, naming the node, when there is none."""
    offered = node_keys(host_keys, node)
    if not offered:
        raise KnownHostsError("%s: no key for %s in the file" % (node.name, ssh.known_hosts_name(node.address,
                                                                                              node.port)))
    if fingerprints is not None:
        vouched = {kind: key for kind, key in offered.items() if ssh.fingerprint(key) in fingerprints}
        if not vouched:
            raise KnownHostsError("%s: refused, none of its keys in the file has a fingerprint you gave (%s)" % (
                node.name, ", ".join("%s %s" % (kind, ssh.fingerprint(key)) for kind, key in sorted(offered.items()))))
        offered = vouched
    kind = min(offered, key=lambda k: PREFERENCE.index(k) if k in PREFERENCE else len(PREFERENCE))
    return offered[kind]


def host_key_pin_from_file(*, node, host_keys, fingerprints=None, user=None, via):
    """Pin `node`'s key from a known_hosts file (cudaweb.nodes.services.host_key_pin). Returns (host key, pinned
    now?). Raises KnownHostsError or node_services.HostKeyConflict."""
    key = node_key_choose(host_keys, node, fingerprints)
    return node_services.host_key_pin(node=node, key_type=key.get_name(), key_base64=key.get_base64(),
                                      fingerprint=ssh.fingerprint(key), user=user, via=via)


def host_key_accept_presented(*, node, fingerprint, user=None, via):
    """Read the key `node` presents now (the node page's "Connect and show the host key": connect.host_key_fetch,
    here synchronously) and accept it only if its fingerprint is `fingerprint`. Returns (host key, pinned now?).
    Raises KnownHostsError (another key presented: nothing accepted), node_services.HostKeyConflict (another key
    accepted already) or the transport's Unreachable."""
    fingerprint = fingerprint_check(fingerprint)
    accepted = HostKey.objects.filter(node=node, accepted_at__isnull=False).first()
    if accepted is not None:
        if accepted.fingerprint_sha256 == fingerprint:
            return accepted, False
        raise node_services.HostKeyConflict(
            "node %s has another accepted host key (%s %s): nothing was changed" % (
                node.name, accepted.key_type, accepted.fingerprint_sha256))
    presented = connect.host_key_fetch(node=node, on_behalf_of=user)
    if presented.fingerprint_sha256 != fingerprint:
        raise KnownHostsError("%s presented %s %s, not %s: nothing was accepted" % (
            node.name, presented.key_type, presented.fingerprint_sha256, fingerprint))
    try:
        return node_services.host_key_accept(node=node, user=user, fingerprint=fingerprint, via=via), True
    except node_services.HostKeyChanged as exc:  # a worker recorded another key in between
        raise KnownHostsError("%s: %s" % (node.name, exc)) from None

