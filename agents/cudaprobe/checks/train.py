"""L6: a ResNet-18 smoke training on synthetic data, per GPU and with DDP over all local GPUs.

gpu_train and gpu_ddp run in one worker per GPU (worker.py); the checks judge what the ranks return.
"""

import math
import os
import time

from agents.cudaprobe import children
from agents.cudaprobe.checks.comm import init_group
from agents.cudaprobe.checks.torch import cuda_device_count
from agents.cudaprobe.judge import all_ok, per_gpu_metrics, slow_siblings, task_failure
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check, gpu_task

PLANS = {
    "standard": {"precisions": ["amp_bf16", "amp_fp16"], "steps": 20, "warmup": 5, "batch": 256},
    "full": {"precisions": ["fp32", "tf32", "amp_fp16", "amp_bf16"], "steps": 60, "warmup": 8, "batch": 256},
}


# ---- on the GPU workers, one per GPU

def _synthetic_batches(torch, device, batch, count, classes, channels_last):
    """Random images and labels made on the GPU itself (seeded): no dataset, no host-side cost."""
    generator = torch.Generator(device=device).manual_seed(1234)
    batches = []
    for _ in range(count):
        images = torch.randn(batch, 3, 224, 224, generator=generator, device=device)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, classes, (batch,), generator=generator, device=device)
        batches.append((images, labels))
    return batches


