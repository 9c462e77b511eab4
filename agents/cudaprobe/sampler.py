"""NVML readings of one GPU about once a second, taken in a thread of the GPU worker that loads it (burn-in).

Each sample: seconds since the start, SM and memory clocks, power draw, GPU and memory temperature, utilisation,
the clock-event (throttle) reason bitmask, volatile ECC counters, the PCIe replay counter, the compute PIDs on the
GPU and any Xid event NVML delivered since the last sample. A reading NVML does not support is left out (None),
never invented. Without pynvml the sampler says so and takes nothing: the check judges throughput alone and
warns that nothing else was watched (burnin_unmonitored).
"""

import os
import threading
import time

# nvml.h, nvmlClocksEventReasons (formerly ClocksThrottleReasons)
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
NVML_FI_DEV_MEMORY_TEMP = 82  # nvml.h field id: HBM temperature, where the GPU reports it
NVML_EVENT_TYPE_XID = 0x8  # nvmlEventTypeXidCriticalError


def reason_names(mask):
    return [name for bit, name in sorted(REASON_BITS.items()) if mask & bit]


def _try(func, *args):
    try:
        return func(*args)
    except Exception:
        return None


def gpu_handle(nv, torch, device):
    """NVML's handle of torch's `device`, by UUID (CUDA_VISIBLE_DEVICES reorders and hides GPUs)."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    if uuid:
        return nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid)
    return nv.nvmlDeviceGetHandleByIndex(device)


def ecc_counts(nv, handle):
    """(corrected, uncorrected) volatile ECC totals, None where ECC is off or unsupported."""
    return (_try(nv.nvmlDeviceGetTotalEccErrors, handle, 0, nv.NVML_VOLATILE_ECC),
            _try(nv.nvmlDeviceGetTotalEccErrors, handle, 1, nv.NVML_VOLATILE_ECC))


def read_info(nv, handle):
    """The GPU's fixed figures the samples are judged against."""
    power_limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
    return {"name": _try(lambda: _text(nv.nvmlDeviceGetName(handle))),
            "power_limit_w": None if power_limit is None else power_limit / 1000.0,
            "max_sm_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM),
            "max_mem_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_MEM)}


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _memory_temp(nv, handle):
    values = _try(nv.nvmlDeviceGetFieldValues, handle, [NVML_FI_DEV_MEMORY_TEMP])
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    value = values[0].value
    for attr in ("uiVal", "ulVal", "ullVal", "siVal", "sllVal"):
        reading = getattr(value, attr, None)
        if reading:
            return int(reading)
    return None


def read_sample(nv, handle, started):
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nv.nvmlDeviceGetCurrentClocksThrottleReasons
    power = _try(nv.nvmlDeviceGetPowerUsage, handle)
    corrected, uncorrected = ecc_counts(nv, handle)
    util = _try(nv.nvmlDeviceGetUtilizationRates, handle)
    processes = _try(nv.nvmlDeviceGetComputeRunningProcesses, handle)
    return {"t": round(time.monotonic() - started, 2),
            "sm_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
            "mem_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM),
            "power_w": None if power is None else round(power / 1000.0, 1),
            "temp_gpu_c": _try(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
            "temp_mem_c": _memory_temp(nv, handle),
            "util": None if util is None else util.gpu,
            "reasons": _try(reasons, handle),
            "ecc_corrected_volatile": corrected, "ecc_uncorrected_volatile": uncorrected,
            "pcie_replay": _try(nv.nvmlDeviceGetPcieReplayCounter, handle),
            "pids": None if processes is None else sorted({p.pid for p in processes}),
            "mem_used_mib": _used_mib(nv, handle)}


def _used_mib(nv, handle):
    info = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    return None if info is None else int(info.used // 2**20)


class Sampler:
    """Samples one GPU in a daemon thread until stop(); `result()` gives info, samples, Xid events and notes."""

    def __init__(self, torch, device, interval_s=1.0):
        self.interval_s = interval_s
        self.samples, self.xids, self.notes = [], [], []
        self.info = {}
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = None
        self.event_waits, self.event_errors, self.event_error = 0, 0, None  # Xid event waits, and those refused
        try:
            import pynvml as nv
            nv.nvmlInit()
        except Exception as exc:  # no NVML here: throughput alone is judged
            self.nv = None
            self.notes.append("NVML unavailable in the worker (%s: %s): no clocks, power or throttle readings" % (
                type(exc).__name__, exc))
            return
        self.nv = nv
        self.handle = gpu_handle(nv, torch, device)
        self.info = read_info(nv, self.handle)
        self.events = None
        try:
            self.events = nv.nvmlEventSetCreate()
            nv.nvmlDeviceRegisterEvents(self.handle, NVML_EVENT_TYPE_XID, self.events)
        except Exception as exc:
            self.events = None
            self.notes.append("NVML Xid events not delivered here (%s): Xid read from the kernel log only" %
                              type(exc).__name__)

    def start(self):
        if self.nv is not None:
            self.samples.append(read_sample(self.nv, self.handle, self.started))
            self._thread = threading.Thread(target=self._run, daemon=True, name="nvml-sampler")
            self._thread.start()
        return self

    def _wait(self):
        """Wait one interval; an Xid event ends the wait early and is kept."""
        if self.events is None:
            self._stop.wait(self.interval_s)
            return
        began = time.monotonic()
        self.event_waits += 1
        try:
            data = self.nv.nvmlEventSetWait_v2(self.events, int(self.interval_s * 1000))
            self.xids.append({"t": round(time.monotonic() - self.started, 2), "xid": int(data.eventData)})
        except Exception as exc:
            # NVML_ERROR_TIMEOUT: no event in this interval. Any other error (a GPU lost, events unsupported) comes
            # back at once: the rest of the interval is waited out, or the loop would sample as fast as NVML answers
            if "timeout" not in str(exc).lower():
                self.event_errors += 1
                self.event_error = "%s: %s" % (type(exc).__name__, str(exc)[:120])
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def _run(self):
        while not self._stop.is_set():
            self._wait()
            if self._stop.is_set():
                break
            self.samples.append(read_sample(self.nv, self.handle, self.started))

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 + self.interval_s)
            self.samples.append(read_sample(self.nv, self.handle, self.started))
        return self

    def close(self):
        if self.nv is None:
            return
        try:
            if self.events is not None:
                self.nv.nvmlEventSetFree(self.events)
            self.nv.nvmlShutdown()
        except Exception:
            pass

    def xid_events(self):
        """Whether NVML delivered Xid events through the load: registered, and not every wait refused (an error
        other than a timeout at each wait: nothing could have arrived); where not, a note says why."""
        if getattr(self, "events", None) is None:
            return False
        if self.event_waits and self.event_errors == self.event_waits:
            note = "NVML Xid event waits all failed (%s): Xid read from the kernel log only" % self.event_error
            if note not in self.notes:
                self.notes.append(note)
            return False
        return True

    def result(self):
        # xid_events: whether NVML was delivering Xid events to this sampler (where not, the notes say why)
        delivered = self.xid_events()
        return {"info": self.info, "samples": self.samples, "xids": self.xids, "notes": self.notes,
                "self_pid": os.getpid(), "xid_events": delivered}
