"""L6: a ResNet-18 smoke training on synthetic data, per GPU and with DDP over all local GPUs."""

from agents.cudaprobe import children
from agents.cudaprobe.layers.common import cuda_device_count, per_gpu_metrics, slow_siblings
from agents.cudaprobe.layers.comm import _ok, _ranks_failure
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check

PLANS = {
    "standard": {"precisions": ["amp_bf16", "amp_fp16"], "steps": 20, "warmup": 5, "batch": 256},
    "full": {"precisions": ["fp32", "tf32", "amp_fp16", "amp_bf16"], "steps": 60, "warmup": 8, "batch": 256},
}


@check("train.resnet18", "L6", "ResNet-18 smoke training per GPU (fp32, TF32, AMP fp16/bf16)",
       requires=["cuda.context"], modes=("standard", "full"), budget_s=420)
def train_resnet18(ctx):
    world = cuda_device_count(ctx)
    plan = PLANS[ctx.mode]
    # One process per GPU, all at once: the same load on every GPU makes a slow one stand out.
    outcomes = children.run_ranks(ctx, "train", world, plan)
    if not _ok(outcomes):
        return _ranks_failure(outcomes, "ResNet-18 training", "training_hang", "training_failed")
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
    outcomes = children.run_ranks(ctx, "ddp", world, plan)
    if not _ok(outcomes):
        return _ranks_failure(outcomes, "DDP training", "nccl_hang", "training_failed")
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