def _train_loop(torch, model, batches, precision, steps, warmup, device, sampler_epochs=None):
    """Steps of SGD with the precision's recipe; returns losses and the seconds of the timed steps."""
    from torch import nn

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    use_amp = precision.startswith("amp_")
    amp_dtype = torch.bfloat16 if precision == "amp_bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=(precision == "amp_fp16"))
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    losses = []
    started = None
    for step in range(steps + warmup):
        if step == warmup:
            torch.cuda.synchronize(device)
            started = time.perf_counter()
        images, labels = batches[step % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        # Only the forward pass and the loss run under autocast; backward and the
        # scaler's step/update stay outside it.
        with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # gradients in true units before clipping
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(float(loss.detach()))
    torch.cuda.synchronize(device)
    return losses, time.perf_counter() - started


@gpu_task
def gpu_train(args):
    """ResNet-18 on synthetic data on one GPU, in each requested precision."""
    import torch

    from agents.cudaprobe.resnet import ResNet18

    index = int(args.get("gpu", os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(index)
    device = torch.device("cuda", index)
    torch.backends.cudnn.benchmark = True
    batch, steps, warmup = int(args.get("batch", 256)), int(args.get("steps", 30)), int(args.get("warmup", 5))
    batches = _synthetic_batches(torch, device, batch, 4, 10, True)
    results = {}
    for precision in args.get("precisions", ["amp_bf16"]):
        torch.manual_seed(0)
        model = ResNet18(10).to(device).to(memory_format=torch.channels_last)
        torch.cuda.reset_peak_memory_stats(device)
        losses, seconds = _train_loop(torch, model, batches, precision, steps, warmup, device)
        results[precision] = {
            "img_s": batch * steps / seconds,
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30,
            "loss_first": losses[0], "loss_last": losses[-1],
            "loss_head": sum(losses[:3]) / 3, "loss_tail": sum(losses[-3:]) / 3,
            "finite": all(math.isfinite(x) for x in losses),
        }
        del model
        torch.cuda.empty_cache()
    return {"gpu": index, "batch": batch, "steps": steps, "precisions": results}


@gpu_task
def gpu_ddp(args):
    """ResNet-18 DDP, AMP bf16, one rank per GPU, DistributedSampler with set_epoch each epoch."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DistributedSampler

    from agents.cudaprobe.resnet import ResNet18

    dist, rank, world, init_s = init_group(torch, "nccl", args)
    device = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cudnn.benchmark = True
    batch, steps, warmup = int(args.get("batch", 256)), int(args.get("steps", 30)), int(args.get("warmup", 5))
    pool = _synthetic_batches(torch, device, batch, 4, 10, True)
    images = torch.cat([b[0] for b in pool])
    labels = torch.cat([b[1] for b in pool])
    sampler = DistributedSampler(range(len(labels)), num_replicas=world, rank=rank, shuffle=True, seed=0)
    torch.manual_seed(0)
    model = DistributedDataParallel(ResNet18(10).to(device).to(memory_format=torch.channels_last),
                                    device_ids=[device.index])
    epoch_batches = []
    epoch = 0
    while len(epoch_batches) < steps + warmup:
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        order = list(sampler)
        for start in range(0, len(order) - batch + 1, batch):
            index = torch.tensor(order[start:start + batch], device=device)
            epoch_batches.append((images.index_select(0, index), labels.index_select(0, index)))
        epoch += 1
    dist.barrier()
    try:
        losses, seconds = _train_loop(torch, model, epoch_batches, "amp_bf16", steps, warmup, device)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "world": world, "batch": batch, "steps": steps, "img_s_rank": batch * steps / seconds,
            "img_s_total": world * batch * steps / seconds, "loss_first": losses[0], "loss_last": losses[-1],
            "finite": all(math.isfinite(x) for x in losses)}


# ---- in the agent


@check("train.resnet18", "L6", "ResNet-18 smoke training per GPU (fp32, TF32, AMP fp16/bf16)",
       requires=["cuda.context"], modes=("standard", "full"), budget_s=420)
def train_resnet18(ctx):
    world = cuda_device_count(ctx)
    plan = PLANS[ctx.mode]
    # One process per GPU, all at once: the same load on every GPU makes a slow one stand out.
    outcomes = children.run_ranks(ctx, gpu_train, world, plan)
    if not all_ok(outcomes):
        return task_failure(outcomes, "ResNet-18 training", "training_failed", "training_hang")
    runs = {o.result["gpu"]: o.result["precisions"] for o in outcomes}
    ctx.facts["train"] = runs
    metrics, lines, problems, signatures = {}, [], [], []
    for precision in plan["precisions"]:
        per_gpu_metrics(metrics, "resnet18_%s_img_s" % precision, {g: r[precision]["img_s"] for g, r in runs.items()})
        per_gpu_metrics(metrics, "resnet18_%s_peak_mem_gib" % precision,
                        {g: r[precision]["peak_mem_gib"] for g, r in runs.items()})
        for gpu, r in sorted(runs.items()):
            figures = r[precision]
            lines.append("GPU %d %-8s %8.0f img/s  peak %.2f GiB  loss %.3f -> %.3f" % (
                gpu, precision, figures["img_s"], figures["peak_mem_gib"], figures["loss_first"],
                figures["loss_last"]))
            if not figures["finite"]:
                problems.append("GPU %d %s: loss became inf/nan" % (gpu, precision))
                signatures.append("loss_not_finite")
            elif not figures["loss_tail"] < 0.9 * figures["loss_head"]:
                problems.append("GPU %d %s: loss did not fall (%.3f -> %.3f)" % (
                    gpu, precision, figures["loss_head"], figures["loss_tail"]))
                signatures.append("loss_not_decreasing")
        slow = slow_siblings({g: r[precision]["img_s"] for g, r in runs.items()})
        if slow:
            problems.append("GPU %s trains far slower than its siblings (%s)" % (slow, precision))
            signatures.append("gpu_slower_than_siblings")
    evidence = "\n".join(lines)
    if "loss_not_finite" in signatures or "loss_not_decreasing" in signatures:
        return failed("; ".join(problems), evidence=evidence, metrics=metrics, signatures=sorted(set(signatures)))
    if problems:
        return warned("; ".join(problems), evidence=evidence, metrics=metrics, signatures=sorted(set(signatures)))
    best = plan["precisions"][-1]
    return passed("%d GPU(s) trained in %s; %s %.0f img/s on the slowest GPU; loss fell and stayed finite" % (
        len(runs), ", ".join(plan["precisions"]), best, metrics["resnet18_%s_img_s" % best]),
        evidence=evidence, metrics=metrics)


@check("train.ddp", "L6", "ResNet-18 DDP over all local GPUs (AMP bf16)", requires=["train.resnet18", "comm.nccl"],
       modes=("standard", "full"), budget_s=300)
def train_ddp(ctx):
    world = cuda_device_count(ctx)
    if world < 2:
        return skipped("one GPU: DDP needs two local ranks")
    plan = dict(PLANS[ctx.mode], timeout_s=60)
    outcomes = children.run_ranks(ctx, gpu_ddp, world, plan)
    if not all_ok(outcomes):
        return task_failure(outcomes, "DDP training", "training_failed", "nccl_hang")
    result = outcomes[0].result
    single = ctx.facts.get("train", {})
    single_total = sum(r["amp_bf16"]["img_s"] for r in single.values() if "amp_bf16" in r)
    metrics = {"ddp_amp_bf16_img_s": round(result["img_s_total"], 1), "ddp_world": world}
    if single_total:
        metrics["ddp_scaling"] = round(result["img_s_total"] / single_total, 3)
    evidence = "world %d, %d steps of %d per rank: %.0f img/s in total; single-GPU sum %.0f img/s; loss %.3f -> %.3f" % (
        world, result["steps"], result["batch"], result["img_s_total"], single_total, result["loss_first"],
        result["loss_last"])
    if not all(o.result["finite"] for o in outcomes):
        return failed("DDP loss became inf/nan", evidence=evidence, metrics=metrics, signatures=["loss_not_finite"])
    if metrics.get("ddp_scaling", 1) < 0.8:
        return warned("DDP reaches %.0f%% of %d x single-GPU throughput" % (100 * metrics["ddp_scaling"], world),
                      evidence=evidence, metrics=metrics, signatures=["ddp_scaling_low"])
    return passed("DDP %.0f img/s over %d GPUs%s" % (
        result["img_s_total"], world, " (%.0f%% scaling)" % (100 * metrics["ddp_scaling"]) if single_total else ""),
        evidence=evidence, metrics=metrics)
