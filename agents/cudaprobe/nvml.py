"""Read the L1 facts through NVML (pynvml, package nvidia-ml-py) in the shape nvidia-smi's parsers give.

Run as a child (`python -m agents.cudaprobe.nvml`) so that a hung driver call is killed under the
check's budget like any other. It prints one JSON object: the driver and CUDA versions, one row per
GPU keyed like `nvidia-smi --query-gpu` (values as nvidia-smi prints them, "[N/A]" where a query is
not supported), the `-q` facts (VBIOS, remapped rows, the driver's recovery action) and the compute processes
(with the UUID of the GPU each runs on). When pynvml is
missing or NVML cannot start, it prints {"error": ...} and the agent falls back to nvidia-smi.
"""

import json
import sys

NA = "[N/A]"
# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvml.h, drivers R570 and later): what the driver says a faulted GPU needs,
# a nvmlDeviceGpuRecoveryAction_t, named as nvidia-smi -q prints it ("GPU Recovery Action : None")
FIELD_RECOVERY_ACTION = 230
RECOVERY_ACTIONS = {0: "None", 1: "Reset", 2: "Reboot", 3: "Drain P2P", 4: "Drain and Reset",
                    5: "Recover IMEX Domain", 6: "Bus Reset", 7: "System Reboot"}
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _get(func, *args, fmt=_text):
    """One NVML query; NA when this GPU or driver does not support it."""
    try:
        return fmt(func(*args))
    except Exception:
        return NA


def _memory(nv, h):
    """Memory as nvidia-smi shows it: v2 leaves the driver's reserved memory out of `used`."""
    try:
        return nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    except Exception:
        return nv.nvmlDeviceGetMemoryInfo(h)


def _recovery_action(nv, handle):
    """The driver's recovery action for this GPU, or NA where the driver or the bindings do not have it."""
    try:
        value = nv.nvmlDeviceGetFieldValues(handle, [FIELD_RECOVERY_ACTION])[0]
    except Exception:
        return NA
    if value.nvmlReturn != 0:
        return NA
    code = int(value.value.uiVal)
    return RECOVERY_ACTIONS.get(code, "Unknown (%d)" % code)


def _gpu(nv, index):
    h = nv.nvmlDeviceGetHandleByIndex(index)
    mib = lambda b: "%d MiB" % (b // 2**20)  # noqa: E731
    watts = lambda mw: "%.2f W" % (mw / 1000.0)  # noqa: E731
    enabled = lambda v: "Enabled" if v else "Disabled"  # noqa: E731
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    row = {
        "index": str(index),
        "name": _get(nv.nvmlDeviceGetName, h),
        "uuid": _get(nv.nvmlDeviceGetUUID, h),
        "pci.bus_id": _get(lambda: nv.nvmlDeviceGetPciInfo(h).busId),
        "memory.total": _get(lambda: _memory(nv, h).total, fmt=mib),
        "memory.used": _get(lambda: _memory(nv, h).used, fmt=mib),
        "temperature.gpu": _get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        "power.draw": _get(nv.nvmlDeviceGetPowerUsage, h, fmt=watts),
        "power.limit": _get(nv.nvmlDeviceGetEnforcedPowerLimit, h, fmt=watts),
        "clocks.current.sm": _get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM, fmt=lambda v: "%d MHz" % v),
        "clocks.max.sm": _get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM, fmt=lambda v: "%d MHz" % v),
        "pcie.link.gen.current": _get(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie.link.gen.max": _get(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie.link.width.current": _get(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie.link.width.max": _get(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
        "compute_mode": _get(nv.nvmlDeviceGetComputeMode, h, fmt=lambda v: COMPUTE_MODES.get(v, str(v))),
        "persistence_mode": _get(nv.nvmlDeviceGetPersistenceMode, h, fmt=enabled),
        "ecc.mode.current": _get(lambda: nv.nvmlDeviceGetEccMode(h)[0], fmt=enabled),
        "ecc.errors.uncorrected.volatile.total": _get(
            nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC),
        "retired_pages.pending": _get(nv.nvmlDeviceGetRetiredPagesPendingStatus, h,
                                      fmt=lambda v: "Yes" if v else "No"),
        "clocks_event_reasons.active": _get(reasons, h, fmt=lambda v: "0x%016x" % v),
    }
    q = {"bus_id": row["pci.bus_id"], "name": row["name"], "vbios": _get(nv.nvmlDeviceGetVbiosVersion, h),
         "mig_mode": _get(lambda: nv.nvmlDeviceGetMigMode(h)[0], fmt=enabled),
         "recovery_action": _recovery_action(nv, h)}
    remap = _get(nv.nvmlDeviceGetRemappedRows, h, fmt=list)
    if remap != NA:
        correctable, uncorrectable, pending, failure = remap[:4]
        q.update(remap_correctable=str(correctable), remap_uncorrectable=str(uncorrectable),
                 remap_pending="Yes" if pending else "No", remap_failure="Yes" if failure else "No")
    apps = []
    try:
        for app in nv.nvmlDeviceGetComputeRunningProcesses(h):
            used = app.usedGpuMemory
            apps.append({"pid": str(app.pid), "process_name": NA, "gpu_uuid": row["uuid"],
                         "used_gpu_memory": NA if used is None else "%d MiB" % (used // 2**20)})
    except Exception:
        pass
    return row, q, apps


def session(query):
    """query(pynvml) between NVML's init and shutdown: its facts, or {"error": ..., "message": ...} when pynvml is
    missing, NVML cannot start or a query fails. The frame of every NVML child (this module, nvml_fabric)."""
    try:
        import pynvml as nv
    except ImportError as exc:
        return {"error": "pynvml_missing", "message": str(exc)}
    try:
        nv.nvmlInit()
    except Exception as exc:
        return {"error": "nvml_init_failed", "message": "%s: %s" % (type(exc).__name__, exc)}
    try:
        return query(nv)
    except Exception as exc:
        return {"error": "nvml_query_failed", "message": "%s: %s" % (type(exc).__name__, exc)}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def print_facts(query):
    """A child's whole output: one line of JSON, the facts of session(query)."""
    sys.stdout.write(json.dumps(session(query)) + "\n")


def _facts(nv):
    cuda = nv.nvmlSystemGetCudaDriverVersion_v2()
    facts = {"driver_version": _text(nv.nvmlSystemGetDriverVersion()),
             "cuda_version": "%d.%d" % (cuda // 1000, cuda % 1000 // 10),
             "nvml_version": _get(nv.nvmlSystemGetNVMLVersion), "rows": [], "gpus": [], "apps": []}
    for index in range(nv.nvmlDeviceGetCount()):
        row, q, apps = _gpu(nv, index)
        facts["rows"].append(row)
        facts["gpus"].append(q)
        facts["apps"].extend(apps)
    return facts


def read():
    return session(_facts)


if __name__ == "__main__":
    print_facts(_facts)
