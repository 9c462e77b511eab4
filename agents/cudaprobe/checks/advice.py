"""Advisories: settings that cost performance or hide problems, from the environment and measured figures."""

from agents.cudaprobe.model import passed, warned
from agents.cudaprobe.registry import check

ENV_PITFALLS = {
    "CUDA_LAUNCH_BLOCKING": ("1", "serialises every kernel launch: a debugging aid that slows training"),
    "NCCL_P2P_DISABLE": ("1", "forces NCCL off NVLink/PCIe peer copies: an isolation experiment, not a default"),
    "NCCL_SHM_DISABLE": ("1", "forces NCCL off shared memory: an isolation experiment, not a default"),
    "NCCL_IB_DISABLE": ("1", "forces NCCL off InfiniBand/RoCE; NCCL already falls back to sockets when no IB "
                             "device exists, so this only slows multi-node jobs that have IB"),
    "NCCL_BLOCKING_WAIT": ("1", "makes every collective wait on the host"),
}


@check("advice.environment", "advisory", "Environment variables that slow or mask problems")
def advice_environment(ctx):
    found = ["%s=%s: %s" % (name, ctx.environ[name], why) for name, (value, why) in ENV_PITFALLS.items()
             if ctx.environ.get(name) == value]
    if found:
        return warned("%d setting(s) worth a second look" % len(found), evidence="\n".join(found),
                      signatures=["advice_env_override"])
    return passed("no NCCL or CUDA debugging overrides in the environment")


@check("advice.performance", "advisory", "What this host's own figures say about defaults",
       modes=("standard", "full"))
def advice_performance(ctx):
    notes, signatures = [], []
    copies = ctx.facts.get("copy_bandwidth") or []
    if copies:
        ratio = min(g["h2d_pinned_gbs"] / max(g["h2d_pageable_gbs"], 1e-9) for g in copies)
        if ratio > 1.5:
            notes.append("pinned host memory copies %.1fx faster than pageable here: use pin_memory=True in "
                         "DataLoader and non_blocking=True copies" % ratio)
            signatures.append("advice_pinned_memory")
    matmul = ctx.facts.get("matmul") or []
    if matmul:
        ratio = min(g["tf32_tflops"] / max(g["fp32_tflops"], 1e-9) for g in matmul)
        if ratio > 1.5:
            notes.append("TF32 matmul runs %.1fx faster than strict fp32 here; PyTorch leaves it off for matmul "
                         "(torch.backends.cuda.matmul.allow_tf32 / torch.set_float32_matmul_precision('high'))"
                         % ratio)
            signatures.append("advice_tf32")
    notes.append("torch.backends.cudnn.benchmark is off by default; for fixed input shapes turning it on lets "
                 "cuDNN pick the fastest convolution algorithms")
    signatures.append("advice_cudnn_benchmark")
    return passed("; ".join(notes[:1]) if notes else "nothing to advise", evidence="\n".join(notes),
                  signatures=signatures)
