"""How the checks judge what GPU tasks return: error texts to signatures, the one failure helper for a task that
did not succeed, and the per-GPU figures (worst GPU, slow siblings)."""

import statistics

from agents.cudaprobe.model import failed

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


def task_failure(outcomes, what, default_signature, hang_signature=None):
    """The failed Outcome of a GPU task that did not succeed on one rank or several.

    A rank's own error names the cause (its message leads, its text picks the signature); a hang is reported
    only when no rank said why, since a rank waiting for a dead peer hangs too.
    """
    outcomes = list(outcomes) if isinstance(outcomes, (list, tuple)) else [outcomes]
    text = "\n".join(o.evidence() for o in outcomes)
    if any(o.timed_out for o in outcomes) and not any(o.error for o in outcomes):
        killed = "the child was killed" if len(outcomes) == 1 else "every rank was killed"
        return failed("%s did not finish within its budget; %s" % (what, killed), evidence=text,
                      signatures=[hang_signature or default_signature + "_hang"])
    messages = [o.result.get("message", "") for o in outcomes if o.result and o.error]
    detail = messages[0] if messages else (text[-300:] or "exit %s" % outcomes[0].command.returncode)
    return failed("%s failed: %s" % (what, detail[:300]), evidence=text,
                  signatures=[signature_for_error(text, default_signature)])


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
