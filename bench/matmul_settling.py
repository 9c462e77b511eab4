"""How a dense matmul's throughput moves over its first seconds from idle, per dtype, with NVML's SM clock, power
and temperature every 20 ms beside it (issue 22: why the agent times matmul after 0.25 s of products).

    python3 bench/matmul_settling.py OUT.json        # on a GPU host, GPU 0; ~15 s

Per dtype (bf16, fp16, TF32 3 s each, fp32 2 s): 8192^3 operands made, 2 s idle (the clocks fall back), then
products in chunks (5, 5, 2, 1 products) timed with CUDA events until the time is up. Prints the first chunks and
the median TFLOP/s per time window; OUT.json keeps every chunk (seconds since the start, TFLOP/s) and the NVML
samples. A lent H200's: tests/fixtures/real/issue22/settling/.
"""

import json
import sys
import threading
import time

PLANS = (("bf16", "bfloat16", False, 5, 3.0), ("fp16", "float16", False, 5, 3.0), ("tf32", "float32", True, 2, 3.0),
         ("fp32", "float32", False, 1, 2.0))
WINDOWS = ((0, .1), (.1, .2), (.2, .4), (.4, .7), (.7, 1), (1, 1.5), (1.5, 2), (2, 3))


def sample_nvml(pynvml, handle, samples, stop):
    started = time.perf_counter()
    while not stop.is_set():
        samples.append((time.perf_counter() - started, pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetPowerUsage(handle) / 1000, pynvml.nvmlDeviceGetTemperature(handle, 0)))
        time.sleep(0.02)


def curve(torch, dtype, per_chunk, seconds, at_start, n=8192):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.cuda.synchronize()
    time.sleep(2.0)  # idle: clocks fall back
    at_start()  # NVML's samples and the chunks share their clock's start
    chunks, started = [], time.perf_counter()
    while time.perf_counter() - started < seconds:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(per_chunk):
            a @ b
        end.record()
        end.synchronize()
        tflops = 2 * n**3 * per_chunk / (begin.elapsed_time(end) / 1000) / 1e12
        chunks.append((round(time.perf_counter() - started, 4), round(tflops, 1)))
    return chunks


def main(path):
    import pynvml
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    out = {}
    for name, dtype_name, tf32, per_chunk, seconds in PLANS:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        samples, stop = [], threading.Event()
        sampler = threading.Thread(target=sample_nvml, args=(pynvml, handle, samples, stop))
        chunks = curve(torch, getattr(torch, dtype_name), per_chunk, seconds, sampler.start)
        stop.set()
        sampler.join()
        out[name] = {"chunks": chunks, "nvml": [tuple(round(x, 3) for x in s) for s in samples]}

        def window(lo, hi):
            values = sorted(c[1] for c in chunks if lo <= c[0] < hi)
            return values[len(values) // 2] if values else None

        print(name, "first", [c[1] for c in chunks[:6]], "median by window:",
              [(lo, hi, window(lo, hi)) for lo, hi in WINDOWS], "clocks", [s[1] for s in samples[::10]],
              "power", [round(s[2]) for s in samples[::10]], flush=True)
    with open(path, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv[1])
