"""L4: CUDA context and memory, as torch sees them (availability, allocation, bandwidth, matmul, P2P)."""

from agents.cudaprobe import children
from agents.cudaprobe.layers.common import (
    cuda_device_count, per_gpu_metrics, signature_for_error, slow_siblings, torch_info,
)
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check

BENCH_MODES = ("standard", "full")
L4_BASE = ["driver.nvidia_smi", "driver.kernel_modules", "driver.device_nodes", "torch.build"]


def _child_failure(outcome, what, default_signature):
    if outcome.timed_out:
        signature = "cuda_init_hang" if default_signature == "cuda_context_failed" else default_signature + "_hang"
        return failed("%s did not finish within its budget: the child was killed" % what,
                      evidence=outcome.evidence(), signatures=[signature])
    message = (outcome.result or {}).get("message", "") if outcome.result else outcome.command.stderr[-300:]
    text = outcome.evidence()
    return failed("%s failed: %s" % (what, message[:300] or "exit %s" % outcome.command.returncode),
                  evidence=text, signatures=[signature_for_error(text, default_signature)])


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
    outcome = children.run_task(ctx, "context")
    if outcome.timed_out or not outcome.result or outcome.error:
        return _child_failure(outcome, "CUDA context test", "cuda_context_failed")
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
    outcome = children.run_task(ctx, "copy_bandwidth", {"mib": 256, "iters": 10 if ctx.mode == "standard" else 30})
    if outcome.timed_out or not outcome.result or outcome.error:
        return _child_failure(outcome, "copy bandwidth test", "copy_failed")
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
    outcome = children.run_task(ctx, "matmul", {"n": 8192})
    if outcome.timed_out or not outcome.result or outcome.error:
        return _child_failure(outcome, "matmul benchmark", "matmul_failed")
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
    outcome = children.run_task(ctx, "p2p", {"mib": 1024})
    if outcome.timed_out or not outcome.result or outcome.error:
        return _child_failure(outcome, "P2P test", "p2p_failed")
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
