"""L3: the PyTorch build in the node's interpreter, and the torch facts every GPU check reads (torch_info)."""

import time

from agents.cudaprobe import children
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check, gpu_task


def config_flags(torch):
    flags = {}
    try:
        text = torch.__config__.show()
    except Exception:
        return flags
    for name in ("USE_CUDA", "USE_CUDNN", "USE_NCCL", "USE_GLOO", "CUDA_VERSION"):
        marker = name + "="
        if marker in text:
            flags[name] = text.split(marker, 1)[1].split(",", 1)[0].strip()
    return flags


@gpu_task
def gpu_torch_info(args):
    """The torch facts of this interpreter: version, build, libraries, the GPUs it sees (runs in a worker)."""
    started = time.perf_counter()
    import torch

    info = {"import_s": args.get("torch_import_s", time.perf_counter() - started),
            "torch_version": str(torch.__version__), "cuda": torch.version.cuda,
            "file": getattr(torch, "__file__", None), "config": config_flags(torch)}
    for key, getter in (
        ("cudnn", lambda: torch.backends.cudnn.version()),
        ("nccl", lambda: ".".join(map(str, torch.cuda.nccl.version()))),
        ("arch_list", lambda: torch.cuda.get_arch_list()),
        ("nccl_available", lambda: torch.distributed.is_available() and torch.distributed.is_nccl_available()),
        ("gloo_available", lambda: torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    ):
        try:
            info[key] = getter()
        except Exception as exc:
            info[key] = None
            info.setdefault("notes", []).append("%s: %s" % (key, exc))
    started = time.perf_counter()
    info["is_available"] = bool(torch.cuda.is_available())
    info["device_count"] = int(torch.cuda.device_count()) if info["is_available"] else 0
    info["is_available_s"] = time.perf_counter() - started
    devices = []
    for index in range(info["device_count"]):
        props = torch.cuda.get_device_properties(index)
        devices.append({"index": index, "name": props.name, "capability": "%d.%d" % (props.major, props.minor),
                        "total_memory_gib": props.total_memory / 2**30, "sm_count": props.multi_processor_count})
    info["devices"] = devices
    return info


def torch_info(ctx):
    """The torch facts of this interpreter, found once per run in a worker."""
    if "torch_info" not in ctx.facts:
        # Every GPU gets its own worker (L4 runs on each at once) and gloo wants two ranks even on a one-GPU host:
        # start them all now, so that they import torch while rank 0 answers this.
        gpus = len(ctx.facts.get("driver_gpus") or [])
        visible = ctx.facts.get("visible_devices")
        gpus = gpus if visible is None else min(gpus, len(visible))
        children.local_pool(ctx).start(range(max(1, gpus) if ctx.mode == "quick" else max(2, gpus)))
        if ctx.trainers is not None:  # the run trains (cli.prestart_workers): every GPU gets its training worker
            ctx.trainers.start(range(max(1, gpus)))
        ctx.facts["torch_info"] = children.run_task(ctx, gpu_torch_info, timeout=90)
    return ctx.facts["torch_info"]


def torch_version(ctx):
    """(major, minor) of this interpreter's torch, or None."""
    outcome = ctx.facts.get("torch_info")
    version = (outcome.result or {}).get("torch_version", "") if outcome is not None else ""
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def torch_too_old(ctx, minimum):
    """A warning Outcome when torch is older than `minimum` (major, minor), else None: such a check was not made
    for it, so its failure would say nothing about the node."""
    have = torch_version(ctx)
    if have is None or have >= minimum:
        return None
    return warned("torch %d.%d is too old for this check (it needs %d.%d or newer): not tested" % (have + minimum),
                  signatures=["torch_too_old_for_check"])


def cuda_device_count(ctx):
    outcome = ctx.facts.get("torch_info")
    if outcome is None or not outcome.result or outcome.error:
        return 0
    return outcome.result.get("device_count", 0)


@check("torch.import", "L3", "torch importable in the node's interpreter", budget_s=90)
def torch_import(ctx):
    outcome = torch_info(ctx)
    if outcome.timed_out:
        return failed("importing torch and querying CUDA did not finish in time", evidence=outcome.evidence(),
                      signatures=["torch_import_hang"])
    if outcome.result is None:
        return failed("torch probe printed no result (exit %s)" % outcome.command.returncode,
                      evidence=outcome.evidence(), signatures=["agent_child_failed"])
    if outcome.error:
        signature = "torch_missing" if outcome.error in ("ModuleNotFoundError", "ImportError") else "torch_import_failed"
        return failed("torch cannot be imported: %s: %s" % (outcome.error, outcome.result.get("message", "")),
                      evidence=outcome.evidence(), signatures=[signature])
    info = outcome.result
    ctx.inventory()["torch"] = info["torch_version"]
    return passed("torch %s from %s" % (info["torch_version"], info.get("file")), evidence=info.get("file") or "",
                  metrics={"import_s": round(info.get("import_s", 0), 3)})


@check("torch.build", "L3", "A CUDA build of torch with NCCL and cuDNN", requires=["torch.import"])
def torch_build(ctx):
    info = torch_info(ctx).result
    inv = ctx.inventory()
    evidence = "torch %s, torch.version.cuda=%s, cudnn=%s, nccl=%s, config=%s" % (
        info["torch_version"], info.get("cuda"), info.get("cudnn"), info.get("nccl"), info.get("config"))
    if not info.get("cuda"):
        return failed("torch %s is a CPU-only build (torch.version.cuda is None): no GPU can be used" %
                      info["torch_version"], evidence=evidence, signatures=["torch_cpu_build"])
    inv["torch_cuda"] = info["cuda"]
    if info.get("cudnn"):
        inv["cudnn"] = str(info["cudnn"])
    if info.get("nccl"):
        inv["nccl"] = info["nccl"]
    summary = "torch %s built for CUDA %s, cuDNN %s, NCCL %s" % (
        info["torch_version"], info["cuda"], info.get("cudnn"), info.get("nccl"))
    if not info.get("nccl_available"):
        return warned(summary + ": built without NCCL, multi-GPU training falls back to gloo",
                      evidence=evidence, signatures=["torch_no_nccl"])
    return passed(summary, evidence=evidence)


def arch_supported(capability, arch_list):
    """True when the build carries SASS for this capability or PTX it can JIT from."""
    major, minor = (int(x) for x in capability.split("."))
    want = major * 10 + minor
    for arch in arch_list or []:
        kind, _, number = arch.partition("_")
        digits = "".join(ch for ch in number if ch.isdigit())
        if not digits:
            continue
        have = int(digits)
        if kind == "sm" and have == want:
            return True
        if kind == "sm" and have // 10 == major and have <= want:  # same-major SASS is binary compatible
            return True
        if kind == "compute" and have <= want:
            return True
    return False


@check("torch.arch", "L3", "GPU architecture present in the build", requires=["torch.build", "driver.nvidia_smi"])
def torch_arch(ctx):
    info = torch_info(ctx).result
    devices = info.get("devices") or []
    if not devices:
        return skipped("torch sees no GPU to compare with the build's architectures")
    arch_list = info.get("arch_list") or []
    missing = sorted({d["capability"] for d in devices if not arch_supported(d["capability"], arch_list)})
    evidence = "arch list: %s; devices: %s" % (arch_list, ", ".join("%s (%s)" % (d["name"], d["capability"])
                                                                    for d in devices))
    if missing:
        return failed("compute capability %s not in this build's architectures %s ('no kernel image is "
                      "available for execution on the device')" % (", ".join(missing), arch_list),
                      evidence=evidence, signatures=["arch_not_in_build"])
    return passed("capability %s covered by %s" % (", ".join(sorted({d["capability"] for d in devices})),
                                                  " ".join(arch_list)), evidence=evidence)
