"""A stand-in pynvml that serves the recorded nvidia-smi outputs in $FAKE_NVSMI_DIR through NVML's API.

The agent's NVML path then sees the same real H200 figures its nvidia-smi path parses, and a
scenario's edits (compute mode, ECC, link width ...) reach both paths alike. Put this directory on
PYTHONPATH; a file `nvml_behaviour` saying hang makes nvmlInit never return (a hung driver).
"""
import os
import re
import time

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
nvmlMemory_v2 = 0x02000028
_DIR = os.environ["FAKE_NVSMI_DIR"]
_MODES = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}


class NVMLError(Exception):
    pass


def _read(name):
    with open(os.path.join(_DIR, name)) as fh:
        return fh.read()


def _rows():
    lines = [line for line in _read("query.csv").splitlines() if line.strip()]
    keys = [re.sub(r"\s*\[.*\]$", "", k.strip()) for k in lines[0].split(",")]
    return [dict(zip(keys, (v.strip() for v in line.split(",")))) for line in lines[1:]]


def _num(handle, key):
    value = _rows()[handle][key]
    if value.startswith("["):
        raise NVMLError("Not Supported")
    return float(value.split()[0])


def _q_block(handle):
    blocks = re.split(r"^GPU (?=[0-9A-Fa-f]{8}:)", _read("q.txt"), flags=re.M)[1:]
    return blocks[handle]


def nvmlInit():
    if os.path.exists(os.path.join(_DIR, "nvml_behaviour")) and _read("nvml_behaviour").strip() == "hang":
        time.sleep(3600)


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return re.search(r"^Driver Version\s*:\s*(\S+)", _read("q.txt"), re.M).group(1)


def nvmlSystemGetCudaDriverVersion_v2():
    major, minor = re.search(r"^CUDA Version\s*:\s*(\d+)\.(\d+)", _read("q.txt"), re.M).groups()
    return int(major) * 1000 + int(minor) * 10


def nvmlSystemGetNVMLVersion():
    return "replay"


def nvmlDeviceGetCount():
    return len(_rows())


def nvmlDeviceGetHandleByIndex(index):
    return index


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def nvmlDeviceGetName(h):
    return _rows()[h]["name"]


def nvmlDeviceGetUUID(h):
    return _rows()[h]["uuid"]


def nvmlDeviceGetPciInfo(h):
    return _Obj(busId=_rows()[h]["pci.bus_id"])


def nvmlDeviceGetMemoryInfo(h, version=None):
    return _Obj(total=int(_num(h, "memory.total")) * 2**20, used=int(_num(h, "memory.used")) * 2**20)


def nvmlDeviceGetTemperature(h, sensor):
    return int(_num(h, "temperature.gpu"))


def nvmlDeviceGetPowerUsage(h):
    return int(_num(h, "power.draw") * 1000)


def nvmlDeviceGetEnforcedPowerLimit(h):
    return int(_num(h, "power.limit") * 1000)


def nvmlDeviceGetClockInfo(h, clock):
    return int(_num(h, "clocks.current.sm"))


def nvmlDeviceGetMaxClockInfo(h, clock):
    return int(_num(h, "clocks.max.sm"))


def nvmlDeviceGetCurrPcieLinkGeneration(h):
    return int(_num(h, "pcie.link.gen.current"))


def nvmlDeviceGetMaxPcieLinkGeneration(h):
    return int(_num(h, "pcie.link.gen.max"))


def nvmlDeviceGetCurrPcieLinkWidth(h):
    return int(_num(h, "pcie.link.width.current"))


def nvmlDeviceGetMaxPcieLinkWidth(h):
    return int(_num(h, "pcie.link.width.max"))


def nvmlDeviceGetComputeMode(h):
    return _MODES[_rows()[h]["compute_mode"]]


def nvmlDeviceGetPersistenceMode(h):
    return 1 if _rows()[h]["persistence_mode"] == "Enabled" else 0


def nvmlDeviceGetEccMode(h):
    on = 1 if _rows()[h]["ecc.mode.current"] == "Enabled" else 0
    return [on, on]


def nvmlDeviceGetTotalEccErrors(h, kind, counter):
    return int(_num(h, "ecc.errors.uncorrected.volatile.total"))


def nvmlDeviceGetRetiredPagesPendingStatus(h):
    value = _rows()[h]["retired_pages.pending"]
    if value.startswith("["):
        raise NVMLError("Not Supported")
    return 1 if value == "Yes" else 0


def nvmlDeviceGetCurrentClocksEventReasons(h):
    return int(_rows()[h]["clocks_event_reasons.active"], 16)


def nvmlDeviceGetVbiosVersion(h):
    return re.search(r"VBIOS Version\s*:\s*(.+)", _q_block(h)).group(1).strip()


def nvmlDeviceGetRemappedRows(h):
    section = re.search(r"Remapped Rows\n((?:\s{8}.*\n)+)", _q_block(h)).group(1)

    def field(label):
        return re.search(r"^\s+%s\s*:\s*(.+)$" % re.escape(label), section, re.M).group(1).strip()

    return (int(field("Correctable Error")), int(field("Uncorrectable Error")), field("Pending") == "Yes",
            field("Remapping Failure Occurred") == "Yes")


def nvmlDeviceGetComputeRunningProcesses(h):
    lines = [line for line in _read("apps.csv").splitlines()[1:] if line.strip()]
    return [_Obj(pid=int(line.split(",")[0]), usedGpuMemory=None) for line in lines]


NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3


class _NVMLCodeError(NVMLError):
    def __init__(self, value):
        super().__init__("NVML error %d" % value)
        self.value = value


def nvmlDeviceGetNvLinkState(h, link):
    """From the scenario's `nvidia-smi nvlink -s` (Scenario records the 18 active links the real probe's NVML read
    on the 2 x H200 host); no recording: NVLink not supported, as on the single H200 VM."""
    if not os.path.exists(os.path.join(_DIR, "nvlink_s.txt")):
        raise _NVMLCodeError(NVML_ERROR_NOT_SUPPORTED)
    blocks = re.split(r"^GPU \d+: ", _read("nvlink_s.txt"), flags=re.M)[1:]
    links = dict(re.findall(r"^\s*Link (\d+): (.+)$", blocks[h], re.M))
    if str(link) not in links:
        raise _NVMLCodeError(NVML_ERROR_INVALID_ARGUMENT)
    return 0 if "inactive" in links[str(link)] else 1


FIELD_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
_RECOVERY_CODES = {"None": 0, "Reset": 1, "Reboot": 2, "Drain P2P": 3, "Drain and Reset": 4}


def nvmlDeviceGetFieldValues(h, fields):
    """The recovery action as nvidia-smi -q printed it (GPU Recovery Action); every other field Not Supported."""
    values = []
    for field in fields:
        field_id = field[0] if isinstance(field, tuple) else field
        match = re.search(r"^    GPU Recovery Action\s*:\s*(.+)$", _q_block(h), re.M)
        if field_id == FIELD_RECOVERY_ACTION and match and match.group(1).strip() in _RECOVERY_CODES:
            values.append(_Obj(nvmlReturn=0, value=_Obj(uiVal=_RECOVERY_CODES[match.group(1).strip()])))
        else:
            values.append(_Obj(nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=_Obj(uiVal=0)))
    return values
