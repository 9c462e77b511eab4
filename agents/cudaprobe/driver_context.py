"""This worker's CUDA context, made through the driver API in a thread while torch imports (issue 22).

`import torch` is Python work that holds the GIL for seconds; cuInit and making the primary context are driver work
that releases it (ctypes drops the GIL around each call): 0.1-0.16 s and 0.33-0.36 s on a lent H200 host. Done
meanwhile, torch finds the driver initialised and its device's primary context made (the runtime uses that same
context), so its first `is_available()` takes 0.00 s instead of 0.18 s and its first tensor 0.02 s instead of 0.14 s.
Only the measuring workers do it (CUDAPROBE_WORKER_CONTEXT=1), each for its own GPU (LOCAL_RANK), as torch would
on its first task; a rank with no GPU of that number makes none. Any failure is left for torch to meet and report.
"""

import ctypes
import os
import threading
import time


class DriverContext:
    def __init__(self, ordinal):
        self.ordinal = ordinal
        self.info = {"ordinal": ordinal}
        self.thread = threading.Thread(target=self._make, name="cuda-context", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _make(self):
        started = time.perf_counter()
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            self.info["error"] = "libcuda.so.1: %s" % exc
            return
        rc = lib.cuInit(0)
        self.info["init_s"] = time.perf_counter() - started
        count = ctypes.c_int(0)
        if rc or lib.cuDeviceGetCount(ctypes.byref(count)) or self.ordinal >= count.value:
            self.info["error"] = "cuInit %d, %d devices" % (rc, count.value)
            return
        device, context = ctypes.c_int(0), ctypes.c_void_p()
        started = time.perf_counter()
        rc = lib.cuDeviceGet(ctypes.byref(device), self.ordinal) or lib.cuDevicePrimaryCtxRetain(
            ctypes.byref(context), device)
        if rc:
            self.info["error"] = "CUresult %d" % rc
            return
        self.info["context_s"] = time.perf_counter() - started

    def result(self, timeout=30.0):
        """What it did: {"ordinal", "init_s", "context_s"} or {"ordinal", "error"} (waits for the thread)."""
        self.thread.join(timeout)
        return dict(self.info) if not self.thread.is_alive() else {"ordinal": self.ordinal, "error": "still running"}


def start_if_asked(environ=os.environ):
    """Start making the context when this worker is asked to (CUDAPROBE_WORKER_CONTEXT=1), else None."""
    if environ.get("CUDAPROBE_WORKER_CONTEXT") != "1":
        return None
    try:
        ordinal = int(environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return None
    return DriverContext(ordinal).start()
