"""Copy the sysfs that the fabric checks read into a tree that CUDAPROBE_SYSFS can replay.

    python3 bench/fabric_capture.py OUT_DIR [--sys /sys]

OUT_DIR gets class/infiniband (every port's state, phys_state, rate, link_layer, counters, hw_counters and the
netdev a RoCE port sits on), class/net (each interface's top-level attributes), and bus/pci/devices/<bdf> for the
NVIDIA GPUs, the HCAs and the network functions (vendor, device, class, current/max link speed and width and the
aer_* counters). Each `device` link is kept as a relative link inside OUT_DIR, so the tree reads like /sys.
sysfs files are read one by one (tar would pad them to their nominal 4 KiB); unreadable ones are left out.
Standard library only: an operator can run it on any host and send us the tar of OUT_DIR.
"""

import argparse
import os
import re
import sys

PCI_FILES = ("vendor", "device", "class", "current_link_speed", "current_link_width", "max_link_speed",
             "max_link_width", "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal", "numa_node")
NVIDIA, MELLANOX = "0x10de", "0x15b3"
NET_SUBDIRS = ("statistics",)


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(65536)
    except OSError:
        return None


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def _copy_files(src, dst, recurse=()):
    """The regular files of src (and of its subdirectories named in recurse) into dst."""
    try:
        names = sorted(os.listdir(src))
    except OSError:
        return
    for name in names:
        path = os.path.join(src, name)
        if os.path.islink(path):
            continue
        if os.path.isdir(path):
            if name in recurse:
                _copy_files(path, os.path.join(dst, name), recurse)
            continue
        data = _read(path)
        if data is not None:
            _write(os.path.join(dst, name), data)


def _pci_of(path):
    """The PCI address a class device sits on (its `device` link), or None (virtual devices)."""
    if not os.path.exists(os.path.join(path, "device")):
        return None
    parts = os.path.realpath(os.path.join(path, "device")).split(os.sep)
    addresses = [part for part in parts if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", part)]
    return addresses[-1] if addresses else None  # a virtio net device sits one level under its function


def _link_device(out, class_dir, bdf):
    if bdf:
        os.symlink(os.path.relpath(os.path.join(out, "bus", "pci", "devices", bdf), class_dir),
                   os.path.join(class_dir, "device"))


def capture(sys_root, out):
    devices = set()
    ib_root = os.path.join(sys_root, "class", "infiniband")
    for hca in sorted(os.listdir(ib_root)) if os.path.isdir(ib_root) else []:
        src, dst = os.path.join(ib_root, hca), os.path.join(out, "class", "infiniband", hca)
        _copy_files(src, dst)
        ports = os.path.join(src, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            _copy_files(os.path.join(ports, port), os.path.join(dst, "ports", port),
                        recurse=("counters", "hw_counters", "gid_attrs", "ndevs"))
        bdf = _pci_of(src)
        os.makedirs(dst, exist_ok=True)
        _link_device(out, dst, bdf)
        devices.add(bdf)
    net_root = os.path.join(sys_root, "class", "net")
    for netdev in sorted(os.listdir(net_root)) if os.path.isdir(net_root) else []:
        src, dst = os.path.join(net_root, netdev), os.path.join(out, "class", "net", netdev)
        _copy_files(src, dst, recurse=NET_SUBDIRS)
        os.makedirs(dst, exist_ok=True)
        bdf = _pci_of(src)
        _link_device(out, dst, bdf)
        devices.add(bdf)
    pci_root = os.path.join(sys_root, "bus", "pci", "devices")
    for bdf in sorted(os.listdir(pci_root)) if os.path.isdir(pci_root) else []:
        vendor = (_read(os.path.join(pci_root, bdf, "vendor")) or b"").decode().strip()
        klass = (_read(os.path.join(pci_root, bdf, "class")) or b"").decode().strip()
        if vendor in (NVIDIA, MELLANOX) or klass.startswith("0x02") or bdf in devices:
            for name in PCI_FILES:
                data = _read(os.path.join(pci_root, bdf, name))
                if data is not None:
                    _write(os.path.join(out, "bus", "pci", "devices", bdf, name), data)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--sys", default="/sys")
    args = parser.parse_args(argv)
    capture(args.sys, args.out)
    for base, _, files in sorted(os.walk(args.out)):
        sys.stdout.write("%s: %d file(s)\n" % (os.path.relpath(base, args.out), len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
