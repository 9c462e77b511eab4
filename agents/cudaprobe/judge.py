"""Helpers shared by the layers that run torch in child processes."""

import statistics

from agents.cudaprobe import children

CUDA_ERROR_SIGNATURES = (
    ("out of memory", "oom"),
    ("busy or unavailable", "compute_mode_busy"),
    ("illegal memory access", "illegal_access"),
    ("misaligned address", "illegal_access"),
    ("device-side assert", "illegal_access"),
    ("no kernel image is available", "arch_not_in_build"),
    ("forward compatibility", "driver_too_old_for_build"),
    ("driver version is insufficient", "driver_too_old_for_build"),
    ("address already in use", "rendezvous_port_in_use"),
    ("eaddrinuse", "rendezvous_port_in_use"),
    ("ncclsystemerror", "nccl_network"),
    ("ncclremoteerror", "nccl_network"),
    ("nccl error", "nccl_failed"),
    ("watchdog caught collective operation timeout", "nccl_hang"),
)


def signature_for_error(text, default):
    lowered = (text or "").lower()
    for needle, signature in CUDA_ERROR_SIGNATURES:
        if needle in lowered:
            return signature
    return default


def torch_info(ctx):
    """The torch facts of this interpreter, found once per run in a child process."""
    if "torch_info" not in ctx.facts:
        outcome = ctx.facts["torch_info"] = children.run_task(ctx, "torch_info", timeout=90)
        if outcome.ok and ctx.mode != "quick":
            # The other ranks' workers import torch now, while rank 0 runs L4; gloo wants two ranks even
            # on a one-GPU host.
            children.local_pool(ctx).start(range(max(2, outcome.result.get("device_count", 0))))
    return ctx.facts["torch_info"]


def cuda_device_count(ctx):
    outcome = ctx.facts.get("torch_info")
    if outcome is None or not outcome.result or outcome.error:
        return 0
    return outcome.result.get("device_count", 0)


def slow_siblings(values, ratio=0.85):
    """Indices whose figure falls below `ratio` x the median of all GPUs of this host."""
    if len(values) < 2:
        return []
    median = statistics.median(values.values())
    return sorted(k for k, v in values.items() if v < ratio * median)


def per_gpu_metrics(metrics, name, values):
    """Record the worst GPU under `name` (what gates a node) and each GPU under name.gpuN."""
    if not values:
        return
    metrics[name] = round(min(values.values()), 2)
    for index, value in values.items():
        metrics["%s.gpu%s" % (name, index)] = round(value, 2)
