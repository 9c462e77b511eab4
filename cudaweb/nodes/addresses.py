"""Which addresses the dashboard may connect to: a host name or an IP address, and, when CUDAWEB_ALLOWED_NETWORKS
lists networks, only addresses inside them (a name is checked on what it resolves to, where the connection is
made: remote.connect)."""

import ipaddress
import re

from django.conf import settings

HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                      r"[A-Za-z0-9])?)*\.?$")


class AddressRefused(ValueError):
    """Not a host name or IP address, or outside the allowed networks."""


def allowed_networks():
    return [ipaddress.ip_network(n.strip(), strict=False)
            for n in settings.CUDAWEB_ALLOWED_NETWORKS.split(",") if n.strip()]


def ip_allowed(ip):
    networks = allowed_networks()
    return not networks or any(ipaddress.ip_address(ip) in network for network in networks)


def address_check(address):
    """The address as given if it is a host name or an IP address the settings allow; raises AddressRefused."""
    address = (address or "").strip()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is None and not HOSTNAME.match(address):
        raise AddressRefused("%r is neither a host name nor an IP address" % address[:100])
    if ip is not None and not ip_allowed(ip):
        raise AddressRefused("%s is outside the networks this dashboard may connect to (CUDAWEB_ALLOWED_NETWORKS)"
                             % address)
    return address
