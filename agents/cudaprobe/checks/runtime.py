"""L2: the CUDA user-space libraries and the driver's CUDA version against the torch build's."""

import re

from agents.cudaprobe import proc
from agents.cudaprobe.checks.torch import torch_info
from agents.cudaprobe.model import failed, passed, warned
from agents.cudaprobe.registry import check


def _ldconfig(ctx):
    for argv in (["ldconfig", "-p"], ["/sbin/ldconfig", "-p"]):
        result = proc.run(argv, 10, env=ctx.environ)
        if not result.missing:
            return result
    return result


@check("runtime.libraries", "L2", "libcuda found by the dynamic loader", budget_s=10)
def runtime_libraries(ctx):
    result = _ldconfig(ctx)
    if result.missing or not result.ok:
        return warned("could not list the loader cache (ldconfig -p)", evidence=result.combined(),
                      signatures=["ldconfig_unavailable"])
    found = {}
    for name in ("libcuda.so.1", "libnvidia-ml.so.1", "libcudart.so", "libnccl.so.2"):
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith(name)]
        if lines:
            found[name] = lines[0].split("=>")[-1].strip()
    evidence = "\n".join("%s => %s" % item for item in found.items()) or "no CUDA library in the loader cache"
    if "libcuda.so.1" not in found:
        return failed("libcuda.so.1 (the driver's CUDA library) is not in the loader cache", evidence=evidence,
                      signatures=["libcuda_missing"])
    return passed("libcuda at %s%s" % (found["libcuda.so.1"], "" if "libcudart.so" in found else
                                       "; no system libcudart (fine: pip and conda torch bundle their runtime)"),
                  evidence=evidence)


def _version(text):
    match = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


@check("runtime.driver_vs_build", "L2", "Driver CUDA version >= the torch build's CUDA version",
       requires=["driver.version", "torch.build"])
def runtime_driver_vs_build(ctx):
    driver = (ctx.facts.get("smi_q") or {}).get("cuda_version")
    build = torch_info(ctx).result.get("cuda")
    have, need = _version(driver), _version(build)
    evidence = "driver supports CUDA %s; torch built with CUDA %s" % (driver, build)
    if have is None or need is None:
        return warned("could not compare versions (%s)" % evidence, evidence=evidence, signatures=["version_unparsed"])
    if have[0] < need[0]:
        return failed("driver supports CUDA %s but torch needs %s: upgrade the driver or install a torch built "
                      "for CUDA %d.x" % (driver, build, have[0]), evidence=evidence,
                      signatures=["driver_too_old_for_build"])
    if have < need:
        return warned("driver's CUDA %s is older than the build's %s: runs under minor-version compatibility, "
                      "but PTX JIT and newer features need a newer driver" % (driver, build), evidence=evidence,
                      signatures=["driver_minor_older_than_build"])
    return passed("driver CUDA %s >= build CUDA %s" % (driver, build), evidence=evidence)


@check("runtime.nvcc", "L2", "nvcc (information only)", budget_s=10)
def runtime_nvcc(ctx):
    result = proc.run(["nvcc", "--version"], 10, env=ctx.environ)
    if result.missing or not result.ok:
        return passed("no nvcc on PATH: not needed by pip or conda builds of torch, which bundle their runtime")
    match = re.search(r"release (\d+\.\d+)", result.stdout)
    return passed("nvcc %s (only for compiling extensions; torch uses its own bundled runtime)" %
                  (match.group(1) if match else "?"), evidence=result.stdout[-400:])
