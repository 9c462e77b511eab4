"""L4: CUDA context and memory, as torch sees them (availability, allocation, bandwidth, matmul, P2P).

The functions marked @gpu_task run in a GPU worker (worker.py); the checks judge what they return.
"""

import time

from agents.cudaprobe import children
from agents.cudaprobe.checks.torch import cuda_device_count, torch_info
from agents.cudaprobe.judge import per_gpu_metrics, slow_siblings, task_failure
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check, gpu_task

BENCH_MODES = ("standard", "full")
L4_BASE = ["driver.nvidia_smi", "driver.kernel_modules", "driver.device_nodes", "torch.build"]


# ---- on the GPU worker

def _sync_time(torch, device, func, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        func()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / 1000.0 / iters


@gpu_task
def gpu_context(args):
    """Per GPU: context creation time, a 1 GiB allocation, a matmul checked against the CPU, memory."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    gpus = []
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 1024, generator=generator)
    b = torch.randn(1024, 1024, generator=generator)
    reference = (a.double() @ b.double())
    for index in range(torch.cuda.device_count()):
        entry = {"index": index}
        started = time.perf_counter()
        torch.cuda.set_device(index)
        torch.zeros(1, device=index)
        torch.cuda.synchronize(index)
        entry["context_s"] = time.perf_counter() - started
        started = time.perf_counter()
        block = torch.ones(256 * 2**20, dtype=torch.int32, device=index)  # 1 GiB
        entry["alloc_ok"] = int(block.sum().item()) == 256 * 2**20
        entry["alloc_s"] = time.perf_counter() - started
        del block
        product = (a.to(index) @ b.to(index)).double().cpu()
        entry["matmul_rel_err"] = float((product - reference).abs().max() / reference.abs().max())
        free, total = torch.cuda.mem_get_info(index)
        entry.update(free_gib=free / 2**30, total_gib=total / 2**30,
                     allocated_mib=torch.cuda.memory_allocated(index) / 2**20,
                     reserved_mib=torch.cuda.memory_reserved(index) / 2**20)
        gpus.append(entry)
    return {"gpus": gpus}


@gpu_task
def gpu_copy_bandwidth(args):
    """Host<->device copy bandwidth per GPU, pinned and pageable, timed with CUDA events."""
    import torch

    size = int(args.get("mib", 256)) * 2**20
    iters = int(args.get("iters", 10))
    gpus = []
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        device_buf = torch.empty(size, dtype=torch.uint8, device=index)
        entry = {"index": index}
        for kind, host_buf in (("pinned", torch.empty(size, dtype=torch.uint8).pin_memory()),
                               ("pageable", torch.empty(size, dtype=torch.uint8))):
            host_buf.fill_(1)
            for direction, func in (("h2d", lambda: device_buf.copy_(host_buf, non_blocking=True)),
                                    ("d2h", lambda: host_buf.copy_(device_buf, non_blocking=True))):
                func()
                torch.cuda.synchronize(index)
                seconds = _sync_time(torch, index, func, iters)
                entry["%s_%s_gbs" % (direction, kind)] = size / seconds / 1e9
        gpus.append(entry)
    return {"gpus": gpus}


@gpu_task
def gpu_matmul(args):
    """Dense matmul TFLOP/s per GPU and dtype (n x n x n), after warm-up."""
    import torch

    n = int(args.get("n", 8192))
    plans = (("bf16", torch.bfloat16, False, 30), ("fp16", torch.float16, False, 30),
             ("tf32", torch.float32, True, 10), ("fp32", torch.float32, False, 4))
    gpus = []
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        entry = {"index": index}
        for name, dtype, tf32, iters in plans:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=index, dtype=dtype)
            b = torch.randn(n, n, device=index, dtype=dtype)
            for _ in range(3):
                a @ b
            seconds = _sync_time(torch, index, lambda: a @ b, iters)
            entry["%s_tflops" % name] = 2 * n**3 / seconds / 1e12
            del a, b
        torch.backends.cuda.matmul.allow_tf32 = False
        gpus.append(entry)
        torch.cuda.empty_cache()
    return {"gpus": gpus}


@gpu_task
def gpu_p2p(args):
    """Peer access matrix and device-to-device copy bandwidth between every ordered pair."""
    import torch

    count = torch.cuda.device_count()
    size = int(args.get("mib", 1024)) * 2**20
    pairs = []
    for src in range(count):
        for dst in range(count):
            if src == dst:
                continue
            entry = {"src": src, "dst": dst, "access": bool(torch.cuda.can_device_access_peer(src, dst))}
            a = torch.empty(size, dtype=torch.uint8, device=src)
            b = torch.empty(size, dtype=torch.uint8, device=dst)
            b.copy_(a)
            torch.cuda.synchronize(src)
            torch.cuda.synchronize(dst)
            with torch.cuda.device(src):
                entry["copy_gbs"] = size / _sync_time(torch, src, lambda: b.copy_(a, non_blocking=True), 10) / 1e9
            torch.cuda.synchronize(dst)
            pairs.append(entry)
            del a, b
    return {"pairs": pairs}


# ---- in the agent


@check("cuda.available", "L4", "torch.cuda.is_available and the device count",
       requires=L4_BASE + ["host.cuda_visible_devices"])
def cuda_available(ctx):
    info = torch_info(ctx).result
    visible = ctx.facts.get("visible_devices")
    driver_count = len(ctx.facts.get("driver_gpus") or [])
    expected = driver_count if visible is None else min(driver_count, len(visible))
    notes = "\n".join(info.get("notes", []))
    evidence = "is_available=%s device_count=%s driver lists %d GPU(s); CUDA_VISIBLE_DEVICES=%s\n%s" % (
        info.get("is_available"), info.get("device_count"), driver_count,
        ctx.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"), notes)
    metrics = {"device_count": info.get("device_count", 0), "is_available_s": round(info.get("is_available_s", 0), 3)}
    if visible is not None and not visible:
        return failed("CUDA_VISIBLE_DEVICES=%r hides every GPU from torch" % ctx.environ.get("CUDA_VISIBLE_DEVICES"),
                      evidence=evidence, metrics=metrics, signatures=["cuda_visible_devices_empty"])
    if not info.get("is_available"):
        return failed("torch.cuda.is_available() is False although the driver lists %d GPU(s)" % driver_count,
                      evidence=evidence, metrics=metrics, signatures=["cuda_unavailable"])
    if info.get("device_count") != expected:
        return failed("torch sees %s GPU(s), the driver lists %d%s" % (
            info.get("device_count"), driver_count, "" if visible is None else " (%d made visible)" % len(visible)),
            evidence=evidence, metrics=metrics, signatures=["device_count_mismatch"])
    return passed("%d GPU(s) available to torch" % info["device_count"], evidence=evidence, metrics=metrics)


@check("cuda.context", "L4", "Context creation, allocation and a matmul checked on the CPU",
       requires=["cuda.available"], budget_s=120)
def cuda_context(ctx):
    outcome = children.run_task(ctx, gpu_context)
    if outcome.timed_out or not outcome.result or outcome.error:
        return task_failure(outcome, "CUDA context test", "cuda_context_failed", "cuda_init_hang")
    gpus = outcome.result["gpus"]
    metrics = {"gpu_count": len(gpus)}
    per_gpu_metrics(metrics, "context_s", {g["index"]: g["context_s"] for g in gpus})
    metrics["context_s"] = round(max(g["context_s"] for g in gpus), 3)  # the slowest GPU is the finding
    per_gpu_metrics(metrics, "free_gib", {g["index"]: g["free_gib"] for g in gpus})
    metrics["total_gib"] = round(min(g["total_gib"] for g in gpus), 2)
    metrics["matmul_rel_err"] = max(g["matmul_rel_err"] for g in gpus)
    evidence = "\n".join(
        "GPU %(index)d: context %(context_s).3f s, 1 GiB alloc ok=%(alloc_ok)s in %(alloc_s).3f s, "
        "matmul rel err %(matmul_rel_err).2e, free %(free_gib).1f / %(total_gib).1f GiB" % g for g in gpus)
    bad_alloc = [g["index"] for g in gpus if not g["alloc_ok"]]
    wrong = [g["index"] for g in gpus if g["matmul_rel_err"] > 1e-3]
    if bad_alloc:
        return failed("allocation test read back wrong values on GPU %s" % bad_alloc, evidence=evidence,
                      metrics=metrics, signatures=["alloc_wrong_result"])
    if wrong:
        return failed("matmul differs from the CPU result on GPU %s" % wrong, evidence=evidence, metrics=metrics,
                      signatures=["matmul_wrong_result"])
    low = [g["index"] for g in gpus if g["free_gib"] < 0.9 * g["total_gib"]]
    if low:
        return warned("GPU %s has under 90%% of its memory free before any work" % low, evidence=evidence,
                      metrics=metrics, signatures=["gpu_memory_held_by_process"])
    return passed("%d GPU(s): contexts in %.2f s at most, 1 GiB allocations and matmul correct" % (
        len(gpus), metrics["context_s"]), evidence=evidence, metrics=metrics)


@check("cuda.copy_bandwidth", "L4", "Host-device copy bandwidth, pinned and pageable",
       requires=["cuda.context"], modes=BENCH_MODES, budget_s=120)
def cuda_copy_bandwidth(ctx):
    outcome = children.run_task(ctx, gpu_copy_bandwidth, {"mib": 256, "iters": 10 if ctx.mode == "standard" else 30})
    if outcome.timed_out or not outcome.result or outcome.error:
        return task_failure(outcome, "copy bandwidth test", "copy_failed")
    gpus = outcome.result["gpus"]
    metrics = {}
    for key in ("h2d_pinned_gbs", "d2h_pinned_gbs", "h2d_pageable_gbs", "d2h_pageable_gbs"):
        per_gpu_metrics(metrics, key, {g["index"]: g[key] for g in gpus})
    ctx.facts["copy_bandwidth"] = gpus
    evidence = "\n".join("GPU %(index)d: H2D pinned %(h2d_pinned_gbs).1f, D2H pinned %(d2h_pinned_gbs).1f, "
                         "H2D pageable %(h2d_pageable_gbs).1f, D2H pageable %(d2h_pageable_gbs).1f GB/s" % g
                         for g in gpus)
    ceiling = ctx.facts.get("pcie_max_gbs")
    slow = slow_siblings({g["index"]: g["h2d_pinned_gbs"] for g in gpus})
    if ceiling and metrics["h2d_pinned_gbs"] < 0.6 * ceiling:
        return warned("pinned H2D %.1f GB/s is under 60%% of the link's %.1f GB/s" % (metrics["h2d_pinned_gbs"],
                      ceiling), evidence=evidence, metrics=metrics, signatures=["copy_bandwidth_low"])
    if slow:
        return warned("GPU %s copies far slower than its siblings" % slow, evidence=evidence, metrics=metrics,
                      signatures=["gpu_slower_than_siblings"])
    return passed("pinned H2D %.1f / D2H %.1f GB/s (worst GPU)%s" % (
        metrics["h2d_pinned_gbs"], metrics["d2h_pinned_gbs"],
        ", link ceiling %.1f GB/s" % ceiling if ceiling else ""), evidence=evidence, metrics=metrics)


@check("cuda.matmul", "L4", "Matmul throughput (bf16, fp16, TF32, fp32)", requires=["cuda.context"],
       modes=BENCH_MODES, budget_s=120)
def cuda_matmul(ctx):
    outcome = children.run_task(ctx, gpu_matmul, {"n": 8192})
    if outcome.timed_out or not outcome.result or outcome.error:
        return task_failure(outcome, "matmul benchmark", "matmul_failed")
    gpus = outcome.result["gpus"]
    metrics = {}
    for name in ("bf16", "fp16", "tf32", "fp32"):
        per_gpu_metrics(metrics, "matmul_%s_tflops" % name, {g["index"]: g["%s_tflops" % name] for g in gpus})
    ctx.facts["matmul"] = gpus
    evidence = "\n".join("GPU %(index)d: bf16 %(bf16_tflops).0f, fp16 %(fp16_tflops).0f, tf32 %(tf32_tflops).0f, "
                         "fp32 %(fp32_tflops).1f TFLOP/s (8192^3)" % g for g in gpus)
    slow = slow_siblings({g["index"]: g["bf16_tflops"] for g in gpus})
    if slow:
        return warned("GPU %s computes far slower than its siblings (bf16)" % slow, evidence=evidence,
                      metrics=metrics, signatures=["gpu_slower_than_siblings"])
    return passed("bf16 %.0f, fp16 %.0f, TF32 %.0f, fp32 %.1f TFLOP/s (worst GPU)" % tuple(
        metrics["matmul_%s_tflops" % n] for n in ("bf16", "fp16", "tf32", "fp32")), evidence=evidence,
        metrics=metrics)


@check("cuda.p2p", "L4", "Peer access and GPU-to-GPU copy bandwidth", requires=["cuda.context"],
       modes=BENCH_MODES, budget_s=120)
def cuda_p2p(ctx):
    if cuda_device_count(ctx) < 2:
        return skipped("one GPU: no peer to test")
    outcome = children.run_task(ctx, gpu_p2p, {"mib": 1024})
    if outcome.timed_out or not outcome.result or outcome.error:
        return task_failure(outcome, "P2P test", "p2p_failed")
    pairs = outcome.result["pairs"]
    metrics = {"p2p_copy_gbs": round(min(p["copy_gbs"] for p in pairs), 1)}
    for p in pairs:
        metrics["p2p_copy_gbs.%d_%d" % (p["src"], p["dst"])] = round(p["copy_gbs"], 1)
    evidence = "\n".join("GPU %(src)d -> %(dst)d: peer access %(access)s, %(copy_gbs).0f GB/s" % p for p in pairs)
    no_access = ["%d->%d" % (p["src"], p["dst"]) for p in pairs if not p["access"]]
    if no_access:
        return warned("no peer access for %s: copies bounce through the host" % ", ".join(no_access),
                      evidence=evidence, metrics=metrics, signatures=["p2p_unavailable"])
    return passed("peer access between all %d pairs, slowest copy %.0f GB/s" % (len(pairs), metrics["p2p_copy_gbs"]),
                  evidence=evidence, metrics=metrics)
