"""Who else uses a GPU while a worker measures it: read in the worker through NVML (pynvml), when it is there.

A benchmark figure taken while another process computes on the same GPU says nothing about the GPU; the checks
mark such figures busy instead of judging them slow (judge.busy_gpus). Without pynvml the answer is None: unknown.
"""

import atexit
import os

_initialised = []  # [pynvml] once NVML is up in this worker: one nvmlInit per worker, not two per task


def _nvml(pynvml):
    if not _initialised:
        pynvml.nvmlInit()
        _initialised.append(pynvml)
        atexit.register(_shutdown)


def _shutdown():
    try:
        _initialised.pop().nvmlShutdown()
    except Exception:
        pass  # the worker is ending anyway


def snapshot(torch, device):
    """{"pids": [compute pids on this GPU], "util": GPU utilisation %, "self": this worker's pid} or None."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        _nvml(pynvml)
        handle = _handle(pynvml, torch, device)
        pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
    except Exception as exc:  # NVML missing on the host, or the query unsupported: unknown, not a failure
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    return {"pids": sorted(set(pids)), "util": util, "self": os.getpid()}


def _handle(pynvml, torch, device):
    """The NVML handle of torch's `device` (torch's order and CUDA_VISIBLE_DEVICES differ from NVML's): by UUID."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    if uuid:
        return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid)
    return pynvml.nvmlDeviceGetHandleByIndex(device)
