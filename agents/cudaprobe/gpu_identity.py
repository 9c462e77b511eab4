"""Which GPU a finding is about, by UUID: the key the dashboard's health events use (issue 30), since indices and
PCI addresses are this host's numbering and change when a GPU is swapped, while a UUID stays with the GPU.

The driver's own lists name each GPU three ways: an index (nvidia-smi, NVML), a PCI bus id (NVML prints
"00000000:18:00.0"; the kernel's Xid lines "PCI:0000:18:00") and a UUID (GPU-...). `known` gathers them from what
the L1 checks read; `finding` builds one entry of a check's "gpus" list (schema.json).
"""

import re

SUMMARY_CAP = 300
BUS_ID = re.compile(r"^(?:PCI:)?([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.([0-7]))?$")


def bus_key(text):
    """(domain, bus, device) of a PCI address in any of the driver's spellings, or None. The function is left
    out: the kernel's Xid lines do not print it, and a GPU is function 0."""
    match = BUS_ID.match((text or "").strip())
    if not match:
        return None
    return tuple(int(part, 16) for part in match.groups()[:3])


def known(ctx):
    """[{"index", "uuid", "bus_id"}] of this host's GPUs, from the driver's rows (NVML or nvidia-smi --query-gpu)
    and nvidia-smi -L; empty when no list was read."""
    by_index = {}
    for gpu in ctx.facts.get("driver_gpus") or []:
        by_index[int(gpu["index"])] = {"index": int(gpu["index"]), "uuid": gpu.get("uuid"), "bus_id": None}
    for row in ctx.facts.get("smi_rows") or []:
        try:
            index = int(row.get("index"))
        except (TypeError, ValueError):
            continue
        entry = by_index.setdefault(index, {"index": index, "uuid": None, "bus_id": None})
        uuid, bus = row.get("uuid"), row.get("pci.bus_id")
        if uuid and not uuid.startswith("["):
            entry["uuid"] = uuid
        if bus and bus_key(bus):
            entry["bus_id"] = bus
    return [by_index[i] for i in sorted(by_index)]


def by_index(ctx, index):
    for gpu in known(ctx):
        if gpu["index"] == index:
            return gpu
    return {"index": index, "uuid": None, "bus_id": None}


def by_bus(ctx, bus_text):
    """The GPU at this PCI address; an address no listed GPU has keeps the address, index and UUID unknown (a GPU
    fallen off the bus is often missing from the driver's list)."""
    key = bus_key(bus_text)
    for gpu in known(ctx):
        if key is not None and bus_key(gpu["bus_id"]) == key:
            return gpu
    return {"index": None, "uuid": None, "bus_id": bus_text}


def finding(gpu, status, signatures, summary, metrics=None):
    """One entry of a check's "gpus" list."""
    entry = {"index": gpu.get("index"), "uuid": gpu.get("uuid"), "status": status,
             "signatures": sorted(set(signatures)), "summary": summary[:SUMMARY_CAP]}
    if gpu.get("bus_id"):
        entry["bus_id"] = str(gpu["bus_id"])[:40]
    if metrics:
        entry["metrics"] = dict(metrics)
    return entry


WORSE = {"pass": 0, "warn": 1, "fail": 2}


def merge(findings):
    """One entry per GPU (by index, else bus id): the worst status, every signature, the summaries joined."""
    merged = {}
    for entry in findings:
        key = entry["index"] if entry["index"] is not None else entry.get("bus_id")
        if key not in merged:
            merged[key] = dict(entry, signatures=list(entry["signatures"]))
            continue
        into = merged[key]
        if WORSE[entry["status"]] > WORSE[into["status"]]:
            into["status"] = entry["status"]
        into["signatures"] = sorted(set(into["signatures"]) | set(entry["signatures"]))
        into["summary"] = ("%s; %s" % (into["summary"], entry["summary"]))[:SUMMARY_CAP]
        if entry.get("metrics"):
            into["metrics"] = dict(into.get("metrics") or {}, **entry["metrics"])
    return sorted(merged.values(), key=lambda e: (e["index"] is None, e["index"] or 0, e.get("bus_id") or ""))


NAMED_INDEX = re.compile(r"\bGPU (\d+)\b(?![:.]?[0-9A-Fa-f]*:)")
NAMED_BUS = re.compile(r"\bGPU ((?:PCI:)?[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)")
PER_GPU_METRIC = re.compile(r"^(.+)\.gpu(\d+)$")


def _grown_gpus(result, previous):
    """GPU indices whose per-GPU counters ("<counter>.gpuN" metrics) grew since the previous look (all non-zero
    ones where there is none to compare with)."""
    before = (previous or {}).get(result["id"])
    grown = set()
    for key, value in result["metrics"].items():
        match = PER_GPU_METRIC.match(key)
        if match and value and (before is None or value > before.get(key, 0)):
            grown.add(int(match.group(2)))
    return grown


def attribute(report, ctx):
    """Give the checks that judge the node as a whole (the fabric's) their GPUs where their result names them:
    by index or PCI address in the summary, or by per-GPU counters that grew. A check's own per-GPU findings are
    kept as they are; a finding that names no GPU (a port, the Fabric Manager) stays the node's."""
    for result in report["checks"]:
        if result.get("gpus") or result["status"] not in ("warn", "fail"):
            continue
        gpus = {}
        for index in _grown_gpus(result, ctx.options.get("fabric_previous")):
            gpus[index] = by_index(ctx, index)
        for match in NAMED_BUS.finditer(result["summary"]):
            gpu = by_bus(ctx, match.group(1))
            gpus[gpu["index"] if gpu["index"] is not None else gpu["bus_id"]] = gpu
        for match in NAMED_INDEX.finditer(result["summary"]):
            gpus.setdefault(int(match.group(1)), by_index(ctx, int(match.group(1))))
        if gpus:
            found = [finding(gpu, result["status"], result["signatures"], result["summary"]) for gpu in gpus.values()]
            result["gpus"] = merge(found)
