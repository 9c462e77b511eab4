"""L3: the PyTorch build in the node's interpreter."""

from agents.cudaprobe.layers.common import torch_info
from agents.cudaprobe.layers.host import inventory
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check


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
    inventory(ctx)["torch"] = info["torch_version"]
    return passed("torch %s from %s" % (info["torch_version"], info.get("file")), evidence=info.get("file") or "",
                  metrics={"import_s": round(info.get("import_s", 0), 3)})


@check("torch.build", "L3", "A CUDA build of torch with NCCL and cuDNN", requires=["torch.import"])
def torch_build(ctx):
    info = torch_info(ctx).result
    inv = inventory(ctx)
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
