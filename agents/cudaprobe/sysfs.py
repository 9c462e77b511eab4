"""Read the fabric's sysfs: InfiniBand / RoCE ports, their netdevs, and PCIe AER counters.

CUDAPROBE_SYSFS=DIR reads class/infiniband, class/net and bus/pci/devices under DIR instead of /sys, so a tree
captured on another host (bench/fabric_capture.py) replays here. Every value is read as text and parsed here; a
file that is missing or unreadable is None, never an exception.
"""

import os
import re

# The port counters the fabric check judges (ports/<n>/counters/, IB spec PortCounters; Linux sysfs-class-infiniband).
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
               "excessive_buffer_overrun_errors", "local_link_integrity_errors")
AER_KINDS = (("correctable", "aer_dev_correctable", "TOTAL_ERR_COR"),
             ("nonfatal", "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
             ("fatal", "aer_dev_fatal", "TOTAL_ERR_FATAL"))
NVIDIA = "0x10de"
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def root(environ):
    return environ.get("CUDAPROBE_SYSFS") or "/sys"


def read(path, cap=65536):
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _int(text):
    try:
        return int(text.split()[0], 0) if text else None
    except ValueError:
        return None


def pci_address(path):
    """The PCI function a class device sits on (its `device` link, one level up for virtio), or None."""
    if not os.path.exists(os.path.join(path, "device")):
        return None
    parts = os.path.realpath(os.path.join(path, "device")).split(os.sep)
    found = [part for part in parts if BDF.match(part)]
    return found[-1] if found else None


def _rate_gbps(text):
    """'400 Gb/sec (4X NDR)' -> 400.0."""
    match = re.match(r"^\s*([0-9.]+)\s*Gb/sec", text or "")
    return float(match.group(1)) if match else None


def netdev(base, name):
    """One interface's state, speed (Mb/s, None where the driver reports none) and MTU."""
    path = os.path.join(base, "class", "net", name)
    speed = _int(read(os.path.join(path, "speed")))
    return {"name": name, "operstate": read(os.path.join(path, "operstate")),
            "speed_mbps": speed if speed is not None and speed > 0 else None,
            "mtu": _int(read(os.path.join(path, "mtu")))}


def ib_ports(base):
    """Every HCA port under class/infiniband: state, physical state, rate, link layer, the counters, and for
    a RoCE port (link layer Ethernet) the netdev it sits on."""
    ports = []
    ib = os.path.join(base, "class", "infiniband")
    for hca in _listdir(ib):
        bdf = pci_address(os.path.join(ib, hca))
        for number in _listdir(os.path.join(ib, hca, "ports")):
            path = os.path.join(ib, hca, "ports", number)
            rate = read(os.path.join(path, "rate"))
            port = {"hca": hca, "port": number, "bdf": bdf,
                    "state": read(os.path.join(path, "state")),  # "4: ACTIVE"
                    "phys_state": read(os.path.join(path, "phys_state")),  # "5: LinkUp"
                    "rate": rate, "rate_gbps": _rate_gbps(rate),
                    "link_layer": read(os.path.join(path, "link_layer")),
                    "counters": {}}
            for counter in IB_COUNTERS:
                value = _int(read(os.path.join(path, "counters", counter)))
                if value is not None:
                    port["counters"][counter] = value
            if (port["link_layer"] or "").lower() == "ethernet":
                ndev = read(os.path.join(path, "gid_attrs", "ndevs", "0"))
                port["netdev"] = netdev(base, ndev) if ndev else None
            ports.append(port)
    return ports


def state_name(text):
    """'4: ACTIVE' -> 'ACTIVE'; '5: LinkUp' -> 'LinkUp'."""
    return (text or "").split(":", 1)[-1].strip()


def aer(base, bdf):
    """{"correctable": n, "nonfatal": n, "fatal": n, "lines": {...}} for one PCI function, or None where the
    kernel exposes no AER counters for it (no AER capability, or a VM that hides it)."""
    path = os.path.join(base, "bus", "pci", "devices", bdf)
    found, lines = {}, {}
    for kind, name, total in AER_KINDS:
        text = read(os.path.join(path, name))
        if text is None:
            continue
        counts = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
        found[kind] = counts.get(total, sum(v for k, v in counts.items() if not k.startswith("TOTAL")))
        lines[kind] = {k: v for k, v in counts.items() if v and not k.startswith("TOTAL")}
    if not found:
        return None
    found["lines"] = lines
    return found


def gpu_and_hca_functions(base):
    """[(bdf, "GPU" | "HCA <name>")] for the NVIDIA GPUs (display / 3D controllers) and the HCAs."""
    devices = os.path.join(base, "bus", "pci", "devices")
    found = []
    for bdf in _listdir(devices):
        vendor = read(os.path.join(devices, bdf, "vendor"))
        klass = read(os.path.join(devices, bdf, "class")) or ""
        if vendor == NVIDIA and klass.startswith("0x03"):
            found.append((bdf, "GPU"))
    ib = os.path.join(base, "class", "infiniband")
    for hca in _listdir(ib):
        bdf = pci_address(os.path.join(ib, hca))
        if bdf and bdf not in [b for b, _ in found]:
            found.append((bdf, "HCA %s" % hca))
    return found


def upstream_ports(base, bdf):
    """The PCI functions above `bdf`, nearest first (the PCIe switch's downstream and upstream ports, the root
    port): bus/pci/devices/<bdf> links into devices/pci<domain:bus>/<root port>/.../<bdf>, one directory per hop."""
    path = os.path.realpath(os.path.join(base, "bus", "pci", "devices", bdf))
    parts = path.split(os.sep)
    if not parts or parts[-1] != bdf:
        return []
    found = []
    for part in reversed(parts[:-1]):
        if not BDF.match(part):
            break  # the root complex (pci0000:00) or above: no more ports
        found.append(part)
    return found

