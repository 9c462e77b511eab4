"""Run and parse nvidia-smi (the fallback when NVML bindings are absent, and the operator's own view)."""

import re

from agents.cudaprobe import proc

QUERY_FIELDS = (
    "index,name,uuid,driver_version,pci.bus_id,memory.total,memory.used,temperature.gpu,power.draw,"
    "power.limit,clocks.current.sm,clocks.max.sm,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,compute_mode,persistence_mode,ecc.mode.current,"
    "ecc.errors.uncorrected.volatile.total,retired_pages.pending,clocks_event_reasons.active"
)
APPS_FIELDS = "pid,process_name,used_gpu_memory,gpu_uuid"

DRIVER_MESSAGES = (
    ("couldn't communicate with the nvidia driver", "driver_unreachable"),
    ("driver/library version mismatch", "driver_library_mismatch"),
    ("no devices were found", "no_gpus_found"),
    ("unable to determine the device handle", "gpu_lost"),
    ("gpu is lost", "gpu_lost"),
    ("insufficient permissions", "dev_nodes_inaccessible"),
)


def nvidia_smi(args, timeout, env=None):
    return proc.run(["nvidia-smi"] + list(args), timeout, env=env)


def failure_signature(result):
    """A stable code for why nvidia-smi did not answer, or None when it did."""
    if result.missing:
        return "nvidia_smi_missing"
    if result.timed_out:
        return "nvidia_smi_hang"
    if result.returncode == 0:
        return None
    text = result.combined().lower()
    for needle, signature in DRIVER_MESSAGES:
        if needle in text:
            return signature
    return "nvidia_smi_error"


def parse_list(text):
    """`nvidia-smi -L` lines: GPU 0: NVIDIA H200 (UUID: GPU-...)."""
    gpus = []
    for match in re.finditer(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)", text, re.M):
        gpus.append({"index": int(match.group(1)), "name": match.group(2), "uuid": match.group(3)})
    return gpus


def _number(value):
    value = value.strip()
    match = re.match(r"^(-?[0-9.]+)", value)
    if not match or value.startswith("["):
        return None
    number = float(match.group(1))
    return int(number) if number.is_integer() else number


def parse_csv(text):
    """`--format=csv` with header and units: a list of dicts keyed by field name (units dropped)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    keys = [re.sub(r"\s*\[.*\]$", "", key.strip()) for key in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(keys):
            continue
        rows.append(dict(zip(keys, values)))
    return rows


def numeric(row, key):
    return _number(row.get(key, ""))


def parse_query_text(text):
    """`nvidia-smi -q`: header facts plus one dict of selected sections per GPU."""
    facts = {}
    for key, label in (("driver_version", "Driver Version"), ("cuda_version", "CUDA Version")):
        match = re.search(r"^%s\s*:\s*(\S+)" % re.escape(label), text, re.M)
        if match:
            facts[key] = match.group(1)
    gpus = []
    for block in re.split(r"^GPU (?=[0-9A-Fa-f]{8}:)", text, flags=re.M)[1:]:
        gpu = {"bus_id": block.split("\n", 1)[0].strip()}
        for key, pattern in (
            ("name", r"Product Name\s*:\s*(.+)"),
            ("vbios", r"VBIOS Version\s*:\s*(.+)"),
            ("performance_state", r"Performance State\s*:\s*(\S+)"),
            ("mig_mode", r"MIG Mode\s*\n\s*Current\s*:\s*(\S+)"),
            ("recovery_action", r"GPU Recovery Action\s*:\s*(.+)"),
        ):
            match = re.search(pattern, block)
            if match:
                gpu[key] = match.group(1).strip()
        remap = re.search(r"Remapped Rows\n((?:\s{8}.*\n)+)", block)
        if remap:
            section = remap.group(1)
            for key, label in (
                ("remap_correctable", "Correctable Error"),
                ("remap_uncorrectable", "Uncorrectable Error"),
                ("remap_pending", "Pending"),
                ("remap_failure", "Remapping Failure Occurred"),
            ):
                match = re.search(r"^\s+%s\s*:\s*(.+)$" % re.escape(label), section, re.M)
                if match:
                    gpu[key] = match.group(1).strip()
        gpus.append(gpu)
    facts["gpus"] = gpus
    return facts


ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d?_\S+|mlx\S+)$")
LINK = re.compile(r"^(NV\d+|SYS|SOC|NODE|PHB|PXB|PIX)$")


def parse_topology(text):
    """`nvidia-smi topo -m`: {"gpus": [0, 1, ...], "links": {"0-1": "NV18", ...}, "nics": [...]} or None.

    A link is the kind printed between two GPUs: NV<n> (n bonded NVLinks), PIX, PXB, PHB, NODE or SYS (older
    drivers print SOC for SYS). Tab- or space-aligned output alike: cells hold no spaces, so each row's first
    cells line up with the header's device columns (GPUs, then NICs); affinity columns and the legend follow.
    """
    lines = [ANSI.sub("", line) for line in (text or "").splitlines()]
    header = next((line.split() for line in lines if line.split()[:1] == ["GPU0"]), None)
    if header is None:
        return None
    devices = []
    for cell in header:
        if not DEVICE.match(cell):
            break
        devices.append(cell)
    links, gpus, nics = {}, [], []
    for line in lines:
        cells = line.split()
        if len(cells) < 2 or cells[0] not in devices or cells is header or cells == header:
            continue
        if not cells[0].startswith("GPU"):
            nics.append(cells[0])
            continue
        row = int(cells[0][3:])
        gpus.append(row)
        for column, cell in zip(devices, cells[1:1 + len(devices)]):
            if column.startswith("GPU") and column != cells[0] and LINK.match(cell):
                links["%d-%d" % tuple(sorted((row, int(column[3:]))))] = "SYS" if cell == "SOC" else cell
    return {"gpus": sorted(set(gpus)), "links": links, "nics": nics} if gpus else None
