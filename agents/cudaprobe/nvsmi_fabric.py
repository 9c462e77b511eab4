"""Parse nvidia-smi's fabric views: `nvlink -s` (link speeds), `nvlink -e` (error counters) and the Fabric
section of `nvidia-smi -q` (the GPU's registration with the Fabric Manager on NVSwitch boards)."""

import re

GPU_HEADER = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)", re.M)
LINK_SPEED = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$", re.M)
LINK_ERROR = re.compile(r"^\s*Link (\d+):\s*([A-Za-z ]+?) Errors?\s*:\s*(\d+)", re.M)
# The counter names nvidia-smi prints, as the keys NVML's counters use (agents.cudaprobe.nvml_fabric).
ERROR_NAMES = {"replay": "replay", "recovery": "recovery", "crc": "crc_flit", "crc flit": "crc_flit",
               "crc data": "crc_data", "ecc data": "ecc_data"}


def _per_gpu(text):
    """[(index, name, block)] of each 'GPU n: name (UUID: ...)' block."""
    heads = list(GPU_HEADER.finditer(text or ""))
    return [(int(h.group(1)), h.group(2), text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)])
            for i, h in enumerate(heads)]


def parse_link_status(text):
    """`nvidia-smi nvlink -s` -> [{"index", "name", "links": [{"link", "active", "speed_gbs"}]}]."""
    gpus = []
    for index, name, block in _per_gpu(text):
        links = []
        for match in LINK_SPEED.finditer(block):
            value = match.group(2)
            speed = re.match(r"^([0-9.]+)\s*GB/s", value)
            links.append({"link": int(match.group(1)), "active": bool(speed) and float(speed.group(1)) > 0,
                          "speed_gbs": float(speed.group(1)) if speed else None, "shown": value})
        gpus.append({"index": index, "name": name, "links": links})
    return gpus


def parse_link_errors(text):
    """`nvidia-smi nvlink -e` -> {gpu index: {link: {counter: value}}} (counters named as NVML's)."""
    found = {}
    for index, _, block in _per_gpu(text):
        links = found.setdefault(index, {})
        for match in LINK_ERROR.finditer(block):
            key = ERROR_NAMES.get(match.group(2).strip().lower(), match.group(2).strip().lower().replace(" ", "_"))
            links.setdefault(int(match.group(1)), {})[key] = int(match.group(3))
    return found


def parse_fabric(text):
    """The Fabric section of each GPU in `nvidia-smi -q`: [{"bus_id", "state", "status", "clique_id",
    "cluster_uuid"}] (N/A where the board has no NVLink fabric; the clique id and cluster UUID name the NVLink
    domain and partition an NVL72 tray's GPUs registered with, all zeros on an HGX board)."""
    found = []
    for block in re.split(r"^GPU (?=[0-9A-Fa-f]{8}:)", text or "", flags=re.M)[1:]:
        bus_id = block.split("\n", 1)[0].strip()
        section = re.search(r"^    Fabric\n((?:        .*\n)+)", block, re.M)
        entry = {"bus_id": bus_id, "state": None, "status": None, "clique_id": None, "cluster_uuid": None}
        if section:
            for key, label in (("state", "State"), ("status", "Status"), ("clique_id", "CliqueId"),
                               ("cluster_uuid", "ClusterUUID")):
                match = re.search(r"^        %s\s*:\s*(.+)$" % label, section.group(1), re.M)
                if match:
                    entry[key] = match.group(1).strip()
        found.append(entry)
    return found
