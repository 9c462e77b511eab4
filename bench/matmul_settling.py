"""Probe: how a matmul's throughput moves over its first seconds from idle (clocks, power), per dtype."""
import json, sys, time, threading
import torch
import pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
samples = []
stop = False
def sampler():
    t0 = time.perf_counter()
    while not stop:
        samples.append((time.perf_counter() - t0, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetPowerUsage(h) / 1000, pynvml.nvmlDeviceGetTemperature(h, 0)))
        time.sleep(0.02)
out = {}
n = 8192
for name, dtype, tf32, per, total_s in (("bf16", torch.bfloat16, False, 5, 3.0), ("fp16", torch.float16, False, 5, 3.0),
                                     ("tf32", torch.float32, True, 2, 3.0), ("fp32", torch.float32, False, 1, 2.0)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype); b = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.cuda.synchronize(); time.sleep(2.0)  # idle: clocks fall back
    samples.clear(); stop = False
    th = threading.Thread(target=sampler); th.start()
    t0 = time.perf_counter(); chunks = []
    while time.perf_counter() - t0 < total_s:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per): a @ b
        e.record(); e.synchronize()
        chunks.append((round(time.perf_counter() - t0, 4), round(2 * n**3 * per / (s.elapsed_time(e) / 1000) / 1e12, 1)))
    stop = True; th.join()
    out[name] = {"chunks": chunks, "nvml": [tuple(round(x, 3) for x in s) for s in samples]}
    tf = [c[1] for c in chunks]
    def window(lo, hi):
        v = [c[1] for c in chunks if lo <= c[0] < hi]; v.sort(); return v[len(v)//2] if v else None
    print(name, "first", tf[:6], "median by window:", [(lo, hi, window(lo, hi)) for lo, hi in
          ((0, .1), (.1, .2), (.2, .4), (.4, .7), (.7, 1), (1, 1.5), (1.5, 2), (2, 3))],
          "clocks", [s[1] for s in samples[::10]], "power", [round(s[2]) for s in samples[::10]], flush=True)
json.dump(out, open(sys.argv[1], "w"))
