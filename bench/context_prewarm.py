"""Does making the CUDA context through the driver API in a thread, while torch imports, save torch's own first
CUDA calls? (issue 22; agents/cudaprobe/driver_context.py is what came of it)

    python3 bench/context_prewarm.py plain|thread     # on a GPU host; prints when each step ended

`plain` imports torch, then asks is_available(), makes a tensor and a matmul; `thread` does the same with cuInit
and cuDevicePrimaryCtxRetain(GPU 0) run in a thread from the start. Output of a lent H200:
tests/fixtures/real/issue22/settling/probe-output.txt.
"""

import ctypes
import sys
import threading
import time

t0 = time.perf_counter()
info = {}


def warm():
    started = time.perf_counter()
    lib = ctypes.CDLL("libcuda.so.1")
    info["init_rc"] = lib.cuInit(0)
    info["init_s"] = time.perf_counter() - started
    device = ctypes.c_int()
    info["get_rc"] = lib.cuDeviceGet(ctypes.byref(device), 0)
    context = ctypes.c_void_p()
    started = time.perf_counter()
    info["retain_rc"] = lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
    info["retain_s"] = time.perf_counter() - started
    info["warm_done_at"] = time.perf_counter() - t0


def main(mode):
    thread = threading.Thread(target=warm, daemon=True) if mode == "thread" else None
    if thread:
        thread.start()
    import torch

    info["imported_at"] = time.perf_counter() - t0
    if thread:
        thread.join()
        info["joined_at"] = time.perf_counter() - t0
    started = time.perf_counter()
    torch.cuda.is_available()
    info["is_available_s"] = time.perf_counter() - started
    started = time.perf_counter()
    torch.zeros(1, device=0)
    torch.cuda.synchronize()
    info["first_tensor_s"] = time.perf_counter() - started
    started = time.perf_counter()
    a = torch.randn(1024, 1024, device=0)
    (a @ a).sum().item()
    info["first_matmul_s"] = time.perf_counter() - started
    info["total"] = time.perf_counter() - t0
    print(mode, {k: round(v, 3) if isinstance(v, float) else v for k, v in info.items()}, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
