"""Which addresses the dashboard may connect to: an IP address (ipaddress), or a host name by RFC 1123's rules, an
internationalised one written as IDNA's ASCII form (gpu-01.bücher.example -> gpu-01.xn--bcher-kva.example); a name
whose last label is a number is a mistyped IPv4 address (999.1.1.1), not a name. When CUDAWEB_ALLOWED_NETWORKS lists
networks, only addresses inside them; when it is empty, any address but this host's own and the link's
(loopback, link-local, unspecified, multicast: the worker must not be pointed at its own services or a cloud's
metadata address). A name is checked on what it resolves to, where the connection is made (remote.connect)."""

import ipaddress
import re

import idna
from django.conf import settings

HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                      r"[A-Za-z0-9])?)*\.?$")


class AddressRefused(ValueError):
    """Not a host name or IP address, or outside the allowed networks."""


def allowed_networks():
    return [ipaddress.ip_network(n.strip(), strict=False)
            for n in settings.CUDAWEB_ALLOWED_NETWORKS.split(",") if n.strip()]


def _own_or_link(ip):
    ip = getattr(ip, "ipv4_mapped", None) or ip
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast


def ip_allowed(ip):
    ip = ipaddress.ip_address(ip)
    networks = allowed_networks()
    if not networks:
        return not _own_or_link(ip)
    return any(ip in network for network in networks)


def refusal(ip):
    """Why `ip` may not be connected to, in the words of the setting that refuses it."""
    if allowed_networks():
        return "%s is outside the networks this dashboard may connect to (CUDAWEB_ALLOWED_NETWORKS)" % ip
    return ("%s is a loopback, link-local, unspecified or multicast address, refused while CUDAWEB_ALLOWED_NETWORKS "
            "is empty (list the networks to allow, e.g. 127.0.0.0/8 for a test sshd on this host)" % ip)


def host_name(address):
    """`address` as an ASCII host name (IDNA), or None when it is not one."""
    try:
        ascii_name = idna.encode(address.rstrip("."), uts46=True).decode("ascii") if address else ""
    except (idna.IDNAError, UnicodeError, ValueError):
        return None
    if not HOSTNAME.match(ascii_name) or ascii_name.rsplit(".", 1)[-1].isdigit():
        return None  # 999.1.1.1, 10.0.4: the last label a number is an IPv4 address gone wrong (RFC 1123, WHATWG URL)
    return ascii_name


def address_check(address):
    """The address if it is a host name (in its ASCII form) or an IP address the settings allow; raises
    AddressRefused."""
    address = (address or "").strip()
    if len(address) > 253:
        raise AddressRefused("%r... is longer than a host name may be (253)" % address[:100])
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is None:
        name = host_name(address)
        if name is None:
            raise AddressRefused("%r is neither a host name nor an IP address" % address[:100])
        return name
    if not ip_allowed(ip):
        raise AddressRefused(refusal(address))
    return address
