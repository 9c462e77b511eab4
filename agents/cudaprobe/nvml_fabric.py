"""Read each GPU's NVLinks and fabric state through NVML (pynvml), for the fabric checks.

Run as a child (`python -m agents.cudaprobe.nvml_fabric`) so that a hung driver call is killed under the check's
budget. It prints one JSON object: {"gpus": [{"index", "bus_id", "links": [...], "fabric": {...}}]} with, per
link, whether it is active, its NVLink version, its speed (MB/s, where NVML reports it), the remote end and the
error counters (replay, recovery, CRC flit, CRC data, ECC data). When pynvml is missing or NVML cannot start it
prints {"error": ...} and the checks fall back to `nvidia-smi nvlink -s / -e` and `nvidia-smi -q`.
"""

import ctypes

from agents.cudaprobe import nvml
from agents.cudaprobe.nvml import _text

# nvmlDeviceGetNvLinkErrorCounter's counters (nvml.h nvmlNvLinkErrorCounter_t), named as nvidia-smi nvlink -e.
ERROR_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3), ("ecc_data", 4))
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
REMOTE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "NVSwitch", 255: "Unknown"}
FIELD_LINK_SPEED = 164  # NVML_FI_DEV_NVLINK_GET_SPEED, scoped by link, MB/s


def _link_speed(nv, handle, link):
    try:
        value = nv.nvmlDeviceGetFieldValues(handle, [(FIELD_LINK_SPEED, link)])[0]
    except Exception:
        return None
    if value.nvmlReturn != 0:
        return None
    return int(value.value.uiVal)


def _link(nv, handle, link):
    """One link's facts, or None when the GPU has no such link (the end of its links)."""
    try:
        active = nv.nvmlDeviceGetNvLinkState(handle, link)
    except nv.NVMLError as exc:
        if getattr(exc, "value", None) in (nv.NVML_ERROR_INVALID_ARGUMENT, nv.NVML_ERROR_NOT_SUPPORTED):
            return None
        raise
    entry = {"link": link, "active": bool(active), "counters": {}}
    for key, name in (("version", "nvmlDeviceGetNvLinkVersion"),
                      ("remote_type", "nvmlDeviceGetNvLinkRemoteDeviceType")):
        func = getattr(nv, name, None)  # older bindings lack some queries
        try:
            value = func(handle, link)
            entry[key] = REMOTE_TYPES.get(value, str(value)) if key == "remote_type" else value
        except Exception:
            pass
    try:
        entry["remote_bus_id"] = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
    except Exception:
        pass
    speed = _link_speed(nv, handle, link)
    if speed is not None:
        entry["speed_mbps"] = speed
    for name, counter in ERROR_COUNTERS:
        try:
            entry["counters"][name] = int(nv.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter))
        except Exception:
            pass  # not every counter on every generation (ECC data is NVLink 4 and later)
    return entry


def _fabric(nv, handle):
    """The GPU's fabric registration (HGX boards with NVSwitch: the Fabric Manager sets it), or None."""
    try:
        info = nv.c_nvmlGpuFabricInfo_t()
        nv.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))
    except Exception:
        return None
    try:
        raw = bytes(bytearray(info.clusterUuid))[:16]
        cluster = "%s-%s-%s-%s-%s" % tuple(raw.hex()[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
    except Exception:
        cluster = None
    return {"state": FABRIC_STATES.get(info.state, str(info.state)),
            "status": "Success" if info.status == 0 else _text(nv.nvmlErrorString(info.status)),
            "clique_id": int(info.cliqueId), "cluster_uuid": cluster}


def _facts(nv):
    gpus = []
    for index in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        links = []
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            entry = _link(nv, handle, link)
            if entry is None:
                break
            links.append(entry)
        gpus.append({"index": index, "bus_id": _text(nv.nvmlDeviceGetPciInfo(handle).busId),
                     "name": _text(nv.nvmlDeviceGetName(handle)), "links": links, "fabric": _fabric(nv, handle)})
    return {"gpus": gpus}


def read():
    return nvml.session(_facts)


if __name__ == "__main__":
    nvml.print_facts(_facts)
