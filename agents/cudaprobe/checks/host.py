"""L0: the host itself (OS, CPU, memory, disk, Python, container, CUDA_VISIBLE_DEVICES)."""

import os
import platform
import shutil
import sys

from agents.cudaprobe.model import failed, passed, warned
from agents.cudaprobe.registry import IN_WATCH_TOO, check


def _meminfo_gib(path):
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        return None
    return None


def detect_container(ctx):
    if os.path.exists(ctx.path("DOCKERENV", "/.dockerenv")):
        return "docker"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    try:
        with open("/proc/1/cgroup") as fh:
            text = fh.read()
    except OSError:
        return None
    for name in ("kubepods", "docker", "containerd", "lxc"):
        if name in text:
            return name
    return None


@check("host.system", "L0", "Operating system, CPU, memory, disk", modes=IN_WATCH_TOO)
def host_system(ctx):
    uname = platform.uname()
    mem = _meminfo_gib(ctx.path("PROC_MEMINFO", "/proc/meminfo"))
    disk = shutil.disk_usage(os.path.expanduser("~"))
    inv = ctx.inventory()
    inv["kernel"] = uname.release
    inv["os"] = "%s %s" % (uname.system, uname.machine)
    metrics = {"cpu_count": os.cpu_count() or 0, "disk_free_gib": round(disk.free / 2**30, 1)}
    if mem is not None:
        metrics["ram_gib"] = round(mem, 1)
    summary = "%s %s, %d CPUs, %s GiB RAM, %.0f GiB free in home" % (
        uname.system, uname.release, metrics["cpu_count"], metrics.get("ram_gib", "?"), metrics["disk_free_gib"])
    if metrics["disk_free_gib"] < 1:
        return warned(summary + ": under 1 GiB free", metrics=metrics, signatures=["disk_nearly_full"])
    return passed(summary, metrics=metrics)


@check("host.python", "L0", "Python interpreter", modes=IN_WATCH_TOO)
def host_python(ctx):
    ctx.inventory()["python"] = platform.python_version()
    version = sys.version_info[:2]
    evidence = "%s (%s)" % (sys.version.replace("\n", " "), sys.executable)
    if version < (3, 8):
        return failed("Python %d.%d is older than 3.8" % version, evidence=evidence, signatures=["python_too_old"])
    return passed("Python %s at %s" % (platform.python_version(), sys.executable), evidence=evidence)


@check("host.container", "L0", "Container detection", modes=IN_WATCH_TOO)
def host_container(ctx):
    kind = detect_container(ctx)
    ctx.facts["container"] = kind
    if kind:
        return passed("running inside a container (%s): GPUs must be passed through by the runtime" % kind)
    return passed("not inside a container")


def visible_devices(environ):
    """Parse CUDA_VISIBLE_DEVICES: None when unset, else the list of entries CUDA would honour."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    entries = []
    for item in raw.split(","):
        item = item.strip()
        # CUDA stops at the first invalid entry; a negative index hides everything after it.
        if not item or item.startswith("-"):
            break
        entries.append(item)
    return entries


@check("host.cuda_visible_devices", "L0", "CUDA_VISIBLE_DEVICES", modes=IN_WATCH_TOO)
def host_visible_devices(ctx):
    entries = visible_devices(ctx.environ)
    ctx.facts["visible_devices"] = entries
    raw = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    if entries is None:
        return passed("not set: every GPU is visible")
    if not entries:
        return warned("CUDA_VISIBLE_DEVICES=%r hides every GPU from CUDA programs" % raw,
                      evidence="CUDA_VISIBLE_DEVICES=%s" % raw, signatures=["cuda_visible_devices_hides_all"])
    return passed("set to %r: %d GPU(s) visible to CUDA" % (raw, len(entries)),
                  evidence="CUDA_VISIBLE_DEVICES=%s" % raw)
